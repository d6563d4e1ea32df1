/**
 * Catalogue governance (issue 5) against an in-memory SQLite store with migrations: the change
 * feed written by syncServerTools, effective read-only (approvalNeed) and vouching, "always
 * confirm", the before/after view of a changed tool, bulk status changes and reading the feed.
 */
import type { Tool } from "@modelcontextprotocol/sdk/types.js";
import { and, asc, eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { memoryDb, OPTS, serverConfig, tool } from "@/test/support/catalogue";
import type { Db } from "../store/db";
import { auditEvents, catalogueChanges, tools, users } from "../store/schema";
import { approvalNeed } from "./approval";
import {
  bulkSetToolStatus,
  getToolRow,
  listCatalogue,
  listEnabledTools,
  setToolStatus,
  syncServerTools,
  type ToolRow,
  toCatalogueView,
  updateTool,
} from "./catalogue";
import { listChanges, markChangesRead, toolHistory } from "./changes";
import { definitionHash, definitionOf } from "./definition";

/** A user row to hang read marks on (the password hash is never checked here). */
function addUser(d: Db, name: string): number {
  return d.insert(users).values({ name, passwordHash: "x", roles: "owner" }).returning().get().id;
}

function feed(d: Db) {
  return d
    .select()
    .from(catalogueChanges)
    .orderBy(asc(catalogueChanges.id))
    .all()
    .map((r) => ({
      kind: r.kind,
      tool: r.tool,
      localName: r.localName,
      detail: r.detail ? JSON.parse(r.detail) : null,
    }));
}

const kinds = (d: Db) => feed(d).map((c) => `${c.kind} ${c.tool}`);

function row(d: Db, localName: string): ToolRow {
  const r = getToolRow(d, localName);
  if (!r) throw new Error(`no row ${localName}`);
  return r;
}

function view(d: Db, localName: string) {
  return toCatalogueView(row(d, localName));
}

function audit(d: Db, action: string, subject: string) {
  return d
    .select()
    .from(auditEvents)
    .where(and(eq(auditEvents.action, action), eq(auditEvents.subject, subject)))
    .all();
}

// ---------------------------------------------------------------------------------------------
// The change feed written by syncServerTools

describe("syncServerTools records the change feed", () => {
  it("a first refresh records one added row per new tool and one over_cap row per tool beyond maxTools", () => {
    const d = memoryDb();
    const summary = syncServerTools(
      d,
      serverConfig("srv", { maxTools: 2 }),
      [tool("c"), tool("a"), tool("b")],
      OPTS,
    );
    expect(kinds(d).sort()).toEqual(["added a", "added b", "over_cap c"]);
    expect(feed(d).find((c) => c.tool === "a")).toMatchObject({
      localName: "srv_a",
      detail: { status: "proposed" },
    });
    expect(feed(d).find((c) => c.tool === "c")).toMatchObject({ localName: null, detail: { maxTools: 2 } });
    expect(summary.changes.map((c) => c.kind).sort()).toEqual(["added", "added", "over_cap"]);
  });

  it("a refresh that changes nothing records nothing, over-cap tools included", () => {
    const d = memoryDb();
    const srv = serverConfig("srv", { maxTools: 1, allowTools: ["a"] });
    const listing = [tool("a"), tool("b")];
    syncServerTools(d, serverConfig("srv", { maxTools: 1 }), listing, OPTS);
    const first = feed(d).length;
    const again = syncServerTools(d, serverConfig("srv", { maxTools: 1 }), listing, OPTS);
    expect(again.changes).toEqual([]);
    expect(feed(d)).toHaveLength(first);
    // The same with allowTools excluding a listed tool: recorded once, then never again.
    syncServerTools(d, srv, listing, OPTS);
    const withExcluded = feed(d).length;
    syncServerTools(d, srv, listing, OPTS);
    syncServerTools(d, srv, listing, OPTS);
    expect(feed(d)).toHaveLength(withExcluded);
  });

  it("a changed definition records a changed row saying what changed, riskier when readOnlyHint flips", () => {
    const d = memoryDb();
    const srv = serverConfig("srv");
    syncServerTools(d, srv, [tool("a", { annotations: { readOnlyHint: true } })], OPTS);
    setToolStatus(d, { localName: "srv_a", status: "enabled", actor: "olive" });
    const before = row(d, "srv_a").definitionHash;
    syncServerTools(
      d,
      srv,
      [tool("a", { description: "now deletes", annotations: { readOnlyHint: false } })],
      OPTS,
    );
    const changed = feed(d).filter((c) => c.kind === "changed");
    expect(changed).toEqual([
      {
        kind: "changed",
        tool: "a",
        localName: "srv_a",
        detail: {
          status: "enabled",
          fromHash: before.slice(0, 12),
          toHash: row(d, "srv_a").definitionHash.slice(0, 12),
          summary: ["description", "readOnlyHint: true → false"],
          riskier: true,
        },
      },
    ]);
  });

  it("a change back to the pinned definition is recorded as restored", () => {
    const d = memoryDb();
    const srv = serverConfig("srv");
    syncServerTools(d, srv, [tool("a")], OPTS);
    setToolStatus(d, { localName: "srv_a", status: "enabled", actor: "olive" });
    syncServerTools(d, srv, [tool("a", { description: "other" })], OPTS);
    syncServerTools(d, srv, [tool("a")], OPTS);
    const changed = feed(d).filter((c) => c.kind === "changed");
    expect(changed.map((c) => c.detail.restored ?? false)).toEqual([false, true]);
  });

  it("a tool that disappears records gone, and returned with its old status when listed again", () => {
    const d = memoryDb();
    const srv = serverConfig("srv");
    syncServerTools(d, srv, [tool("a"), tool("b")], OPTS);
    setToolStatus(d, { localName: "srv_a", status: "enabled", actor: "olive" });
    syncServerTools(d, srv, [tool("b")], OPTS);
    syncServerTools(d, srv, [tool("b")], OPTS);
    syncServerTools(d, srv, [tool("a"), tool("b")], OPTS);
    expect(feed(d).filter((c) => c.kind === "gone" || c.kind === "returned")).toEqual([
      { kind: "gone", tool: "a", localName: "srv_a", detail: { status: "enabled" } },
      { kind: "returned", tool: "a", localName: "srv_a", detail: { status: "enabled" } },
    ]);
  });

  it("a tool returning with a new definition records returned and changed", () => {
    const d = memoryDb();
    const srv = serverConfig("srv");
    syncServerTools(d, srv, [tool("a")], OPTS);
    syncServerTools(d, srv, [], OPTS);
    syncServerTools(d, srv, [tool("a", { description: "different" })], OPTS);
    expect(kinds(d)).toEqual(["added a", "gone a", "returned a", "changed a"]);
  });

  it("tools excluded by allowTools are recorded once each, without a row", () => {
    const d = memoryDb();
    const srv = serverConfig("srv", { allowTools: ["a"] });
    syncServerTools(d, srv, [tool("a"), tool("x"), tool("y")], OPTS);
    syncServerTools(d, srv, [tool("a"), tool("x"), tool("y")], OPTS);
    expect(kinds(d).sort()).toEqual(["added a", "excluded x", "excluded y"]);
    expect(getToolRow(d, "srv_x")).toBeNull();
  });

  it("a tool with a row that allowTools now excludes is recorded as excluded and is no longer callable", () => {
    const d = memoryDb();
    syncServerTools(d, serverConfig("srv"), [tool("a"), tool("b")], OPTS);
    setToolStatus(d, { localName: "srv_b", status: "enabled", actor: "olive" });
    const narrowed = serverConfig("srv", { allowTools: ["a"] });
    syncServerTools(d, narrowed, [tool("a"), tool("b")], OPTS);
    syncServerTools(d, narrowed, [tool("a"), tool("b")], OPTS);
    expect(feed(d).filter((c) => c.kind === "excluded")).toEqual([
      { kind: "excluded", tool: "b", localName: "srv_b", detail: { hadRow: true, status: "enabled" } },
    ]);
    expect(view(d, "srv_b").availability).toBe("gone");
    expect(listEnabledTools(d)).toEqual([]);
  });

  it("a tool newly over the cap is recorded once; one already over the cap is not recorded again", () => {
    const d = memoryDb();
    const srv = serverConfig("srv", { maxTools: 1 });
    syncServerTools(d, srv, [tool("a"), tool("b")], OPTS);
    syncServerTools(d, srv, [tool("a"), tool("b"), tool("c")], OPTS);
    expect(kinds(d)).toEqual(["over_cap b", "added a", "over_cap c"]);
  });

  it("rows of one refresh share one time; read newest first, a changed tool comes before additions", () => {
    const d = memoryDb();
    const srv = serverConfig("srv");
    syncServerTools(d, srv, [tool("m")], OPTS);
    syncServerTools(d, srv, [tool("m", { description: "new" }), tool("b"), tool("a")], OPTS);
    const user = addUser(d, "olive");
    const page = listChanges(d, { userId: user, limit: 10 });
    expect(page.changes.map((c) => `${c.kind} ${c.tool}`)).toEqual([
      "changed m",
      "added a",
      "added b",
      "added m",
    ]);
    expect(new Set(page.changes.slice(0, 3).map((c) => c.at)).size).toBe(1);
  });

  it("the feed is written in the catalogue's transaction: a refresh that fails writes neither", () => {
    const d = memoryDb();
    // A BigInt cannot be serialised: storing the second tool throws after the first was inserted.
    const poisoned = tool("b", {
      inputSchema: { type: "object", default: 1n } as unknown as Tool["inputSchema"],
    });
    expect(() => syncServerTools(d, serverConfig("srv"), [tool("a"), poisoned], OPTS)).toThrow();
    expect(d.select().from(tools).all()).toEqual([]);
    expect(feed(d)).toEqual([]);
  });
});

// ---------------------------------------------------------------------------------------------
// approvalNeed: the one decision of "does a call wait for a reviewer"

describe("approvalNeed", () => {
  function input(annotations: Record<string, unknown> | undefined, over: Partial<ToolRow> = {}) {
    const def = definitionOf(tool("t", annotations ? ({ annotations } as Partial<Tool>) : {}));
    return {
      definition: JSON.stringify(def),
      definitionHash: definitionHash(def),
      vouchedHash: null as string | null,
      alwaysConfirm: false,
      ...over,
    };
  }

  const CASES: [string, Record<string, unknown> | undefined, Partial<ToolRow>, boolean, string | null][] = [
    ["readOnlyHint: true runs at once", { readOnlyHint: true }, {}, false, null],
    ["no annotations waits", undefined, {}, true, "no readOnlyHint"],
    ["readOnlyHint: false waits", { readOnlyHint: false }, {}, true, "readOnlyHint: false"],
    ["destructiveHint: true waits", { destructiveHint: true }, {}, true, "destructiveHint: true"],
    [
      "destructiveHint: true is the reason even beside readOnlyHint: false",
      { readOnlyHint: false, destructiveHint: true },
      {},
      true,
      "destructiveHint: true",
    ],
    ['readOnlyHint: "true" (a string) waits', { readOnlyHint: "true" }, {}, true, "no readOnlyHint"],
    ["destructiveHint: false alone waits", { destructiveHint: false }, {}, true, "no readOnlyHint"],
    [
      "always confirm makes a read-only tool wait",
      { readOnlyHint: true },
      { alwaysConfirm: true },
      true,
      "owner requires confirmation",
    ],
    [
      "always confirm on a destructive tool keeps the server's reason",
      { destructiveHint: true },
      { alwaysConfirm: true },
      true,
      "destructiveHint: true",
    ],
  ];
  for (const [label, annotations, over, destructive, reason] of CASES) {
    it(label, () => {
      expect(approvalNeed(input(annotations, over))).toMatchObject({ destructive, reason });
    });
  }

  it("a vouch for the current definition runs at once; for another definition it counts for nothing", () => {
    const current = input(undefined);
    expect(approvalNeed({ ...current, vouchedHash: current.definitionHash })).toEqual({
      destructive: false,
      reason: null,
      readOnlyBy: "vouch",
    });
    expect(approvalNeed({ ...current, vouchedHash: "0".repeat(64) })).toMatchObject({
      destructive: true,
      reason: "no readOnlyHint",
    });
  });

  it("a vouch never overrides a server that says readOnlyHint: false or destructiveHint: true", () => {
    for (const annotations of [{ readOnlyHint: false }, { destructiveHint: true }]) {
      const r = input(annotations);
      expect(approvalNeed({ ...r, vouchedHash: r.definitionHash }).destructive).toBe(true);
    }
  });

  it("a vouched tool with always confirm still waits, saying the owner requires it", () => {
    const r = input(undefined, { alwaysConfirm: true });
    expect(approvalNeed({ ...r, vouchedHash: r.definitionHash })).toEqual({
      destructive: true,
      reason: "owner requires confirmation",
      readOnlyBy: "vouch",
    });
  });
});

// ---------------------------------------------------------------------------------------------
// Vouching and always-confirm through updateTool

describe("vouch and always confirm", () => {
  function setup() {
    const d = memoryDb();
    syncServerTools(
      d,
      serverConfig("srv"),
      [
        tool("plain"),
        tool("ro", { annotations: { readOnlyHint: true } }),
        tool("rw", { annotations: { readOnlyHint: false } }),
        tool("boom", { annotations: { destructiveHint: true } }),
      ],
      OPTS,
    );
    for (const name of ["srv_plain", "srv_ro", "srv_rw", "srv_boom"])
      setToolStatus(d, { localName: name, status: "enabled", actor: "olive" });
    return d;
  }

  it("an owner vouches a tool without annotations: it is read-only, shown with who and when, and audited", () => {
    const d = setup();
    expect(view(d, "srv_plain")).toMatchObject({
      destructive: true,
      approvalReason: "no readOnlyHint",
      vouch: null,
    });
    const updated = updateTool(d, { localName: "srv_plain", vouch: true, actor: "olive" });
    expect(updated).toMatchObject({ destructive: false, approvalReason: null, readOnlyBy: "vouch" });
    expect(updated.vouch?.by).toBe("olive");
    expect(Date.parse(updated.vouch?.at ?? "")).not.toBeNaN();
    expect(listEnabledTools(d).find((t) => t.name === "srv_plain")?.destructive).toBe(false);
    expect(audit(d, "tool.vouch", "srv_plain")).toMatchObject([{ actor: "olive" }]);
    expect(row(d, "srv_plain").vouchedHash).toBe(row(d, "srv_plain").definitionHash);
  });

  it("a tool whose server says readOnlyHint either way or destructiveHint: true cannot be vouched", () => {
    const d = setup();
    for (const [name, why] of [
      ["srv_rw", "readOnlyHint: false"],
      ["srv_boom", "destructiveHint: true"],
      ["srv_ro", "readOnlyHint: true"],
    ] as const) {
      expect(view(d, name).vouchProblem).toContain(why);
      expect(() => updateTool(d, { localName: name, vouch: true, actor: "olive" }), name).toThrow(
        expect.objectContaining({ code: "conflict", message: expect.stringContaining(why) }),
      );
      expect(row(d, name).vouchedHash, name).toBeNull();
    }
    expect(view(d, "srv_plain").vouchProblem).toBeNull();
    expect(d.select().from(auditEvents).where(eq(auditEvents.action, "tool.vouch")).all()).toEqual([]);
  });

  it("a vouch is dropped when the definition changes, recorded in the feed and the audit log", () => {
    const d = setup();
    const srv = serverConfig("srv");
    updateTool(d, { localName: "srv_plain", vouch: true, actor: "olive" });
    const vouchedAt = row(d, "srv_plain").vouchedAt;
    const listing = (plain: Tool) => [
      plain,
      tool("ro", { annotations: { readOnlyHint: true } }),
      tool("rw", { annotations: { readOnlyHint: false } }),
      tool("boom", { annotations: { destructiveHint: true } }),
    ];
    const summary = syncServerTools(d, srv, listing(tool("plain", { description: "changed" })), OPTS);
    expect(summary.vouchDropped).toEqual(["srv_plain"]);
    expect(row(d, "srv_plain")).toMatchObject({ vouchedHash: null, vouchedBy: null, vouchedAt: null });
    expect(feed(d).filter((c) => c.kind === "vouch_dropped")).toEqual([
      {
        kind: "vouch_dropped",
        tool: "plain",
        localName: "srv_plain",
        detail: { vouchedBy: "olive", vouchedAt },
      },
    ]);
    expect(audit(d, "tool.vouch_dropped", "srv_plain")).toMatchObject([{ actor: "server:srv" }]);
    // Accepting the change does not bring the vouch back: the new definition was never vouched.
    updateTool(d, { localName: "srv_plain", status: "enabled", actor: "olive" });
    expect(view(d, "srv_plain")).toMatchObject({ destructive: true, vouch: null, availability: "ok" });
    // Nor does the server going back to the vouched definition.
    syncServerTools(d, srv, listing(tool("plain")), OPTS);
    expect(view(d, "srv_plain").vouch).toBeNull();
  });

  it("withdrawing a vouch makes the tool destructive again and is audited once", () => {
    const d = setup();
    updateTool(d, { localName: "srv_plain", vouch: true, actor: "olive" });
    updateTool(d, { localName: "srv_plain", vouch: false, actor: "oscar" });
    updateTool(d, { localName: "srv_plain", vouch: false, actor: "oscar" });
    expect(view(d, "srv_plain")).toMatchObject({ destructive: true, vouch: null });
    expect(audit(d, "tool.unvouch", "srv_plain")).toMatchObject([{ actor: "oscar" }]);
  });

  it("vouching twice writes one audit row", () => {
    const d = setup();
    updateTool(d, { localName: "srv_plain", vouch: true, actor: "olive" });
    updateTool(d, { localName: "srv_plain", vouch: true, actor: "olive" });
    expect(audit(d, "tool.vouch", "srv_plain")).toHaveLength(1);
  });

  it("always confirm makes a read-only tool need approval, and its audit rows say on and off", () => {
    const d = setup();
    expect(view(d, "srv_ro")).toMatchObject({ destructive: false, readOnlyBy: "annotation" });
    const on = updateTool(d, { localName: "srv_ro", alwaysConfirm: true, actor: "olive" });
    expect(on).toMatchObject({
      destructive: true,
      alwaysConfirm: true,
      approvalReason: "owner requires confirmation",
      readOnlyBy: "annotation",
    });
    expect(listEnabledTools(d).find((t) => t.name === "srv_ro")?.destructive).toBe(true);
    updateTool(d, { localName: "srv_ro", alwaysConfirm: true, actor: "olive" });
    updateTool(d, { localName: "srv_ro", alwaysConfirm: false, actor: "olive" });
    expect(view(d, "srv_ro")).toMatchObject({ destructive: false, alwaysConfirm: false });
    expect(audit(d, "tool.always_confirm", "srv_ro").map((a) => a.detail)).toEqual(["on", "off"]);
  });

  it("several changes in one update apply together, or none when one is refused", () => {
    const d = setup();
    expect(() =>
      updateTool(d, {
        localName: "srv_rw",
        status: "disabled",
        alwaysConfirm: true,
        vouch: true,
        actor: "olive",
      }),
    ).toThrow(expect.objectContaining({ code: "conflict" }));
    expect(row(d, "srv_rw")).toMatchObject({ status: "enabled", alwaysConfirm: false });
    const both = updateTool(d, { localName: "srv_plain", vouch: true, alwaysConfirm: true, actor: "olive" });
    expect(both).toMatchObject({ vouch: { by: "olive" }, alwaysConfirm: true, destructive: true });
  });

  it("updating a tool that does not exist is tool_not_found", () => {
    const d = setup();
    expect(() => updateTool(d, { localName: "srv_nope", vouch: true, actor: "olive" })).toThrow(
      expect.objectContaining({ code: "tool_not_found" }),
    );
  });
});

// ---------------------------------------------------------------------------------------------
// The before/after view of a changed tool

describe("a changed tool's review", () => {
  it("enabling keeps the pinned definition as JSON beside its hash", () => {
    const d = memoryDb();
    syncServerTools(d, serverConfig("srv"), [tool("a")], OPTS);
    expect(row(d, "srv_a").pinnedDefinition).toBeNull();
    setToolStatus(d, { localName: "srv_a", status: "enabled", actor: "olive" });
    expect(row(d, "srv_a").pinnedDefinition).toBe(row(d, "srv_a").definition);
  });

  it("the view of a changed tool carries the pinned definition, the current one and their diff", () => {
    const d = memoryDb();
    const srv = serverConfig("srv");
    syncServerTools(d, srv, [tool("a", { annotations: { readOnlyHint: true } })], OPTS);
    setToolStatus(d, { localName: "srv_a", status: "enabled", actor: "olive" });
    expect(view(d, "srv_a").change).toBeNull();
    const hostile = "the a tool <b>and</b> deletes\u202E everything";
    syncServerTools(
      d,
      srv,
      [
        tool("a", {
          description: hostile,
          inputSchema: { type: "object", properties: { q: { type: "number" } } },
          annotations: { readOnlyHint: false },
        }),
      ],
      OPTS,
    );
    const v = view(d, "srv_a");
    expect(v.availability).toBe("changed");
    expect(v.change?.before?.description).toBe("the a tool");
    // The full original, control characters and all, is kept for the diff; the list shows it cleaned.
    expect(v.change?.after.description).toBe(hostile);
    expect(v.description).not.toContain("\u202E");
    expect(v.change?.diff?.annotations.map((f) => f.text)).toEqual(["readOnlyHint: true → false"]);
    expect(v.change?.diff?.inputSchema).toEqual([
      { path: "properties.q.type", kind: "changed", before: "string", after: "number" },
    ]);
    expect(v.change?.diff?.description?.filter((p) => p.op === "added").map((p) => p.text)).toEqual([
      " <b>and</b> deletes\u202E everything",
    ]);
  });

  it("accepting the change re-pins the new definition: callable again, nothing left to review", () => {
    const d = memoryDb();
    const srv = serverConfig("srv");
    syncServerTools(d, srv, [tool("a")], OPTS);
    setToolStatus(d, { localName: "srv_a", status: "enabled", actor: "olive" });
    syncServerTools(d, srv, [tool("a", { description: "v2" })], OPTS);
    expect(listEnabledTools(d)).toEqual([]);
    const accepted = updateTool(d, { localName: "srv_a", status: "enabled", actor: "olive" });
    expect(accepted).toMatchObject({ availability: "ok", change: null });
    expect(JSON.parse(row(d, "srv_a").pinnedDefinition ?? "{}").description).toBe("v2");
    expect(listEnabledTools(d).map((t) => t.name)).toEqual(["srv_a"]);
  });

  it("a tool enabled before definitions were kept still gets a before view when it changes", () => {
    const d = memoryDb();
    const srv = serverConfig("srv");
    syncServerTools(d, srv, [tool("a")], OPTS);
    setToolStatus(d, { localName: "srv_a", status: "enabled", actor: "olive" });
    d.update(tools).set({ pinnedDefinition: null }).where(eq(tools.localName, "srv_a")).run();
    syncServerTools(d, srv, [tool("a", { description: "v2" })], OPTS);
    const change = view(d, "srv_a").change;
    expect(change?.before?.description).toBe("the a tool");
    expect(change?.diff?.summary).toEqual(["description"]);
  });

  it("a changed tool whose pinned definition is unknown shows the current one without a diff", () => {
    const d = memoryDb();
    const srv = serverConfig("srv");
    syncServerTools(d, srv, [tool("a")], OPTS);
    setToolStatus(d, { localName: "srv_a", status: "enabled", actor: "olive" });
    syncServerTools(d, srv, [tool("a", { description: "v2" })], OPTS);
    d.update(tools).set({ pinnedDefinition: null }).where(eq(tools.localName, "srv_a")).run();
    expect(view(d, "srv_a").change).toMatchObject({ before: null, diff: null, after: { description: "v2" } });
  });
});

// ---------------------------------------------------------------------------------------------
// Bulk status

describe("bulkSetToolStatus", () => {
  it("enables every named tool in one go, each pinned and audited", () => {
    const d = memoryDb();
    syncServerTools(d, serverConfig("srv"), [tool("a"), tool("b"), tool("c")], OPTS);
    const out = bulkSetToolStatus(d, {
      names: ["srv_a", "srv_c", "srv_a"],
      status: "enabled",
      actor: "olive",
    });
    expect(out.map((t) => [t.localName, t.status])).toEqual([
      ["srv_a", "enabled"],
      ["srv_c", "enabled"],
    ]);
    expect(listEnabledTools(d).map((t) => t.name)).toEqual(["srv_a", "srv_c"]);
    expect(d.select().from(auditEvents).where(eq(auditEvents.action, "tool.enable")).all()).toHaveLength(2);
  });

  it("changes nothing when one tool cannot be enabled, and names it with the reason", () => {
    const d = memoryDb();
    const srv = serverConfig("srv");
    syncServerTools(d, srv, [tool("a"), tool("b"), tool("has space")], OPTS);
    syncServerTools(d, srv, [tool("a"), tool("has space")], OPTS);
    let error: unknown;
    try {
      bulkSetToolStatus(d, {
        names: ["srv_a", "srv_b", "srv_has space", "srv_nope"],
        status: "enabled",
        actor: "olive",
      });
    } catch (err) {
      error = err;
    }
    expect(error).toMatchObject({ code: "tool_gone" });
    const message = (error as Error).message;
    expect(message).toContain("nothing was changed: 3 tools cannot be enabled");
    expect(message).toContain("srv_b (its server no longer lists it)");
    expect(message).toContain("srv_has space (the tool name has characters");
    expect(message).toContain("srv_nope (no such tool)");
    expect(listCatalogue(d).filter((t) => t.status === "enabled")).toEqual([]);
  });

  it("disables in bulk even tools that are gone", () => {
    const d = memoryDb();
    const srv = serverConfig("srv");
    syncServerTools(d, srv, [tool("a"), tool("b")], OPTS);
    bulkSetToolStatus(d, { names: ["srv_a", "srv_b"], status: "enabled", actor: "olive" });
    syncServerTools(d, srv, [tool("a")], OPTS);
    bulkSetToolStatus(d, { names: ["srv_a", "srv_b"], status: "disabled", actor: "olive" });
    expect(listCatalogue(d).map((t) => t.status)).toEqual(["disabled", "disabled"]);
  });
});

// ---------------------------------------------------------------------------------------------
// Reading the feed

describe("reading the change feed", () => {
  function withChanges(n: number) {
    const d = memoryDb();
    const srv = serverConfig("srv", { maxTools: 200 });
    syncServerTools(
      d,
      srv,
      Array.from({ length: n }, (_, i) => tool(`t${String(i).padStart(3, "0")}`)),
      OPTS,
    );
    return d;
  }

  it("pages newest first: each page's nextBefore leads to the next, and the last has none", () => {
    const d = withChanges(25);
    const user = addUser(d, "olive");
    const first = listChanges(d, { userId: user, limit: 10 });
    const second = listChanges(d, { userId: user, limit: 10, before: first.nextBefore ?? 0 });
    const third = listChanges(d, { userId: user, limit: 10, before: second.nextBefore ?? 0 });
    const ids = [...first.changes, ...second.changes, ...third.changes].map((c) => c.id);
    expect(ids).toHaveLength(25);
    expect([...ids].sort((a, b) => b - a)).toEqual(ids);
    expect(new Set(ids).size).toBe(25);
    expect(third.nextBefore).toBeNull();
  });

  it("unread marks and counts are per owner, and marking read never moves back or past the newest", () => {
    const d = withChanges(5);
    const olive = addUser(d, "olive");
    const oscar = addUser(d, "oscar");
    const all = listChanges(d, { userId: olive, limit: 100 });
    expect(all.unread).toBe(5);
    expect(all.changes.every((c) => c.unread)).toBe(true);
    const newest = all.changes[0]?.id ?? 0;
    const third = all.changes[2]?.id ?? 0;

    expect(markChangesRead(d, { userId: olive, upTo: third })).toEqual({ lastSeenId: third, unread: 2 });
    const after = listChanges(d, { userId: olive, limit: 100 });
    expect(after.changes.map((c) => c.unread)).toEqual([true, true, false, false, false]);
    expect(listChanges(d, { userId: oscar, limit: 100 }).unread).toBe(5);

    // Backwards is ignored; beyond the newest is capped at the newest.
    expect(markChangesRead(d, { userId: olive, upTo: 1 }).lastSeenId).toBe(third);
    expect(markChangesRead(d, { userId: olive, upTo: newest + 1000 })).toEqual({
      lastSeenId: newest,
      unread: 0,
    });
    // A change arriving later is unread again.
    syncServerTools(d, serverConfig("srv", { maxTools: 200 }), [tool("t000", { description: "x" })], OPTS);
    expect(listChanges(d, { userId: olive, limit: 100 }).unread).toBeGreaterThan(0);
  });

  it("a tool's history has its own changes (over the cap before it had a row too) and owners' actions", () => {
    const d = memoryDb();
    const user = addUser(d, "olive");
    syncServerTools(d, serverConfig("srv", { maxTools: 1 }), [tool("a"), tool("b")], OPTS);
    // maxTools raised: b gets its row now.
    syncServerTools(d, serverConfig("srv", { maxTools: 2 }), [tool("a"), tool("b")], OPTS);
    setToolStatus(d, { localName: "srv_b", status: "enabled", actor: "olive" });
    updateTool(d, { localName: "srv_b", vouch: true, actor: "olive" });
    syncServerTools(
      d,
      serverConfig("srv", { maxTools: 2 }),
      [tool("a"), tool("b", { description: "x" })],
      OPTS,
    );
    const history = toolHistory(d, { localName: "srv_b", userId: user });
    expect(history.changes.map((c) => c.kind)).toEqual(["changed", "vouch_dropped", "added", "over_cap"]);
    expect(history.actions.map((a) => `${a.actor} ${a.action}`)).toEqual([
      "server:srv tool.vouch_dropped",
      "olive tool.vouch",
      "olive tool.enable",
    ]);
    expect(() => toolHistory(d, { localName: "srv_zzz", userId: user })).toThrow(
      expect.objectContaining({ code: "tool_not_found" }),
    );
  });
});
