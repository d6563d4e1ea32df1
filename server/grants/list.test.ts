/**
 * `listGrants` and the grant's view (PRODUCT.md §11): live grants newest first, then the most
 * recently ended ones, each saying why and when it ended — whether the ending was recorded with
 * its cause or found at read time.
 */
import { eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { first } from "../store/db";
import { grants, tools } from "../store/schema";
import { ARGS, at, call, grant, grantWorld, OTHER_TOOL, T0, TOOL } from "./grant-fixtures";
import { grantView, listGrants, readGrantView, revokeGrant, takeGrant } from "./index";

describe("listGrants", () => {
  it("lists live grants newest first, then ended ones most recently ended first, at most endedLimit", async () => {
    const db = await grantWorld();
    const expiredEarly = await grant(db, { scope: "tool", minutes: 15 }, T0); // ends at 15
    const revokedLate = await grant(db, { scope: "tool" }, at(1));
    const expiredLater = await grant(db, { scope: "tool", minutes: 15 }, at(10)); // ends at 25
    const liveOld = await grant(db, { scope: "tool", minutes: 480 }, at(2));
    const liveNew = await grant(db, { scope: "arguments", minutes: 480 }, at(3));
    await revokeGrant(db, revokedLate.id, "olga", at(30));
    const ids = (list: { id: string }[]) => list.map((v) => v.id);

    const all = await listGrants(db, { now: at(40) });
    expect(ids(all)).toEqual([liveNew.id, liveOld.id, revokedLate.id, expiredLater.id, expiredEarly.id]);
    expect(all.map((v) => v.state)).toEqual(["live", "live", "ended", "ended", "ended"]);
    expect(all.map((v) => v.endedAt)).toEqual([
      null,
      null,
      at(30).toISOString(),
      at(25).toISOString(),
      at(15).toISOString(),
    ]);
    expect(ids(await listGrants(db, { now: at(40), endedLimit: 1 }))).toEqual([
      liveNew.id,
      liveOld.id,
      revokedLate.id,
    ]);
    expect(ids(await listGrants(db, { now: at(40), endedLimit: 0 }))).toEqual([liveNew.id, liveOld.id]);
  });

  it("says why each ended: expired, used up, revoked, the definition changed", async () => {
    const db = await grantWorld();
    const expired = await grant(db, { scope: "tool", minutes: 15 });
    const usedUp = await grant(db, { scope: "tool", tool: OTHER_TOOL, uses: 2 });
    await takeGrant(db, call({ tool: OTHER_TOOL }), at(3));
    await takeGrant(db, call({ tool: OTHER_TOOL }), at(4));
    const byView = async (now: Date) => new Map((await listGrants(db, { now })).map((v) => [v.id, v]));

    let views = await byView(at(20));
    expect(views.get(expired.id)).toMatchObject({ endReason: "expired", endedAt: at(15).toISOString() });
    expect(views.get(usedUp.id)).toMatchObject({
      state: "ended",
      endReason: "used up (2 of 2)",
      endedAt: at(4).toISOString(),
      uses: 2,
      lastUsedAt: at(4).toISOString(),
    });

    // A definition change the refresh did not end eagerly (or a tool row that is gone) still shows.
    const changed = await grant(db, { scope: "tool" }, at(20));
    await db
      .update(tools)
      .set({ definitionHash: "c".repeat(64), updatedAt: at(21).toISOString() })
      .where(eq(tools.localName, TOOL));
    views = await byView(at(22));
    expect(views.get(changed.id)).toMatchObject({
      state: "ended",
      endReason: "the tool's definition changed",
      endedAt: at(21).toISOString(),
    });
    await db.delete(tools).where(eq(tools.localName, TOOL));
    expect((await byView(at(22))).get(changed.id)).toMatchObject({
      endReason: "the tool's definition changed",
    });
  });

  it("shows the exact arguments of an `arguments` grant and none for a `tool` grant", async () => {
    const db = await grantWorld();
    const exact = await grant(db, { scope: "arguments" });
    const any = await grant(db, { scope: "tool" });
    const views = new Map((await listGrants(db, { now: at(1) })).map((v) => [v.id, v]));
    expect(views.get(exact.id)).toMatchObject({
      scope: "arguments",
      arguments: ARGS,
      requester: { kind: "agent", name: "build-bot" },
      tool: TOOL,
      callId: exact.callId,
      createdBy: "alice",
      createdAt: T0.toISOString(),
      expiresAt: at(60).toISOString(),
      usesAllowed: null,
      uses: 0,
      lastUsedAt: null,
      state: "live",
      endReason: null,
      endedAt: null,
    });
    expect(views.get(any.id)?.arguments).toBeNull();
    expect(await readGrantView(db, exact.id, at(1))).toEqual(views.get(exact.id));
    expect(await readGrantView(db, "g_nope", at(1))).toBeNull();
  });
});

describe("grantView", () => {
  it("without standing, judges by the row alone", async () => {
    const db = await grantWorld();
    const g = await grant(db, { scope: "tool", uses: 1 });
    expect(grantView(g, at(1))).toMatchObject({ state: "live", arguments: null });
    expect(grantView(g, at(60))).toMatchObject({ state: "ended", endReason: "expired" });
    const used = await takeGrant(db, call(), at(2));
    expect(used && grantView(used, at(3))).toMatchObject({ state: "ended", endReason: "used up (1 of 1)" });
    const row = await first(db.select().from(grants).where(eq(grants.id, g.id)));
    expect(row && grantView(row, at(3)).endedAt).toBe(at(2).toISOString());
  });
});
