/** Reading the change feed: paging, per-owner unread marks, and one tool's history. */
import { describe, expect, it } from "vitest";
import { memoryDb, OPTS, serverConfig, tool } from "@/test/support/catalogue";
import { listChanges, markChangesRead, toolHistory } from "./changes";
import { addUser } from "./governance-fixtures";
import { setToolStatus, updateTool } from "./owner-actions";
import { syncServerTools } from "./sync";

describe("reading the change feed", () => {
  async function withChanges(n: number) {
    const d = await memoryDb();
    const srv = serverConfig("srv", { maxTools: 200 });
    await syncServerTools(
      d,
      srv,
      Array.from({ length: n }, (_, i) => tool(`t${String(i).padStart(3, "0")}`)),
      OPTS,
    );
    return d;
  }

  it("pages newest first: each page's nextBefore leads to the next, and the last has none", async () => {
    const d = await withChanges(25);
    const user = await addUser(d, "olive");
    const first = await listChanges(d, { userId: user, limit: 10 });
    const second = await listChanges(d, { userId: user, limit: 10, before: first.nextBefore ?? 0 });
    const third = await listChanges(d, { userId: user, limit: 10, before: second.nextBefore ?? 0 });
    const ids = [...first.changes, ...second.changes, ...third.changes].map((c) => c.id);
    expect(ids).toHaveLength(25);
    expect([...ids].sort((a, b) => b - a)).toEqual(ids);
    expect(new Set(ids).size).toBe(25);
    expect(third.nextBefore).toBeNull();
  });

  it("unread marks and counts are per owner, and marking read never moves back or past the newest", async () => {
    const d = await withChanges(5);
    const olive = await addUser(d, "olive");
    const oscar = await addUser(d, "oscar");
    const all = await listChanges(d, { userId: olive, limit: 100 });
    expect(all.unread).toBe(5);
    expect(all.changes.every((c) => c.unread)).toBe(true);
    const newest = all.changes[0]?.id ?? 0;
    const third = all.changes[2]?.id ?? 0;

    expect(await markChangesRead(d, { userId: olive, upTo: third })).toEqual({
      lastSeenId: third,
      unread: 2,
    });
    const after = await listChanges(d, { userId: olive, limit: 100 });
    expect(after.changes.map((c) => c.unread)).toEqual([true, true, false, false, false]);
    expect((await listChanges(d, { userId: oscar, limit: 100 })).unread).toBe(5);

    // Backwards is ignored; beyond the newest is capped at the newest.
    expect((await markChangesRead(d, { userId: olive, upTo: 1 })).lastSeenId).toBe(third);
    expect(await markChangesRead(d, { userId: olive, upTo: newest + 1000 })).toEqual({
      lastSeenId: newest,
      unread: 0,
    });
    // A change arriving later is unread again.
    await syncServerTools(
      d,
      serverConfig("srv", { maxTools: 200 }),
      [tool("t000", { description: "x" })],
      OPTS,
    );
    expect((await listChanges(d, { userId: olive, limit: 100 })).unread).toBeGreaterThan(0);
  });

  it("a tool's history has its own changes (over the cap before it had a row too) and owners' actions", async () => {
    const d = await memoryDb();
    const user = await addUser(d, "olive");
    await syncServerTools(d, serverConfig("srv", { maxTools: 1 }), [tool("a"), tool("b")], OPTS);
    // maxTools raised: b gets its row now.
    await syncServerTools(d, serverConfig("srv", { maxTools: 2 }), [tool("a"), tool("b")], OPTS);
    await setToolStatus(d, { localName: "srv_b", status: "enabled", actor: "olive" });
    await updateTool(d, { localName: "srv_b", vouch: true, actor: "olive" });
    await syncServerTools(
      d,
      serverConfig("srv", { maxTools: 2 }),
      [tool("a"), tool("b", { description: "x" })],
      OPTS,
    );
    const history = await toolHistory(d, { localName: "srv_b", userId: user });
    expect(history.changes.map((c) => c.kind)).toEqual(["changed", "vouch_dropped", "added", "over_cap"]);
    expect(history.actions.map((a) => `${a.actor} ${a.action}`)).toEqual([
      "server:srv tool.vouch_dropped",
      "olive tool.vouch",
      "olive tool.enable",
    ]);
    await expect(toolHistory(d, { localName: "srv_zzz", userId: user })).rejects.toThrow(
      expect.objectContaining({ code: "tool_not_found" }),
    );
  });
});
