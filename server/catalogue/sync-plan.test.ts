/**
 * The refresh plan as a pure function: rows and a listing in, what the refresh writes out — no
 * store involved. (The writer and the plan together are checked against SQLite in
 * catalogue.test.ts and the sync-feed tests.)
 */
import type { Tool } from "@modelcontextprotocol/client";
import { describe, expect, it } from "vitest";
import { definitionHash, definitionOf, type ToolDefinition } from "./definition";
import type { ToolRow } from "./rows";
import { planRefresh, type RefreshInput } from "./sync-plan";

function tool(name: string, over: Partial<Tool> = {}): Tool {
  return {
    name,
    description: `the ${name} tool`,
    inputSchema: { type: "object", properties: { q: { type: "string" } } },
    ...over,
  } as Tool;
}

/** The row a refresh of server "srv" would have stored for `t`, then changed by `over`. */
function rowOf(t: Tool, over: Partial<ToolRow> = {}): ToolRow {
  const def = definitionOf(t);
  return {
    localName: `srv_${t.name}`,
    server: "srv",
    remoteName: t.name,
    status: "proposed",
    present: true,
    definition: JSON.stringify(def),
    definitionHash: definitionHash(def),
    pinnedHash: null,
    pinnedDefinition: null,
    vouchedHash: null,
    vouchedBy: null,
    vouchedAt: null,
    alwaysConfirm: false,
    description: def.description,
    readOnly: false,
    unusableReason: null,
    excluded: false,
    firstSeenAt: "2026-01-01T00:00:00.000Z",
    updatedAt: "2026-01-01T00:00:00.000Z",
    ...over,
  };
}

/** An enabled row pinned to `t`'s definition, as an owner's enable leaves it. */
function enabledRow(t: Tool, over: Partial<ToolRow> = {}): ToolRow {
  const r = rowOf(t);
  return { ...r, status: "enabled", pinnedHash: r.definitionHash, pinnedDefinition: r.definition, ...over };
}

function plan(over: Partial<RefreshInput> & { maxTools?: number; allowTools?: string[] | null }) {
  const { maxTools = 12, allowTools = null, ...rest } = over;
  return planRefresh({
    server: { name: "srv", maxTools, allowTools },
    listed: [],
    rows: [],
    overCapBefore: new Set(),
    excludedBefore: new Set(),
    descriptionMaxChars: 1024,
    ...rest,
  });
}

const feedOf = (p: ReturnType<typeof plan>) => p.feed.map((c) => `${c.kind} ${c.tool}`);

describe("planRefresh: stable trimming", () => {
  it("new tools fill the slots left under maxTools in name order, whatever the listing order", () => {
    const p = plan({
      maxTools: 3,
      rows: [rowOf(tool("m"))],
      listed: [tool("d"), tool("a"), tool("m"), tool("b")],
    });
    expect(p.insert.map((r) => r.localName)).toEqual(["srv_a", "srv_b"]);
    expect(p.insert.every((r) => r.status === "proposed" && r.server === "srv")).toBe(true);
    expect(p.summary.added).toEqual(["srv_a", "srv_b"]);
    expect(p.summary.overCap).toEqual(["d"]);
  });

  it("listed tools with a row keep their place over the cap, returning ones included; newcomers wait", () => {
    const p = plan({
      maxTools: 2,
      rows: [rowOf(tool("y")), rowOf(tool("z"), { present: false })],
      listed: [tool("a"), tool("y"), tool("z")],
    });
    expect(p.insert).toEqual([]);
    expect(p.summary.returned).toEqual(["srv_z"]);
    expect(p.summary.overCap).toEqual(["a"]);
  });

  it("a row that is gone or excluded holds no slot; its exclusion is recorded on the row", () => {
    const p = plan({
      maxTools: 2,
      allowTools: ["a", "b", "y"],
      rows: [rowOf(tool("y")), rowOf(tool("x")), rowOf(tool("z"), { present: false })],
      listed: [tool("a"), tool("b"), tool("x"), tool("y")],
    });
    expect(p.summary.added).toEqual(["srv_a"]);
    expect(p.summary.overCap).toEqual(["b"]);
    expect(p.exclusion).toEqual([
      { localName: "srv_x", excluded: true },
      { localName: "srv_z", excluded: true },
    ]);
  });

  it("a tool newly over the cap gets a feed entry; one already over it does not", () => {
    const p = plan({ maxTools: 1, overCapBefore: new Set(["b"]), listed: [tool("a"), tool("b"), tool("c")] });
    expect(p.summary.overCap).toEqual(["b", "c"]);
    expect(p.feed.filter((c) => c.kind === "over_cap")).toEqual([
      { kind: "over_cap", tool: "c", localName: null, detail: { maxTools: 1 } },
    ]);
  });
});

describe("planRefresh: known tools", () => {
  it("a listing that changes nothing plans no row, feed entry or audit", () => {
    const a = tool("a");
    const p = plan({ rows: [enabledRow(a, { vouchedHash: "v", vouchedBy: "olive" })], listed: [a] });
    expect(p).toMatchObject({ insert: [], update: [], feed: [], audit: [] });
  });

  it("a changed definition is stored with its new hash while the pinned hash stays, so it reads as changed", () => {
    const before = enabledRow(tool("a", { annotations: { readOnlyHint: true } }));
    const next = tool("a", { description: "now deletes", annotations: { readOnlyHint: false } });
    const p = plan({ rows: [before], listed: [next] });
    const hash = definitionHash(definitionOf(next));
    expect(p.summary.changed).toEqual(["srv_a"]);
    expect(p.update).toEqual([
      {
        localName: "srv_a",
        set: {
          present: true,
          definition: JSON.stringify(definitionOf(next)),
          definitionHash: hash,
          description: "now deletes",
          readOnly: false,
          unusableReason: null,
          excluded: false,
        },
      },
    ]);
    expect(p.feed).toEqual([
      {
        kind: "changed",
        tool: "a",
        localName: "srv_a",
        detail: {
          status: "enabled",
          fromHash: before.definitionHash.slice(0, 12),
          toHash: hash.slice(0, 12),
          summary: ["description", "readOnlyHint: true → false"],
          riskier: true,
        },
      },
    ]);
  });

  it("a change back to the pinned definition is marked restored", () => {
    const pinned = tool("a");
    const row = enabledRow(pinned);
    const drifted = rowOf(tool("a", { description: "other" }));
    const p = plan({
      rows: [{ ...row, definition: drifted.definition, definitionHash: drifted.definitionHash }],
      listed: [pinned],
    });
    expect(p.feed[0]?.detail).toMatchObject({ restored: true });
  });

  it("a row enabled before pinned definitions were kept gets the replaced definition as its pin", () => {
    const row = enabledRow(tool("a"), { pinnedDefinition: null });
    const p = plan({ rows: [row], listed: [tool("a", { description: "v2" })] });
    expect(p.update[0]?.set.pinnedDefinition).toBe(row.definition);
  });

  it("a changed definition drops the vouch: columns cleared, a feed entry with who and when, an audit row", () => {
    const row = enabledRow(tool("a"), { vouchedBy: "olive", vouchedAt: "2026-02-02T00:00:00.000Z" });
    row.vouchedHash = row.definitionHash;
    const next = tool("a", { description: "changed" });
    const p = plan({ rows: [row], listed: [next] });
    expect(p.summary.vouchDropped).toEqual(["srv_a"]);
    expect(p.update[0]?.set).toMatchObject({ vouchedHash: null, vouchedBy: null, vouchedAt: null });
    expect(p.feed.find((c) => c.kind === "vouch_dropped")).toEqual({
      kind: "vouch_dropped",
      tool: "a",
      localName: "srv_a",
      detail: { vouchedBy: "olive", vouchedAt: "2026-02-02T00:00:00.000Z" },
    });
    expect(p.audit[0]).toEqual({
      action: "tool.vouch_dropped",
      subject: "srv_a",
      detail: `definition changed from ${row.definitionHash.slice(0, 12)} to ${definitionHash(definitionOf(next)).slice(0, 12)}`,
    });
  });

  it("an unlisted row is marked gone with the status it had", () => {
    const p = plan({ rows: [enabledRow(tool("a")), rowOf(tool("b"))], listed: [tool("b")] });
    expect(p.summary.gone).toEqual(["srv_a"]);
    expect(p.feed).toEqual([{ kind: "gone", tool: "a", localName: "srv_a", detail: { status: "enabled" } }]);
    // Already gone: nothing new to say.
    const again = plan({ rows: [enabledRow(tool("a"), { present: false })], listed: [] });
    expect(again.summary.gone).toEqual([]);
    expect(again.feed).toEqual([]);
  });

  it("a returning tool is present again with its old status and pin untouched", () => {
    const row = enabledRow(tool("a"), { present: false, alwaysConfirm: true });
    const p = plan({ rows: [row], listed: [tool("a")] });
    expect(p.summary).toMatchObject({ returned: ["srv_a"], changed: [], added: [] });
    expect(p.insert).toEqual([]);
    expect(p.update).toHaveLength(1);
    expect(p.update[0]?.set.present).toBe(true);
    // Only what the listing decides: never the status, the pin or "always confirm".
    expect(Object.keys(p.update[0]?.set ?? {}).sort()).toEqual([
      "definition",
      "definitionHash",
      "description",
      "excluded",
      "present",
      "readOnly",
      "unusableReason",
    ]);
    expect(p.feed).toEqual([
      { kind: "returned", tool: "a", localName: "srv_a", detail: { status: "enabled" } },
    ]);
  });
});

describe("planRefresh: allowTools", () => {
  it("a listed tool outside allowTools gets no row and one excluded entry, not again once recorded", () => {
    const listed = [tool("a"), tool("x")];
    const p = plan({ allowTools: ["a"], listed });
    expect(p.insert.map((r) => r.remoteName)).toEqual(["a"]);
    expect(p.summary.excluded).toEqual(["x"]);
    expect(p.feed).toContainEqual({ kind: "excluded", tool: "x", localName: null, detail: null });
    const again = plan({
      allowTools: ["a"],
      listed,
      rows: [rowOf(tool("a"))],
      excludedBefore: new Set(["x"]),
    });
    expect(again.summary.excluded).toEqual([]);
    expect(again.feed).toEqual([]);
  });

  it("a row that allowTools now excludes is gone and recorded as excluded, not as gone", () => {
    const p = plan({
      allowTools: ["a"],
      rows: [rowOf(tool("a")), enabledRow(tool("b"))],
      listed: [tool("a"), tool("b")],
    });
    expect(p.summary).toMatchObject({ gone: ["srv_b"], excluded: ["b"] });
    expect(p.feed).toEqual([
      { kind: "excluded", tool: "b", localName: "srv_b", detail: { hadRow: true, status: "enabled" } },
    ]);
  });
});

describe("planRefresh: what is stored and recorded", () => {
  it("descriptions are cleaned and capped at descriptionMaxChars, in the stored and hashed definition too", () => {
    const long = `abc\u202Edefghijklmnop`;
    const p = plan({ descriptionMaxChars: 8, listed: [tool("a", { description: long })] });
    expect(p.insert[0]?.description).toBe("abcdefg…");
    expect(JSON.parse(p.insert[0]?.definition ?? "{}").description).toBe("abcdefg…");
    expect(p.insert[0]?.definitionHash).toBe(
      definitionHash(definitionOf(tool("a", { description: "abcdefg…" }))),
    );
  });

  it("a schema property description over the cap is capped in the stored definition", () => {
    const p = plan({
      descriptionMaxChars: 64,
      listed: [
        tool("a", {
          inputSchema: {
            type: "object",
            properties: { q: { type: "string", title: "Q\u{E0051}", description: "q".repeat(500) } },
          },
          outputSchema: { type: "object", description: "o".repeat(500) },
        }),
      ],
    });
    const def = JSON.parse(p.insert[0]?.definition ?? "{}");
    expect(def.inputSchema.properties.q).toEqual({
      type: "string",
      title: "Q",
      description: `${"q".repeat(63)}…`,
    });
    expect(def.outputSchema.description).toBe(`${"o".repeat(63)}…`);
  });

  it("a server that only adds hidden characters changes nothing: no update, no feed entry, the pin holds", () => {
    const t = tool("a", {
      inputSchema: { type: "object", properties: { q: { type: "string", description: "the query" } } },
    });
    const sneaky = tool("a", {
      description: `the a\u200B tool\u{E0041}\u{E0042}`,
      inputSchema: {
        type: "object",
        properties: { q: { type: "string", description: "the\u202E query\uFE0F" } },
      },
    });
    const p = plan({ rows: [enabledRow(t)], listed: [sneaky] });
    expect(p.update).toEqual([]);
    expect(p.feed).toEqual([]);
    expect(p.summary.changed).toEqual([]);
  });

  it("a row stored raw before cleaning moves to the cleaned hash with its pin and vouch, without a change", () => {
    const sneaky = tool("a", { description: "the a\u200B tool" });
    // What an earlier version stored: the listing as it came, hashed raw, pinned and vouched so.
    const raw: ToolDefinition = { ...definitionOf(tool("a")), description: "the a\u200B tool" };
    const rawHash = definitionHash(raw);
    const stored = enabledRow(sneaky, {
      definition: JSON.stringify(raw),
      definitionHash: rawHash,
      pinnedHash: rawHash,
      pinnedDefinition: JSON.stringify(raw),
      vouchedHash: rawHash,
    });
    const p = plan({ rows: [stored], listed: [sneaky] });
    expect(p.summary.changed).toEqual([]);
    expect(p.feed).toEqual([]);
    const set = p.update[0]?.set;
    expect(set?.definitionHash).not.toBe(rawHash);
    expect(set?.pinnedHash).toBe(set?.definitionHash);
    expect(set?.vouchedHash).toBe(set?.definitionHash);
    // Grants and pending calls bound to the old hash are moved by the writer (see sync.ts).
    expect(p.update[0]?.rehashedFrom).toBe(rawHash);
  });

  it("a tool whose local name cannot be served is proposed with why", () => {
    const p = plan({ listed: [tool("has space")] });
    expect(p.insert[0]?.unusableReason).toContain("characters outside");
    expect(p.feed[0]?.detail).toMatchObject({ status: "proposed", unusableReason: expect.any(String) });
  });

  it("duplicate and nameless tools in a listing are ignored after the first", () => {
    const p = plan({
      listed: [tool("a"), tool("a", { description: "second" }), { name: 7 } as unknown as Tool],
    });
    expect(p.insert.map((r) => r.description)).toEqual(["the a tool"]);
  });

  it("feed entries are ordered by kind, a changed definition last, names within a kind Z to A", () => {
    const p = plan({
      // The gone row g holds no slot: m and three newcomers fill the four.
      maxTools: 4,
      rows: [rowOf(tool("m")), rowOf(tool("g"))],
      listed: [tool("m", { description: "new" }), tool("b"), tool("a"), tool("c"), tool("d"), tool("e")],
    });
    expect(feedOf(p)).toEqual([
      "over_cap e",
      "over_cap d",
      "added c",
      "added b",
      "added a",
      "gone g",
      "changed m",
    ]);
  });

  it("a refresh that changed something plans one catalogue.refresh audit row with the summary", () => {
    const p = plan({ listed: [tool("a")] });
    expect(p.audit).toEqual([
      { action: "catalogue.refresh", subject: "srv", detail: JSON.stringify(p.summary) },
    ]);
    expect(JSON.parse(p.audit[0]?.detail ?? "{}")).toMatchObject({ server: "srv", added: ["srv_a"] });
    // Staying over the cap is no change.
    const still = plan({
      maxTools: 1,
      rows: [rowOf(tool("a"))],
      overCapBefore: new Set(["b"]),
      listed: [tool("a"), tool("b")],
    });
    expect(still.audit).toEqual([]);
  });
});
