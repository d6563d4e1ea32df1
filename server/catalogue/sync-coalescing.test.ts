/**
 * A tool that keeps changing keeps one change-feed row (syncServerTools against an in-memory
 * SQLite store with migrations): changes of one tool within COALESCE_WINDOW_MS replace its
 * latest row by a new one that reads from where the run started, unread for every owner; an
 * owner's act on the tool, a status change or a wider gap start a new row.
 */
import { describe, expect, it } from "vitest";
import { memoryDb, OPTS, serverConfig, tool } from "@/test/support/catalogue";
import { listChanges, markChangesRead } from "./changes";
import { addUser, feed, kinds, row } from "./governance-fixtures";
import { setToolStatus, updateTool } from "./owner-actions";
import { syncServerTools } from "./sync";
import { COALESCE_WINDOW_MS } from "./sync-plan";

const srv = serverConfig("srv");

/** Version `n` of tool `a`: only its description differs. */
const version = (n: number) => tool("a", { description: `version ${n}` });

/** Refresh options at `ms` from now (a negative `ms`: in the past). */
const at = (ms: number) => ({ ...OPTS, now: new Date(Date.now() + ms) });

describe("a flapping tool's changes share one feed row", () => {
  it("an enabled tool that changes on every refresh has one changed row: the latest definition, against the pinned one", async () => {
    const d = await memoryDb();
    await syncServerTools(d, srv, [version(0)], OPTS);
    await setToolStatus(d, { localName: "srv_a", status: "enabled", actor: "olive" });
    const pinned = (await row(d, "srv_a")).definitionHash;
    for (let n = 1; n <= 20; n++) await syncServerTools(d, srv, [version(n)], OPTS);

    expect(await kinds(d)).toEqual(["added a", "changed a"]);
    const latest = await row(d, "srv_a");
    expect(latest.pinnedHash).toBe(pinned);
    expect((await feed(d))[1]?.detail).toEqual({
      status: "enabled",
      fromHash: pinned.slice(0, 12),
      toHash: latest.definitionHash.slice(0, 12),
      summary: ["description"],
      riskier: false,
    });
  });

  it("back at the pinned definition, the one row says restored", async () => {
    const d = await memoryDb();
    await syncServerTools(d, srv, [version(0)], OPTS);
    await setToolStatus(d, { localName: "srv_a", status: "enabled", actor: "olive" });
    await syncServerTools(d, srv, [version(1)], OPTS);
    await syncServerTools(d, srv, [version(0)], OPTS);
    expect(await kinds(d)).toEqual(["added a", "changed a"]);
    expect((await feed(d))[1]?.detail).toMatchObject({ restored: true, summary: [] });
  });

  it("a proposed tool's one row gathers what changed at any step, riskier when any step was", async () => {
    const d = await memoryDb();
    await syncServerTools(d, srv, [tool("a", { annotations: { readOnlyHint: true } })], OPTS);
    const first = (await row(d, "srv_a")).definitionHash;
    await syncServerTools(
      d,
      srv,
      [tool("a", { description: "x", annotations: { readOnlyHint: true } })],
      OPTS,
    );
    await syncServerTools(
      d,
      srv,
      [tool("a", { description: "x", annotations: { readOnlyHint: false } })],
      OPTS,
    );
    expect(await kinds(d)).toEqual(["added a", "changed a"]);
    expect((await feed(d))[1]?.detail).toEqual({
      status: "proposed",
      fromHash: first.slice(0, 12),
      toHash: (await row(d, "srv_a")).definitionHash.slice(0, 12),
      summary: ["description", "readOnlyHint: true → false"],
      riskier: true,
    });
  });

  it("no owner loses a change: the coalesced row is new and unread, for one who read the first and one who did not", async () => {
    const d = await memoryDb();
    const olive = await addUser(d, "olive");
    const bob = await addUser(d, "bob");
    await syncServerTools(d, srv, [version(0)], OPTS);
    await syncServerTools(d, srv, [version(1)], OPTS);
    const firstChange = (await listChanges(d, { userId: olive, limit: 10 })).changes[0];
    expect(firstChange?.kind).toBe("changed");
    await markChangesRead(d, { userId: olive, upTo: firstChange?.id ?? 0 });
    expect((await listChanges(d, { userId: olive, limit: 10 })).unread).toBe(0);

    await syncServerTools(d, srv, [version(2)], OPTS);
    for (const userId of [olive, bob]) {
      const page = await listChanges(d, { userId, limit: 10 });
      expect(page.changes.map((c) => `${c.kind} ${c.unread ? "unread" : "read"}`)).toEqual([
        "changed unread",
        ...(userId === olive ? ["added read"] : ["added unread"]),
      ]);
      expect(page.changes[0]?.id).toBeGreaterThan(firstChange?.id ?? 0);
      expect(page.changes[0]?.detail?.fromHash).toBe(firstChange?.detail?.fromHash);
    }
    expect((await listChanges(d, { userId: olive, limit: 10 })).unread).toBe(1);
  });

  it("an owner accepting the change in between starts a new row, from the definition accepted", async () => {
    const d = await memoryDb();
    await syncServerTools(d, srv, [version(0)], OPTS);
    await setToolStatus(d, { localName: "srv_a", status: "enabled", actor: "olive" });
    // The first change a little in the past, so the acceptance (audited now) is plainly after it.
    await syncServerTools(d, srv, [version(1)], at(-5_000));
    await setToolStatus(d, { localName: "srv_a", status: "enabled", actor: "olive" });
    const accepted = (await row(d, "srv_a")).definitionHash;
    await syncServerTools(d, srv, [version(2)], OPTS);
    await syncServerTools(d, srv, [version(3)], OPTS);
    const changed = (await feed(d)).filter((c) => c.kind === "changed");
    expect(changed).toHaveLength(2);
    expect(changed[1]?.detail).toMatchObject({ fromHash: accepted.slice(0, 12), status: "enabled" });
  });

  it("a status change in between (the owner disabled it) starts a new row", async () => {
    const d = await memoryDb();
    await syncServerTools(d, srv, [version(0)], OPTS);
    await setToolStatus(d, { localName: "srv_a", status: "enabled", actor: "olive" });
    await syncServerTools(d, srv, [version(1)], OPTS);
    await setToolStatus(d, { localName: "srv_a", status: "disabled", actor: "olive" });
    await syncServerTools(d, srv, [version(2)], OPTS);
    expect((await feed(d)).filter((c) => c.kind === "changed").map((c) => c.detail.status)).toEqual([
      "enabled",
      "disabled",
    ]);
  });

  it("a vouch made in between is dropped again in a row of its own, with a new changed row", async () => {
    const d = await memoryDb();
    await syncServerTools(d, srv, [version(0)], OPTS);
    await syncServerTools(d, srv, [version(1)], at(-5_000));
    await updateTool(d, { localName: "srv_a", actor: "olive", vouch: true });
    await syncServerTools(d, srv, [version(2)], OPTS);
    expect(await kinds(d)).toEqual(["added a", "changed a", "vouch_dropped a", "changed a"]);
  });

  it("changes further apart than the window keep their own rows", async () => {
    const d = await memoryDb();
    await syncServerTools(d, srv, [version(0)], OPTS);
    await syncServerTools(d, srv, [version(1)], OPTS);
    await syncServerTools(d, srv, [version(2)], at(COALESCE_WINDOW_MS + 1_000));
    expect(await kinds(d)).toEqual(["added a", "changed a", "changed a"]);
  });

  it("changes of different tools never share a row", async () => {
    const d = await memoryDb();
    await syncServerTools(d, srv, [version(0), tool("b")], OPTS);
    await syncServerTools(d, srv, [version(1), tool("b", { description: "b1" })], OPTS);
    await syncServerTools(d, srv, [version(2), tool("b", { description: "b2" })], OPTS);
    expect(await kinds(d)).toEqual(["added b", "added a", "changed b", "changed a"]);
  });

  it("a tool that keeps disappearing and coming back keeps one row saying where it is now", async () => {
    const d = await memoryDb();
    await syncServerTools(d, srv, [version(0), tool("b")], OPTS);
    await setToolStatus(d, { localName: "srv_a", status: "enabled", actor: "olive" });
    for (let i = 0; i < 5; i++) {
      await syncServerTools(d, srv, [tool("b")], OPTS);
      await syncServerTools(d, srv, [version(0), tool("b")], OPTS);
    }
    expect(await kinds(d)).toEqual(["added b", "added a", "returned a"]);
    await syncServerTools(d, srv, [tool("b")], OPTS);
    expect(await kinds(d)).toEqual(["added b", "added a", "gone a"]);
    expect((await feed(d))[2]?.detail).toEqual({ status: "enabled" });
  });

  it("coalesceWithinMs 0 gives every change its own row", async () => {
    const d = await memoryDb();
    const each = { ...OPTS, coalesceWithinMs: 0 };
    await syncServerTools(d, srv, [version(0)], each);
    await syncServerTools(d, srv, [version(1)], each);
    await syncServerTools(d, srv, [version(2)], each);
    expect(await kinds(d)).toEqual(["added a", "changed a", "changed a"]);
  });
});
