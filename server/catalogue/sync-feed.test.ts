/**
 * The change feed a refresh writes (syncServerTools against an in-memory SQLite store with
 * migrations): one entry per real change, none for a refresh that changes nothing, written in
 * the refresh's own transaction.
 */
import type { Tool } from "@modelcontextprotocol/client";
import { describe, expect, it } from "vitest";
import { memoryDb, OPTS, serverConfig, tool } from "@/test/support/catalogue";
import { tools } from "../store/schema";
import { listChanges } from "./changes";
import { addUser, feed, kinds, row, view } from "./governance-fixtures";
import { setToolStatus } from "./owner-actions";
import { getToolRow } from "./rows";
import { syncServerTools } from "./sync";
import { COALESCE_WINDOW_MS } from "./sync-plan";
import { listEnabledTools } from "./views";

/**
 * Options for the `n`th of refreshes spaced wider than the coalescing window, so each change
 * keeps its own row (sync-coalescing.test.ts has changes that come closer together).
 */
function apart(n: number) {
  return { ...OPTS, now: new Date(Date.now() + n * (COALESCE_WINDOW_MS + 1000)) };
}

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
    syncServerTools(d, srv, [tool("a", { description: "other" })], apart(1));
    syncServerTools(d, srv, [tool("a")], apart(2));
    const changed = feed(d).filter((c) => c.kind === "changed");
    expect(changed.map((c) => c.detail.restored ?? false)).toEqual([false, true]);
  });

  it("a tool that disappears records gone, and returned with its old status when listed again", () => {
    const d = memoryDb();
    const srv = serverConfig("srv");
    syncServerTools(d, srv, [tool("a"), tool("b")], OPTS);
    setToolStatus(d, { localName: "srv_a", status: "enabled", actor: "olive" });
    syncServerTools(d, srv, [tool("b")], apart(1));
    syncServerTools(d, srv, [tool("b")], apart(2));
    syncServerTools(d, srv, [tool("a"), tool("b")], apart(3));
    expect(feed(d).filter((c) => c.kind === "gone" || c.kind === "returned")).toEqual([
      { kind: "gone", tool: "a", localName: "srv_a", detail: { status: "enabled" } },
      { kind: "returned", tool: "a", localName: "srv_a", detail: { status: "enabled" } },
    ]);
  });

  it("a tool returning with a new definition records returned and changed", () => {
    const d = memoryDb();
    const srv = serverConfig("srv");
    syncServerTools(d, srv, [tool("a")], OPTS);
    syncServerTools(d, srv, [], apart(1));
    syncServerTools(d, srv, [tool("a", { description: "different" })], apart(2));
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

describe("writes that stand or fall with a refresh", () => {
  it("alsoWrite sees the feed rows just written, inside the refresh's transaction", () => {
    const d = memoryDb();
    const seen: { kinds: string[]; inTransaction: boolean }[] = [];
    syncServerTools(d, serverConfig("srv"), [tool("a"), tool("b")], {
      ...OPTS,
      alsoWrite: (changes) =>
        seen.push({ kinds: changes.map((c) => c.kind), inTransaction: d.$client.inTransaction }),
    });
    expect(seen).toEqual([{ kinds: ["added", "added"], inTransaction: true }]);
  });

  it("an alsoWrite that fails leaves no trace of the refresh: no rows, no feed entry", () => {
    const d = memoryDb();
    expect(() =>
      syncServerTools(d, serverConfig("srv"), [tool("a")], {
        ...OPTS,
        alsoWrite: () => {
          throw new Error("outbox write killed");
        },
      }),
    ).toThrow(/outbox write killed/);
    expect(d.select().from(tools).all()).toEqual([]);
    expect(feed(d)).toEqual([]);
  });
});
