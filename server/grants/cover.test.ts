/**
 * Which calls a grant covers (PRODUCT.md §11), over a real store (SQLite in memory, or a fresh
 * PostgreSQL database): the same requester, tool and definition, with exactly the approved
 * arguments or any; until expiry; at most `usesAllowed` times, exactly, however the uses
 * interleave — statements on their own, or each in its own transaction as a call's birth is.
 */
import { eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { GatehouseError } from "@/lib/errors";
import { first, transaction } from "../store/db";
import { grants } from "../store/schema";
import {
  AGENT,
  addUser,
  at,
  auditOf,
  call,
  digestOf,
  grant,
  grantWorld,
  HASH,
  OTHER_TOOL,
  T0,
} from "./grant-fixtures";
import { createGrant, findCoveringGrant, takeGrant } from "./index";

describe("what a grant covers", () => {
  it("an `arguments` grant covers exactly the approved arguments, nothing else", async () => {
    const db = await grantWorld();
    const g = await grant(db, { scope: "arguments" });
    expect((await findCoveringGrant(db, call(), at(1)))?.id).toBe(g.id);
    expect(
      await findCoveringGrant(db, call({ argumentsDigest: digestOf({ text: "other" }) }), at(1)),
    ).toBeNull();
    expect(await takeGrant(db, call({ argumentsDigest: digestOf({ text: "other" }) }), at(1))).toBeNull();
    expect((await takeGrant(db, call(), at(1)))?.uses).toBe(1);
  });

  it("a `tool` grant covers any arguments of that tool", async () => {
    const db = await grantWorld();
    const g = await grant(db, { scope: "tool" });
    for (const args of [{ text: "hello" }, { text: "other" }, {}]) {
      expect((await findCoveringGrant(db, call({ argumentsDigest: digestOf(args) }), at(1)))?.id).toBe(g.id);
    }
    expect((await first(db.select().from(grants).where(eq(grants.id, g.id))))?.argumentsDigest).toBeNull();
  });

  it("another agent, another tool or another definition is not covered", async () => {
    const db = await grantWorld();
    await grant(db, { scope: "tool" });
    expect(await findCoveringGrant(db, call({ requesterName: "other-bot" }), at(1))).toBeNull();
    expect(
      await findCoveringGrant(db, call({ requesterKind: "user", requesterName: AGENT }), at(1)),
    ).toBeNull();
    expect(await findCoveringGrant(db, call({ tool: OTHER_TOOL }), at(1))).toBeNull();
    expect(await findCoveringGrant(db, call({ definitionHash: "b".repeat(64) }), at(1))).toBeNull();
    expect(await takeGrant(db, call({ definitionHash: "b".repeat(64) }), at(1))).toBeNull();
    expect(await findCoveringGrant(db, call(), at(1))).not.toBeNull();
  });

  it("covers until its expiry and not from then on", async () => {
    const db = await grantWorld();
    const g = await grant(db, { scope: "tool", minutes: 15 });
    expect(g.expiresAt).toBe(at(15).toISOString());
    expect((await takeGrant(db, call(), at(14.99)))?.id).toBe(g.id);
    expect(await findCoveringGrant(db, call(), at(15))).toBeNull();
    expect(await takeGrant(db, call(), at(15))).toBeNull();
  });

  it("covers exactly `uses` calls, then none; the approved call is not one of them", async () => {
    const db = await grantWorld();
    const g = await grant(db, { scope: "tool", uses: 3 });
    expect(g.uses).toBe(0);
    const taken = [];
    for (const i of [1, 2, 3, 4, 5]) taken.push(await takeGrant(db, call(), at(i)));
    expect(taken.map((r) => r?.uses ?? null)).toEqual([1, 2, 3, null, null]);
    expect(taken[2]?.lastUsedAt).toBe(at(3).toISOString());
    expect(await findCoveringGrant(db, call(), at(6))).toBeNull();
  });

  it("a grant without a use limit covers until time runs out", async () => {
    const db = await grantWorld();
    await grant(db, { scope: "tool" });
    for (let i = 1; i <= 30; i++) expect((await takeGrant(db, call(), at(i)))?.uses).toBe(i);
  });

  it("20 covered calls racing for 5 uses: exactly 5 succeed and the grant shows 5 uses", async () => {
    const db = await grantWorld();
    const g = await grant(db, { scope: "tool", uses: 5 });
    // Each caller yields first, so the takes interleave with whatever else the loop runs.
    const results = await Promise.all(
      Array.from({ length: 20 }, async (_, i) => {
        await Promise.resolve();
        if (i % 2) await new Promise<void>((resolve) => setImmediate(resolve));
        return await takeGrant(db, call(), at(1));
      }),
    );
    expect(results.filter((r) => r !== null)).toHaveLength(5);
    expect(
      results
        .filter((r) => r !== null)
        .map((r) => r?.uses)
        .sort(),
    ).toEqual([1, 2, 3, 4, 5]);
    expect((await first(db.select().from(grants).where(eq(grants.id, g.id))))?.uses).toBe(5);
  });

  it("covered calls racing for uses, each in its own transaction: exactly the uses left succeed", async () => {
    const db = await grantWorld();
    const g = await grant(db, { scope: "tool", uses: 3 });
    // On PostgreSQL the transactions are SERIALIZABLE: those that lose a race are run again.
    const results = await Promise.all(
      Array.from({ length: 8 }, async (_, i) => {
        if (i % 2) await new Promise<void>((resolve) => setImmediate(resolve));
        return await transaction(db, (tx) => takeGrant(tx, call(), at(1)));
      }),
    );
    expect(
      results
        .filter((r) => r !== null)
        .map((r) => r?.uses)
        .sort(),
    ).toEqual([1, 2, 3]);
    expect((await first(db.select().from(grants).where(eq(grants.id, g.id))))?.uses).toBe(3);
  });

  it("prefers an `arguments` grant over a `tool` grant, then the one expiring last", async () => {
    const db = await grantWorld();
    const short = await grant(db, { scope: "tool", minutes: 15 });
    const long = await grant(db, { scope: "tool", minutes: 480 });
    expect((await findCoveringGrant(db, call(), at(1)))?.id).toBe(long.id);
    const exact = await grant(db, { scope: "arguments", minutes: 15 });
    expect((await findCoveringGrant(db, call(), at(1)))?.id).toBe(exact.id);
    expect((await takeGrant(db, call(), at(1)))?.id).toBe(exact.id);
    expect((await takeGrant(db, call({ argumentsDigest: digestOf({ text: "x" }) }), at(1)))?.id).toBe(
      long.id,
    );
    expect(short.uses).toBe(0);
  });

  it("findCoveringGrant takes no use", async () => {
    const db = await grantWorld();
    const g = await grant(db, { scope: "tool", uses: 1 });
    for (let i = 0; i < 3; i++) expect((await findCoveringGrant(db, call(), at(1)))?.uses).toBe(0);
    expect((await takeGrant(db, call(), at(1)))?.id).toBe(g.id);
  });
});

describe("createGrant", () => {
  it("writes the grant and its audit row, naming the reviewer, the tool, the call and what it allows", async () => {
    const db = await grantWorld();
    const g = await grant(db, { scope: "tool", minutes: 60, uses: 10 });
    expect(g.id).toMatch(/^g_[A-Za-z0-9_-]{22}$/);
    expect(g).toMatchObject({ createdAt: T0.toISOString(), usesAllowed: 10, uses: 0, endedAt: null });
    expect(await auditOf(db, "grant.created")).toEqual([
      {
        actor: "alice",
        subject: g.tool,
        callId: g.callId,
        detail: `any arguments for 60 min, at most 10 calls, for agent "build-bot" (grant ${g.id})`,
      },
    ]);
  });

  it("refuses a grant by someone without the reviewer role, and bounds out of range, writing nothing", async () => {
    const db = await grantWorld();
    await addUser(db, "ursula", ["owner", "reviewer"]);
    const base = {
      requesterKind: "agent" as const,
      requesterName: AGENT,
      tool: OTHER_TOOL,
      definitionHash: HASH,
      scope: "tool" as const,
      argumentsDigest: "d",
      callId: "c1",
      minutes: 60,
    };
    const refusal = async (f: () => Promise<unknown>) => {
      try {
        await f();
      } catch (err) {
        return err instanceof GatehouseError ? err.code : String(err);
      }
      return "no error";
    };
    expect(await refusal(() => createGrant(db, { ...base, createdBy: "nobody" }))).toBe("grant_not_allowed");
    expect(await refusal(() => createGrant(db, { ...base, createdBy: "alice", minutes: 481 }))).toBe(
      "bad_request",
    );
    expect(await refusal(() => createGrant(db, { ...base, createdBy: "alice", minutes: 0 }))).toBe(
      "bad_request",
    );
    expect(await refusal(() => createGrant(db, { ...base, createdBy: "alice", uses: 0 }))).toBe(
      "bad_request",
    );
    expect(await refusal(() => createGrant(db, { ...base, createdBy: "alice", uses: 1001 }))).toBe(
      "bad_request",
    );
    expect(await db.select().from(grants)).toEqual([]);
    expect(await auditOf(db, "grant.created")).toEqual([]);
    // An owner who also holds the reviewer role may grant.
    expect((await createGrant(db, { ...base, createdBy: "ursula" })).createdBy).toBe("ursula");
  });

  it("runs inside the caller's transaction: rolled back with it", async () => {
    const db = await grantWorld();
    await expect(
      transaction(db, async (tx) => {
        await grant(tx, { scope: "tool" });
        throw new Error("the approval failed after the grant");
      }),
    ).rejects.toThrow("the approval failed");
    expect(await db.select().from(grants)).toEqual([]);
    expect(await auditOf(db, "grant.created")).toEqual([]);
  });
});
