/**
 * The catalogue (PRODUCT.md §5): stable trimming as a pure function checked on many seeded
 * random cases, and discovery → rows against a migrated test store (SQLite in memory, or PostgreSQL).
 */
import type { Tool } from "@modelcontextprotocol/client";
import { and, eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { GatehouseError } from "@/lib/errors";
import { memoryDb, OPTS, serverConfig, tool } from "@/test/support/catalogue";
import type { Db } from "../store/db";
import { auditEvents, overCapTools, tools } from "../store/schema";
import { getToolRow, listCatalogue, listEnabledTools, setToolStatus, syncServerTools } from "./catalogue";
import { type TrimInput, trimTools } from "./trim";

// ---------------------------------------------------------------------------------------------
// trimTools

/** mulberry32: a small seeded generator, so a failing case can be replayed from its seed. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let x = a;
    x = Math.imul(x ^ (x >>> 15), x | 1);
    x ^= x + Math.imul(x ^ (x >>> 7), x | 61);
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

function shuffle<T>(items: readonly T[], random: () => number): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [out[i], out[j]] = [out[j] as T, out[i] as T];
  }
  return out;
}

/** A random trimming problem: names from a small alphabet so listings overlap and repeat. */
function randomCase(seed: number): TrimInput {
  const random = prng(seed);
  const alphabet = "ab_Zc-9";
  const name = () => {
    const len = 1 + Math.floor(random() * 4);
    let s = "";
    for (let i = 0; i < len; i++) s += alphabet[Math.floor(random() * alphabet.length)];
    return s;
  };
  const pool = Array.from({ length: 5 + Math.floor(random() * 40) }, name);
  const listed = Array.from(
    { length: Math.floor(random() * 30) },
    () => pool[Math.floor(random() * pool.length)] ?? "x",
  );
  const existing = new Set(pool.filter(() => random() < 0.3));
  return { listed, existing, maxTools: 1 + Math.floor(random() * 15) };
}

const byCodeUnit = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
const SEEDS = Array.from({ length: 400 }, (_, i) => i * 7919 + 1);

describe("trimTools (stable trimming)", () => {
  it("every listed name lands in exactly one of kept, admitted and overCap", () => {
    for (const seed of SEEDS) {
      const input = randomCase(seed);
      const r = trimTools(input);
      const all = [...r.kept, ...r.admitted, ...r.overCap];
      expect(all.slice().sort(byCodeUnit), `seed ${seed}`).toEqual(
        [...new Set(input.listed)].sort(byCodeUnit),
      );
    }
  });

  it("existing rows are never evicted: every listed name with a row is kept", () => {
    for (const seed of SEEDS) {
      const input = randomCase(seed);
      const r = trimTools(input);
      const listedExisting = [...new Set(input.listed)].filter((n) => input.existing.has(n)).sort(byCodeUnit);
      expect(r.kept.slice().sort(byCodeUnit), `seed ${seed}`).toEqual(listedExisting);
      for (const n of [...r.admitted, ...r.overCap])
        expect(input.existing.has(n), `seed ${seed}: ${n}`).toBe(false);
    }
  });

  it("the cap holds: listed rows after trimming never exceed maxTools unless they already did, and free slots are filled", () => {
    for (const seed of SEEDS) {
      const input = randomCase(seed);
      const r = trimTools(input);
      // Only rows the server lists hold a slot: a gone (or excluded) row never keeps a listed tool out.
      const rows = r.kept.length + r.admitted.length;
      expect(rows, `seed ${seed}`).toBeLessThanOrEqual(Math.max(input.maxTools, r.kept.length));
      if (r.kept.length >= input.maxTools) expect(r.admitted, `seed ${seed}`).toEqual([]);
      // Nothing is refused while there is room.
      if (r.overCap.length > 0) expect(rows, `seed ${seed}`).toBe(Math.max(input.maxTools, r.kept.length));
    }
  });

  it("the admitted are the lexicographically smallest new names", () => {
    for (const seed of SEEDS) {
      const input = randomCase(seed);
      const r = trimTools(input);
      const fresh = [...new Set(input.listed)].filter((n) => !input.existing.has(n)).sort(byCodeUnit);
      expect(r.admitted, `seed ${seed}`).toEqual(fresh.slice(0, r.admitted.length));
      expect(r.overCap, `seed ${seed}`).toEqual(fresh.slice(r.admitted.length));
    }
  });

  it("the result does not depend on the order or repetition of the listing", () => {
    for (const seed of SEEDS) {
      const input = randomCase(seed);
      const random = prng(seed ^ 0x5eed);
      const expected = trimTools(input);
      for (let i = 0; i < 3; i++) {
        const listed = shuffle([...input.listed, ...input.listed.filter(() => random() < 0.3)], random);
        expect(trimTools({ ...input, listed }), `seed ${seed} shuffle ${i}`).toEqual(expected);
      }
    }
  });

  it("a server that grows a tool named aaa_… cannot push an existing row out", () => {
    const existing = new Set(["list", "search", "update"]);
    const r = trimTools({ listed: ["aaa_evil", "list", "search", "update"], existing, maxTools: 3 });
    expect(r).toEqual({ kept: ["list", "search", "update"], admitted: [], overCap: ["aaa_evil"] });
  });
});

// ---------------------------------------------------------------------------------------------
// syncServerTools

async function rows(d: Db, server: string) {
  return (await listCatalogue(d)).filter((r) => r.server === server);
}

async function enable(d: Db, localName: string) {
  return await setToolStatus(d, { localName, status: "enabled", actor: "owner" });
}

describe("syncServerTools (discovery → rows)", () => {
  it("new tools become proposed: discovery never enables anything", async () => {
    const d = await memoryDb();
    const srv = serverConfig("srv");
    const summary = await syncServerTools(d, srv, [tool("b"), tool("a")], OPTS);
    expect(summary.added.sort()).toEqual(["srv_a", "srv_b"]);
    expect((await rows(d, "srv")).map((r) => [r.localName, r.status, r.availability])).toEqual([
      ["srv_a", "proposed", "ok"],
      ["srv_b", "proposed", "ok"],
    ]);
    expect(await listEnabledTools(d)).toEqual([]);
    const audit = await d.select().from(auditEvents).where(eq(auditEvents.action, "catalogue.refresh"));
    expect(audit).toHaveLength(1);
  });

  it("a later refresh keeps the owner's decisions: enabled stays enabled, disabled stays disabled, proposed stays proposed", async () => {
    const d = await memoryDb();
    const srv = serverConfig("srv");
    const listing = [tool("a"), tool("b"), tool("c")];
    await syncServerTools(d, srv, listing, OPTS);
    await enable(d, "srv_a");
    await setToolStatus(d, { localName: "srv_b", status: "disabled", actor: "owner" });
    const summary = await syncServerTools(d, srv, listing, OPTS);
    expect(summary).toMatchObject({ added: [], changed: [], gone: [], returned: [] });
    expect((await rows(d, "srv")).map((r) => r.status)).toEqual(["enabled", "disabled", "proposed"]);
    expect((await listEnabledTools(d)).map((t) => t.name)).toEqual(["srv_a"]);
  });

  it("tools beyond maxTools are recorded as over the cap and not proposed; existing rows keep their place", async () => {
    const d = await memoryDb();
    const srv = serverConfig("srv", { maxTools: 2 });
    const first = await syncServerTools(d, srv, [tool("d"), tool("c"), tool("b")], OPTS);
    expect(first.added.sort()).toEqual(["srv_b", "srv_c"]);
    expect(first.overCap).toEqual(["d"]);
    const grown = await syncServerTools(d, srv, [tool("aaa"), tool("b"), tool("c"), tool("d")], OPTS);
    expect(grown.added).toEqual([]);
    expect(grown.overCap.sort()).toEqual(["aaa", "d"]);
    expect((await rows(d, "srv")).map((r) => r.remoteName)).toEqual(["b", "c"]);
    const overCap = await d.select().from(overCapTools).where(eq(overCapTools.server, "srv"));
    expect(overCap.map((r) => r.remoteName).sort()).toEqual(["aaa", "d"]);
  });

  it("allowTools limits which tools are considered at all", async () => {
    const d = await memoryDb();
    const srv = serverConfig("srv", { allowTools: ["b"] });
    const summary = await syncServerTools(d, srv, [tool("a"), tool("b")], OPTS);
    expect(summary.added).toEqual(["srv_b"]);
    expect(summary.overCap).toEqual([]);
    expect((await rows(d, "srv")).map((r) => r.remoteName)).toEqual(["b"]);
  });

  it("a tool that is no longer listed is kept as gone, and returns to its old status when listed again", async () => {
    const d = await memoryDb();
    const srv = serverConfig("srv");
    await syncServerTools(d, srv, [tool("a"), tool("b")], OPTS);
    await enable(d, "srv_a");

    const gone = await syncServerTools(d, srv, [tool("b")], OPTS);
    expect(gone.gone).toEqual(["srv_a"]);
    const row = (await rows(d, "srv")).find((r) => r.localName === "srv_a");
    expect(row).toMatchObject({ status: "enabled", availability: "gone" });
    expect(await listEnabledTools(d)).toEqual([]);
    await expect(setToolStatus(d, { localName: "srv_a", status: "enabled", actor: "owner" })).rejects.toThrow(
      GatehouseError,
    );

    const back = await syncServerTools(d, srv, [tool("a"), tool("b")], OPTS);
    expect(back.returned).toEqual(["srv_a"]);
    expect(back.changed).toEqual([]);
    expect((await rows(d, "srv")).find((r) => r.localName === "srv_a")).toMatchObject({
      status: "enabled",
      availability: "ok",
    });
    expect((await listEnabledTools(d)).map((t) => t.name)).toEqual(["srv_a"]);
  });

  it("a gone tool holds no slot: a newcomer the server lists takes it", async () => {
    const d = await memoryDb();
    const srv = serverConfig("srv", { maxTools: 1 });
    await syncServerTools(d, srv, [tool("m")], OPTS);
    const summary = await syncServerTools(d, srv, [tool("a")], OPTS);
    expect(summary.gone).toEqual(["srv_m"]);
    expect(summary.overCap).toEqual([]);
    expect((await rows(d, "srv")).map((r) => r.remoteName)).toEqual(["a", "m"]);
  });

  it("enabling pins the tool to its current definition", async () => {
    const d = await memoryDb();
    const srv = serverConfig("srv");
    await syncServerTools(d, srv, [tool("a")], OPTS);
    expect((await getToolRow(d, "srv_a"))?.pinnedHash).toBeNull();
    await enable(d, "srv_a");
    const row = await getToolRow(d, "srv_a");
    expect(row?.pinnedHash).toBe(row?.definitionHash);
    const audit = await d
      .select()
      .from(auditEvents)
      .where(and(eq(auditEvents.action, "tool.enable"), eq(auditEvents.subject, "srv_a")));
    expect(audit).toHaveLength(1);
  });

  const CHANGES: [string, Partial<Tool>][] = [
    ["description", { description: "now it also deletes things" }],
    ["input schema", { inputSchema: { type: "object", properties: { q: { type: "number" } } } }],
    ["annotations", { annotations: { readOnlyHint: true } }],
    ["output schema", { outputSchema: { type: "object", properties: { r: { type: "string" } } } }],
  ];

  for (const [what, change] of CHANGES) {
    it(`a changed ${what} of an enabled tool makes it "changed" and takes it out of listEnabledTools`, async () => {
      const d = await memoryDb();
      const srv = serverConfig("srv");
      await syncServerTools(d, srv, [tool("a"), tool("b")], OPTS);
      await enable(d, "srv_a");
      await enable(d, "srv_b");
      const summary = await syncServerTools(d, srv, [tool("a", change), tool("b")], OPTS);
      expect(summary.changed).toEqual(["srv_a"]);
      expect((await rows(d, "srv")).find((r) => r.localName === "srv_a")).toMatchObject({
        status: "enabled",
        availability: "changed",
      });
      expect((await listEnabledTools(d)).map((t) => t.name)).toEqual(["srv_b"]);
      // Re-enabling pins the new definition.
      await enable(d, "srv_a");
      expect((await listEnabledTools(d)).map((t) => t.name)).toEqual(["srv_a", "srv_b"]);
    });
  }

  it("a change back to the pinned definition makes the tool callable again", async () => {
    const d = await memoryDb();
    const srv = serverConfig("srv");
    await syncServerTools(d, srv, [tool("a")], OPTS);
    await enable(d, "srv_a");
    await syncServerTools(d, srv, [tool("a", { description: "different" })], OPTS);
    expect(await listEnabledTools(d)).toEqual([]);
    await syncServerTools(d, srv, [tool("a")], OPTS);
    expect((await listEnabledTools(d)).map((t) => t.name)).toEqual(["srv_a"]);
  });

  it("descriptions are capped and stripped of control and bidi characters", async () => {
    const d = await memoryDb();
    const srv = serverConfig("srv");
    const hostile =
      "Reads\u0007 files\u001b[31m\u009b \u202Eevil\u202C \u2066iso\u2069 zero\u200Bwidth\uFEFF\ttab\nline " +
      "x".repeat(500);
    await syncServerTools(
      d,
      srv,
      [tool("a", { description: hostile }), tool("b", { description: "short" })],
      {
        descriptionMaxChars: 64,
      },
    );
    await enable(d, "srv_a");
    const stored = (await getToolRow(d, "srv_a"))?.description ?? "";
    expect(stored.length).toBeLessThanOrEqual(64);
    expect(stored.endsWith("…")).toBe(true);
    const unsafe = [...stored].filter((ch) => {
      const c = ch.codePointAt(0) ?? 0;
      return (
        (c < 0x20 && c !== 0x09 && c !== 0x0a) ||
        (c >= 0x7f && c <= 0x9f) ||
        (c >= 0x200b && c <= 0x200f) ||
        (c >= 0x202a && c <= 0x202e) ||
        (c >= 0x2066 && c <= 0x2069) ||
        c === 0xfeff
      );
    });
    expect(unsafe).toEqual([]);
    expect(stored.startsWith("Reads files[31m evil iso zerowidth\ttab\nline ")).toBe(true);
    expect((await listEnabledTools(d))[0]?.description).toBe(stored);
    expect((await getToolRow(d, "srv_b"))?.description).toBe("short");
  });

  it("a local name longer than 64 characters is unusable and cannot be enabled", async () => {
    const d = await memoryDb();
    const srv = serverConfig("srv");
    const fits = "f".repeat(64 - "srv_".length);
    const tooLong = "l".repeat(65 - "srv_".length);
    await syncServerTools(d, srv, [tool(fits), tool(tooLong)], OPTS);
    expect((await getToolRow(d, `srv_${fits}`))?.unusableReason).toBeNull();
    const long = (await rows(d, "srv")).find((r) => r.remoteName === tooLong);
    expect(long).toMatchObject({ availability: "unusable" });
    expect(long?.unusableReason).toContain("65");
    await expect(enable(d, `srv_${tooLong}`)).rejects.toThrow(
      expect.objectContaining({ code: "tool_unusable" }),
    );
    await enable(d, `srv_${fits}`);
    expect((await listEnabledTools(d)).map((t) => t.name)).toEqual([`srv_${fits}`]);
  });

  it("a tool name with characters outside A-Z a-z 0-9 _ - is unusable and cannot be enabled", async () => {
    const d = await memoryDb();
    const srv = serverConfig("srv");
    const bad = ["has space", "dot.name", "slash/x", "ünï", "new\nline", ""];
    await syncServerTools(d, srv, [...bad.map((n) => tool(n)), tool("ok-name_1")], OPTS);
    for (const name of bad.filter((n) => n !== "")) {
      const row = await getToolRow(d, `srv_${name}`);
      expect(row?.unusableReason, name).toMatch(/characters/);
      await expect(enable(d, `srv_${name}`), name).rejects.toThrow(
        expect.objectContaining({ code: "tool_unusable" }),
      );
    }
    expect((await getToolRow(d, "srv_ok-name_1"))?.unusableReason).toBeNull();
    expect((await rows(d, "srv")).filter((r) => r.status === "enabled")).toEqual([]);
  });

  it("a tool with an empty name is unusable and cannot be enabled", async () => {
    const d = await memoryDb();
    await syncServerTools(d, serverConfig("srv"), [tool("")], OPTS);
    expect((await getToolRow(d, "srv_"))?.unusableReason).toBe("the tool has an empty name");
    await expect(enable(d, "srv_")).rejects.toThrow(expect.objectContaining({ code: "tool_unusable" }));
  });

  const ANNOTATIONS: [string, Record<string, unknown> | undefined, boolean][] = [
    ["no annotations", undefined, true],
    ["readOnlyHint: true", { readOnlyHint: true }, false],
    ["readOnlyHint: false", { readOnlyHint: false }, true],
    ['readOnlyHint: "true" (a string)', { readOnlyHint: "true" }, true],
    ["destructiveHint: false alone", { destructiveHint: false }, true],
    ["idempotentHint: true alone", { idempotentHint: true }, true],
  ];

  it("a tool is destructive unless its annotations say readOnlyHint: true", async () => {
    const d = await memoryDb();
    const srv = serverConfig("srv", { maxTools: 20 });
    const listing = ANNOTATIONS.map(([, annotations], i) =>
      tool(`t${i}`, annotations ? ({ annotations } as Partial<Tool>) : {}),
    );
    await syncServerTools(d, srv, listing, OPTS);
    for (const [i, [label, , destructive]] of ANNOTATIONS.entries()) {
      expect((await rows(d, "srv")).find((r) => r.remoteName === `t${i}`)?.destructive, label).toBe(
        destructive,
      );
      expect((await getToolRow(d, `srv_t${i}`))?.readOnly, label).toBe(!destructive);
    }
  });

  it("tools of different servers never collide", async () => {
    const d = await memoryDb();
    await syncServerTools(d, serverConfig("one"), [tool("x")], OPTS);
    await syncServerTools(d, serverConfig("two"), [tool("x")], OPTS);
    await syncServerTools(d, serverConfig("one"), [], OPTS);
    expect(
      (await d.select({ n: tools.localName, p: tools.present }).from(tools)).sort((a, b) =>
        byCodeUnit(a.n, b.n),
      ),
    ).toEqual([
      { n: "one_x", p: false },
      { n: "two_x", p: true },
    ]);
  });
});
