/**
 * The change feed a refresh writes (syncServerTools against a migrated test store, SQLite in
 * memory or PostgreSQL): one entry per real change, none for a refresh that changes nothing, written in
 * the refresh's own transaction.
 */
import type { Tool } from "@modelcontextprotocol/client";
import { describe, expect, it } from "vitest";
import { memoryDb, OPTS, serverConfig, tool } from "@/test/support/catalogue";
import { sqliteOf } from "../store/db";
import { catalogueChanges, tools } from "../store/schema";
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
  it("a first refresh records one added row per new tool and one over_cap row per tool beyond maxTools", async () => {
    const d = await memoryDb();
    const summary = await syncServerTools(
      d,
      serverConfig("srv", { maxTools: 2 }),
      [tool("c"), tool("a"), tool("b")],
      OPTS,
    );
    expect((await kinds(d)).sort()).toEqual(["added a", "added b", "over_cap c"]);
    expect((await feed(d)).find((c) => c.tool === "a")).toMatchObject({
      localName: "srv_a",
      detail: { status: "proposed" },
    });
    expect((await feed(d)).find((c) => c.tool === "c")).toMatchObject({
      localName: null,
      detail: { maxTools: 2 },
    });
    expect(summary.changes.map((c) => c.kind).sort()).toEqual(["added", "added", "over_cap"]);
  });

  it("a refresh that changes nothing records nothing, over-cap tools included", async () => {
    const d = await memoryDb();
    const srv = serverConfig("srv", { maxTools: 1, allowTools: ["a"] });
    const listing = [tool("a"), tool("b")];
    await syncServerTools(d, serverConfig("srv", { maxTools: 1 }), listing, OPTS);
    const first = (await feed(d)).length;
    const again = await syncServerTools(d, serverConfig("srv", { maxTools: 1 }), listing, OPTS);
    expect(again.changes).toEqual([]);
    expect(await feed(d)).toHaveLength(first);
    // The same with allowTools excluding a listed tool: recorded once, then never again.
    await syncServerTools(d, srv, listing, OPTS);
    const withExcluded = (await feed(d)).length;
    await syncServerTools(d, srv, listing, OPTS);
    await syncServerTools(d, srv, listing, OPTS);
    expect(await feed(d)).toHaveLength(withExcluded);
  });

  it("a changed definition records a changed row saying what changed, riskier when readOnlyHint flips", async () => {
    const d = await memoryDb();
    const srv = serverConfig("srv");
    await syncServerTools(d, srv, [tool("a", { annotations: { readOnlyHint: true } })], OPTS);
    await setToolStatus(d, { localName: "srv_a", status: "enabled", actor: "olive" });
    const before = (await row(d, "srv_a")).definitionHash;
    await syncServerTools(
      d,
      srv,
      [tool("a", { description: "now deletes", annotations: { readOnlyHint: false } })],
      OPTS,
    );
    const changed = (await feed(d)).filter((c) => c.kind === "changed");
    expect(changed).toEqual([
      {
        kind: "changed",
        tool: "a",
        localName: "srv_a",
        detail: {
          status: "enabled",
          fromHash: before.slice(0, 12),
          toHash: (await row(d, "srv_a")).definitionHash.slice(0, 12),
          summary: ["description", "readOnlyHint: true → false"],
          riskier: true,
        },
      },
    ]);
  });

  it("a change back to the pinned definition is recorded as restored", async () => {
    const d = await memoryDb();
    const srv = serverConfig("srv");
    await syncServerTools(d, srv, [tool("a")], OPTS);
    await setToolStatus(d, { localName: "srv_a", status: "enabled", actor: "olive" });
    await syncServerTools(d, srv, [tool("a", { description: "other" })], apart(1));
    await syncServerTools(d, srv, [tool("a")], apart(2));
    const changed = (await feed(d)).filter((c) => c.kind === "changed");
    expect(changed.map((c) => c.detail.restored ?? false)).toEqual([false, true]);
  });

  it("a tool that disappears records gone, and returned with its old status when listed again", async () => {
    const d = await memoryDb();
    const srv = serverConfig("srv");
    await syncServerTools(d, srv, [tool("a"), tool("b")], OPTS);
    await setToolStatus(d, { localName: "srv_a", status: "enabled", actor: "olive" });
    await syncServerTools(d, srv, [tool("b")], apart(1));
    await syncServerTools(d, srv, [tool("b")], apart(2));
    await syncServerTools(d, srv, [tool("a"), tool("b")], apart(3));
    expect((await feed(d)).filter((c) => c.kind === "gone" || c.kind === "returned")).toEqual([
      { kind: "gone", tool: "a", localName: "srv_a", detail: { status: "enabled" } },
      { kind: "returned", tool: "a", localName: "srv_a", detail: { status: "enabled" } },
    ]);
  });

  it("a tool returning with a new definition records returned and changed", async () => {
    const d = await memoryDb();
    const srv = serverConfig("srv");
    await syncServerTools(d, srv, [tool("a")], OPTS);
    await syncServerTools(d, srv, [], apart(1));
    await syncServerTools(d, srv, [tool("a", { description: "different" })], apart(2));
    expect(await kinds(d)).toEqual(["added a", "gone a", "returned a", "changed a"]);
  });

  it("tools excluded by allowTools are recorded once each, without a row", async () => {
    const d = await memoryDb();
    const srv = serverConfig("srv", { allowTools: ["a"] });
    await syncServerTools(d, srv, [tool("a"), tool("x"), tool("y")], OPTS);
    await syncServerTools(d, srv, [tool("a"), tool("x"), tool("y")], OPTS);
    expect((await kinds(d)).sort()).toEqual(["added a", "excluded x", "excluded y"]);
    expect(await getToolRow(d, "srv_x")).toBeNull();
  });

  it("an excluded tool is recorded again once its latest entry is another one, and only then", async () => {
    const d = await memoryDb();
    const wide = serverConfig("srv", { maxTools: 1 });
    const narrow = serverConfig("srv", { maxTools: 1, allowTools: ["a"] });
    await syncServerTools(d, wide, [tool("a"), tool("x")], OPTS);
    await syncServerTools(d, narrow, [tool("a"), tool("x"), tool("y")], OPTS);
    await syncServerTools(d, narrow, [tool("a"), tool("x"), tool("y")], OPTS);
    // x is over the cap again (its latest entry is no longer "excluded"); y's latest still is.
    await syncServerTools(d, wide, [tool("a"), tool("x")], OPTS);
    await syncServerTools(d, narrow, [tool("a"), tool("x"), tool("y")], OPTS);
    await syncServerTools(d, narrow, [tool("a"), tool("x"), tool("y")], OPTS);
    expect(await kinds(d)).toEqual([
      "over_cap x",
      "added a",
      "excluded y",
      "excluded x",
      "over_cap x",
      "excluded x",
    ]);
  });

  it("a tool with a row that allowTools now excludes is recorded as excluded and is no longer callable", async () => {
    const d = await memoryDb();
    await syncServerTools(d, serverConfig("srv"), [tool("a"), tool("b")], OPTS);
    await setToolStatus(d, { localName: "srv_b", status: "enabled", actor: "olive" });
    const narrowed = serverConfig("srv", { allowTools: ["a"] });
    await syncServerTools(d, narrowed, [tool("a"), tool("b")], OPTS);
    await syncServerTools(d, narrowed, [tool("a"), tool("b")], OPTS);
    expect((await feed(d)).filter((c) => c.kind === "excluded")).toEqual([
      { kind: "excluded", tool: "b", localName: "srv_b", detail: { hadRow: true, status: "enabled" } },
    ]);
    expect((await view(d, "srv_b")).availability).toBe("gone");
    expect(await listEnabledTools(d)).toEqual([]);
  });

  it("a tool newly over the cap is recorded once; one already over the cap is not recorded again", async () => {
    const d = await memoryDb();
    const srv = serverConfig("srv", { maxTools: 1 });
    await syncServerTools(d, srv, [tool("a"), tool("b")], OPTS);
    await syncServerTools(d, srv, [tool("a"), tool("b"), tool("c")], OPTS);
    expect(await kinds(d)).toEqual(["over_cap b", "added a", "over_cap c"]);
  });

  it("rows of one refresh share one time; read newest first, a changed tool comes before additions", async () => {
    const d = await memoryDb();
    const srv = serverConfig("srv");
    await syncServerTools(d, srv, [tool("m")], OPTS);
    await syncServerTools(d, srv, [tool("m", { description: "new" }), tool("b"), tool("a")], OPTS);
    const user = await addUser(d, "olive");
    const page = await listChanges(d, { userId: user, limit: 10 });
    expect(page.changes.map((c) => `${c.kind} ${c.tool}`)).toEqual([
      "changed m",
      "added a",
      "added b",
      "added m",
    ]);
    expect(new Set(page.changes.slice(0, 3).map((c) => c.at)).size).toBe(1);
  });

  it("the feed is written in the catalogue's transaction: a refresh that fails writes neither", async () => {
    const d = await memoryDb();
    // A BigInt cannot be serialised: storing the second tool throws after the first was inserted.
    const poisoned = tool("b", {
      inputSchema: { type: "object", default: 1n } as unknown as Tool["inputSchema"],
    });
    await expect(syncServerTools(d, serverConfig("srv"), [tool("a"), poisoned], OPTS)).rejects.toThrow();
    expect(await d.select().from(tools)).toEqual([]);
    expect(await feed(d)).toEqual([]);
  });
});

describe("writes that stand or fall with a refresh", () => {
  it("alsoWrite sees the feed rows just written, inside the refresh's transaction", async () => {
    const d = await memoryDb();
    const seen: { kinds: string[]; inFeed: number[]; inTransaction: boolean }[] = [];
    const summary = await syncServerTools(d, serverConfig("srv"), [tool("a"), tool("b")], {
      ...OPTS,
      alsoWrite: async (tx, changes) => {
        // Read on the transaction's tx: the rows are there before the refresh commits.
        const inFeed = (await tx.select({ id: catalogueChanges.id }).from(catalogueChanges)).map((r) => r.id);
        // SQLite says whether its one connection is in a transaction; PostgreSQL's tx is one.
        const inTransaction = sqliteOf(d)?.inTransaction ?? true;
        seen.push({ kinds: changes.map((c) => c.kind), inFeed: inFeed.sort((a, b) => a - b), inTransaction });
      },
    });
    expect(seen).toEqual([
      { kinds: ["added", "added"], inFeed: summary.changes.map((c) => c.id), inTransaction: true },
    ]);
  });

  it("an alsoWrite that fails leaves no trace of the refresh: no rows, no feed entry", async () => {
    const d = await memoryDb();
    await expect(
      syncServerTools(d, serverConfig("srv"), [tool("a")], {
        ...OPTS,
        alsoWrite: async () => {
          throw new Error("outbox write killed");
        },
      }),
    ).rejects.toThrow(/outbox write killed/);
    expect(await d.select().from(tools)).toEqual([]);
    expect(await feed(d)).toEqual([]);
  });
});
