/**
 * How grants end (PRODUCT.md §11), over a real store (SQLite in memory, or PostgreSQL): revoked by anyone, eagerly with
 * their cause (the real `revokeToken`, the real `setUserRoles`, a real catalogue refresh) in the
 * cause's own transaction, and lazily when an ending was missed.
 */
import { eq, sql } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { GatehouseError } from "@/lib/errors";
import { memoryDb, OPTS, serverConfig, tool } from "@/test/support/catalogue";
import { revokeToken } from "../auth/tokens";
import { setUserRoles } from "../auth/users";
import { syncServerTools } from "../catalogue/sync";
import { type Db, dialectOf, first, rows, sqliteOf } from "../store/db";
import { agentTokens, grants, tools, users } from "../store/schema";
import { AGENT, addToken, addUser, at, auditOf, call, grant, grantWorld, T0 } from "./grant-fixtures";
import {
  endGrantsForChanges,
  findCoveringGrant,
  type GrantRow,
  listGrants,
  revokeGrant,
  takeGrant,
} from "./index";

async function codeOf(f: () => Promise<unknown>): Promise<string> {
  try {
    await f();
  } catch (err) {
    return err instanceof GatehouseError ? err.code : String(err);
  }
  return "no error";
}

/** The messages of `f`'s rejection and of its causes (drizzle wraps the store's error in its own). */
async function failureOf(f: () => Promise<unknown>): Promise<string> {
  try {
    await f();
  } catch (err) {
    const messages: string[] = [];
    for (let e: unknown = err; e instanceof Error; e = e.cause) messages.push(e.message);
    return messages.join(" / ");
  }
  return "no error";
}

async function listed(db: Db, g: GrantRow, now: Date) {
  return (await listGrants(db, { now })).find((v) => v.id === g.id);
}

/**
 * Runs `during` while every audit row with `action` fails, so the write that adds one fails
 * after its other writes: a trigger of this connection on SQLite, of this database on
 * PostgreSQL (dropped again after: a later test may reuse the database).
 */
async function whileAuditFails(db: Db, action: string, during: () => Promise<void>): Promise<void> {
  const sqlite = sqliteOf(db);
  if (sqlite) {
    sqlite.exec(
      `CREATE TEMP TRIGGER fail_audit BEFORE INSERT ON audit_events WHEN NEW.action = '${action}'
       BEGIN SELECT RAISE(ABORT, 'the audit row could not be written'); END`,
    );
  } else {
    expect(dialectOf(db)).toBe("postgres");
    await rows(
      db,
      sql.raw(`CREATE FUNCTION fail_audit() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          IF NEW.action = '${action}' THEN RAISE EXCEPTION 'the audit row could not be written'; END IF;
          RETURN NEW;
        END $$`),
    );
    await rows(
      db,
      sql.raw(
        "CREATE TRIGGER fail_audit BEFORE INSERT ON audit_events FOR EACH ROW EXECUTE FUNCTION fail_audit()",
      ),
    );
  }
  try {
    await during();
  } finally {
    if (sqlite) sqlite.exec("DROP TRIGGER fail_audit");
    else {
      await rows(db, sql.raw("DROP TRIGGER fail_audit ON audit_events"));
      await rows(db, sql.raw("DROP FUNCTION fail_audit()"));
    }
  }
}

describe("revokeGrant", () => {
  it("ends a grant for good: not covered, listed as revoked by whom, with one audit row", async () => {
    const db = await grantWorld();
    await addUser(db, "bob", ["reviewer"]);
    const g = await grant(db, { scope: "tool" });
    const view = await revokeGrant(db, g.id, "bob", at(5));
    expect(view).toMatchObject({ state: "ended", endReason: "revoked by bob", endedAt: at(5).toISOString() });
    expect(await findCoveringGrant(db, call(), at(6))).toBeNull();
    expect(await takeGrant(db, call(), at(6))).toBeNull();
    expect(await listed(db, g, at(6))).toMatchObject({ state: "ended", endReason: "revoked by bob" });
    expect(await auditOf(db, "grant.revoked")).toEqual([
      {
        actor: "bob",
        subject: g.tool,
        callId: g.callId,
        detail: `grant ${g.id} for agent "build-bot": revoked by bob`,
      },
    ]);
  });

  it("revoking an ended grant again changes nothing and writes no second row", async () => {
    const db = await grantWorld();
    const g = await grant(db, { scope: "tool", minutes: 15 });
    const once = await revokeGrant(db, g.id, "alice", at(5));
    expect(await revokeGrant(db, g.id, "olga", at(6))).toEqual(once);
    expect(await auditOf(db, "grant.revoked")).toHaveLength(1);
    // An expired one keeps its reason too.
    const old = await grant(db, { scope: "tool", minutes: 15 });
    expect(await revokeGrant(db, old.id, "alice", at(20))).toMatchObject({
      state: "ended",
      endReason: "expired",
    });
    expect(await auditOf(db, "grant.revoked")).toHaveLength(1);
  });

  it("revoking a grant that only looked ended (its tool's definition differs) keeps it ended if the definition comes back", async () => {
    const db = await grantWorld();
    const g = await grant(db, { scope: "tool" });
    await db
      .update(tools)
      .set({ definitionHash: "b".repeat(64) })
      .where(eq(tools.localName, g.tool));
    expect(await revokeGrant(db, g.id, "alice", at(1))).toMatchObject({ state: "ended" });
    expect((await auditOf(db, "grant.ended")).map((r) => r.detail)).toEqual([
      `grant ${g.id} for agent "build-bot": the tool's definition changed (made final by alice)`,
    ]);
    // The server goes back to the definition the grant was pinned to.
    await db.update(tools).set({ definitionHash: g.definitionHash }).where(eq(tools.localName, g.tool));
    expect(await takeGrant(db, call(), at(2))).toBeNull();
    expect((await first(db.select().from(grants).where(eq(grants.id, g.id))))?.endedAt).not.toBeNull();
  });

  it("an unknown id is grant_not_found", async () => {
    const db = await grantWorld();
    expect(await codeOf(() => revokeGrant(db, "g_nope", "alice"))).toBe("grant_not_found");
  });
});

describe("revoking the agent's token ends its grants", () => {
  it("in the revocation's transaction: not covered, listed with the reason, one grant.ended row each", async () => {
    const db = await grantWorld();
    const a = await grant(db, { scope: "tool" });
    const b = await grant(db, { scope: "arguments" });
    const other = await grant(db, { requesterName: "other-bot", scope: "tool" });
    await revokeToken(db, { name: AGENT, actor: "olga" }, at(10));
    expect(await findCoveringGrant(db, call(), at(11))).toBeNull();
    for (const g of [a, b]) {
      expect(await listed(db, g, at(11))).toMatchObject({
        state: "ended",
        endReason: "the agent's token was revoked",
        endedAt: at(10).toISOString(),
      });
    }
    expect((await auditOf(db, "grant.ended")).map((r) => [r.actor, r.detail])).toEqual(
      [a, b].map((g) => ["olga", `grant ${g.id} for agent "build-bot": the agent's token was revoked`]),
    );
    expect((await first(db.select().from(grants).where(eq(grants.id, other.id))))?.endedAt).toBeNull();
  });

  it("a revocation that fails ends nothing", async () => {
    const db = await grantWorld();
    const g = await grant(db, { scope: "tool" });
    expect(await codeOf(() => revokeToken(db, { name: "no-such-bot", actor: "olga" }))).toBe("not_found");
    // Fails after the grants were ended, at its own audit row: all of it is rolled back.
    await whileAuditFails(db, "token.revoke", async () => {
      expect(await failureOf(() => revokeToken(db, { name: AGENT, actor: "olga" }, at(10)))).toMatch(
        "could not be written",
      );
    });
    expect(
      (await first(db.select().from(agentTokens).where(eq(agentTokens.name, AGENT))))?.revokedAt,
    ).toBeNull();
    expect((await takeGrant(db, call(), at(11)))?.id).toBe(g.id);
    expect((await listed(db, g, at(11)))?.state).toBe("live");
    expect(await auditOf(db, "grant.ended")).toEqual([]);
  });

  it("a token revoked behind the room's back still covers nothing, and the list says why", async () => {
    const db = await grantWorld();
    const g = await grant(db, { scope: "tool" });
    await db
      .update(agentTokens)
      .set({ revokedAt: at(7).toISOString() })
      .where(eq(agentTokens.name, AGENT));
    expect(await takeGrant(db, call(), at(8))).toBeNull();
    expect(await listed(db, g, at(8))).toMatchObject({
      state: "ended",
      endReason: "the agent's token was revoked",
      endedAt: at(7).toISOString(),
    });
  });
});

describe("a reviewer losing the role ends their grants", () => {
  it("setUserRoles takes the role: their grants end in the same transaction, others' stay", async () => {
    const db = await grantWorld();
    await addUser(db, "bob", ["reviewer"]);
    const mine = await grant(db, { scope: "tool", createdBy: "alice" });
    const bobs = await grant(db, { scope: "arguments", createdBy: "bob" });
    await setUserRoles(db, { name: "alice", roles: ["owner"], actor: "olga" }, at(1));
    expect(await listed(db, mine, at(1))).toMatchObject({
      state: "ended",
      endReason: "alice no longer has the reviewer role",
      endedAt: at(1).toISOString(),
    });
    expect((await auditOf(db, "grant.ended")).map((r) => [r.actor, r.detail])).toEqual([
      ["olga", `grant ${mine.id} for agent "build-bot": alice no longer has the reviewer role`],
    ]);
    expect(await auditOf(db, "user.roles")).toEqual([
      { actor: "olga", subject: "alice", callId: null, detail: "reviewer → owner" },
    ]);
    // bob's exact-arguments grant still covers; alice's any-arguments one does not.
    expect((await takeGrant(db, call(), at(1)))?.id).toBe(bobs.id);
    expect((await listed(db, bobs, at(1)))?.state).toBe("live");
    // Giving the role back does not bring an ended grant back.
    await setUserRoles(db, { name: "alice", roles: ["reviewer"], actor: "olga" }, at(2));
    expect((await listed(db, mine, at(2)))?.state).toBe("ended");
  });

  it("a role change that fails ends nothing", async () => {
    const db = await grantWorld();
    const g = await grant(db, { scope: "tool" });
    await whileAuditFails(db, "user.roles", async () => {
      expect(
        await failureOf(() => setUserRoles(db, { name: "alice", roles: ["owner"], actor: "olga" }, at(1))),
      ).toMatch("could not be written");
    });
    expect((await first(db.select().from(users).where(eq(users.name, "alice"))))?.roles).toBe("reviewer");
    expect((await takeGrant(db, call(), at(1)))?.id).toBe(g.id);
    expect(await auditOf(db, "grant.ended")).toEqual([]);
  });

  it("a role taken behind the room's back: covers nothing, listed with the reason", async () => {
    const db = await grantWorld();
    const g = await grant(db, { scope: "tool" });
    await db.update(users).set({ roles: "owner" }).where(eq(users.name, "alice"));
    expect(await findCoveringGrant(db, call(), at(1))).toBeNull();
    expect(await takeGrant(db, call(), at(1))).toBeNull();
    expect(await listed(db, g, at(1))).toMatchObject({
      state: "ended",
      endReason: "alice no longer has the reviewer role",
    });
  });

  it("an owner without the reviewer role grants as owner; losing the owner role ends it", async () => {
    const db = await grantWorld();
    await addUser(db, "otto", ["owner"]);
    const g = await grant(db, { scope: "tool", createdBy: "olga" });
    expect(g.madeAs).toBe("owner");
    expect((await takeGrant(db, call(), at(1)))?.id).toBe(g.id);
    // otto stays owner, so olga may stop being one.
    await setUserRoles(db, { name: "olga", roles: ["reviewer"], actor: "otto" }, at(2));
    expect(await listed(db, g, at(2))).toMatchObject({
      state: "ended",
      endReason: "olga no longer has the owner role",
    });
    expect(await takeGrant(db, call(), at(2))).toBeNull();
  });

  it("a reviewer who is also an owner grants as reviewer: losing the owner role ends nothing", async () => {
    const db = await grantWorld();
    await addUser(db, "rose", ["owner", "reviewer"]);
    const g = await grant(db, { scope: "tool", createdBy: "rose" });
    expect(g.madeAs).toBe("reviewer");
    await setUserRoles(db, { name: "rose", roles: ["reviewer"], actor: "olga" }, at(1));
    expect((await takeGrant(db, call(), at(1)))?.id).toBe(g.id);
  });

  it("keeping the reviewer role (owner added) ends nothing; the same roles again write nothing", async () => {
    const db = await grantWorld();
    const g = await grant(db, { scope: "tool" });
    await setUserRoles(db, { name: "alice", roles: ["reviewer", "owner"], actor: "olga" }, at(1));
    await setUserRoles(db, { name: "alice", roles: ["owner", "reviewer", "owner"], actor: "olga" }, at(1));
    expect((await auditOf(db, "user.roles")).map((r) => r.detail)).toEqual(["reviewer → owner,reviewer"]);
    expect((await takeGrant(db, call(), at(1)))?.id).toBe(g.id);
  });
});

describe("setUserRoles", () => {
  it("refuses to take the owner role from the last owner, and allows it once there is another", async () => {
    const db = await grantWorld();
    const err = await (async () => {
      try {
        await setUserRoles(db, { name: "olga", roles: ["reviewer"], actor: "olga" });
      } catch (e) {
        return e as GatehouseError;
      }
    })();
    expect(err?.code).toBe("conflict");
    expect(err?.status).toBe(409);
    expect(err?.message).toBe("olga is the last owner: give someone else the owner role first");
    expect((await first(db.select().from(users).where(eq(users.name, "olga"))))?.roles).toBe("owner");
    expect(await auditOf(db, "user.roles")).toEqual([]);

    await setUserRoles(db, { name: "alice", roles: ["owner", "reviewer"], actor: "olga" });
    expect((await setUserRoles(db, { name: "olga", roles: ["reviewer"], actor: "olga" })).roles).toEqual([
      "reviewer",
    ]);
    expect((await auditOf(db, "user.roles")).map((r) => r.detail)).toEqual([
      "reviewer → owner,reviewer",
      "owner → reviewer",
    ]);
  });

  it("an unknown person is not_found; no roles at all is bad_request", async () => {
    const db = await grantWorld();
    expect(await codeOf(() => setUserRoles(db, { name: "nobody", roles: ["reviewer"], actor: "olga" }))).toBe(
      "not_found",
    );
    expect(await codeOf(() => setUserRoles(db, { name: "alice", roles: [], actor: "olga" }))).toBe(
      "bad_request",
    );
  });
});

describe("a catalogue refresh ends the grants it makes void", () => {
  const server = serverConfig("notes");
  const addNote = (description: string) => tool("add_note", { description });

  async function refreshedWorld() {
    const db = await memoryDb();
    await addUser(db, "alice", ["reviewer"]);
    await addToken(db, AGENT);
    const refresh = (listing: ReturnType<typeof tool>[]) =>
      syncServerTools(db, server, listing, {
        ...OPTS,
        alsoWrite: async (tx, changes) => {
          await endGrantsForChanges(tx, changes);
        },
      });
    await refresh([addNote("adds a note"), tool("list_notes")]);
    const hash = async () =>
      (await first(db.select().from(tools).where(eq(tools.localName, "notes_add_note"))))?.definitionHash ??
      "";
    return { db, refresh, hash };
  }

  it("a changed definition ends grants pinned to the old one, in the refresh's transaction", async () => {
    const { db, refresh, hash } = await refreshedWorld();
    const before = await hash();
    const old = await grant(db, { scope: "tool", definitionHash: before }, new Date());
    const summary = await refresh([addNote("adds a note, and deletes the others"), tool("list_notes")]);
    const changed = summary.changes.find((c) => c.kind === "changed");
    expect(changed?.localName).toBe("notes_add_note");
    expect(await hash()).not.toBe(before);
    expect(await listed(db, old, new Date())).toMatchObject({
      state: "ended",
      endReason: "the tool's definition changed",
      endedAt: changed?.at,
    });
    expect((await auditOf(db, "grant.ended")).map((r) => [r.actor, r.detail])).toEqual([
      ["server:notes", `grant ${old.id} for agent "build-bot": the tool's definition changed`],
    ]);

    // A grant made for the new definition survives refreshes that change other tools.
    const fresh = await grant(db, { scope: "tool", definitionHash: await hash() }, new Date());
    await refresh([
      addNote("adds a note, and deletes the others"),
      tool("list_notes", { description: "new" }),
    ]);
    expect((await listed(db, fresh, new Date()))?.state).toBe("live");
  });

  it("a row moved to the hash of its cleaned definition keeps its grants live, bound to the new hash", async () => {
    const { db, refresh, hash } = await refreshedWorld();
    // What an earlier version would have stored: the same content, hashed before cleaning.
    const cleaned = await hash();
    const raw = "r".repeat(64);
    await db
      .update(tools)
      .set({ definitionHash: raw, pinnedHash: raw, status: "enabled" })
      .where(eq(tools.localName, "notes_add_note"));
    const g = await grant(db, { scope: "tool", definitionHash: raw }, new Date());
    const row = await first(db.select().from(tools).where(eq(tools.localName, "notes_add_note")));
    expect(row?.definitionHash).toBe(raw);
    await refresh([addNote("adds a note"), tool("list_notes")]);
    expect(await hash()).toBe(cleaned);
    expect((await listed(db, g, new Date()))?.state).toBe("live");
    expect((await first(db.select().from(grants).where(eq(grants.id, g.id))))?.definitionHash).toBe(cleaned);
  });

  it("a tool that is gone ends its grants", async () => {
    const { db, refresh, hash } = await refreshedWorld();
    const g = await grant(db, { scope: "tool", definitionHash: await hash() }, new Date());
    await refresh([tool("list_notes")]);
    expect(await listed(db, g, new Date())).toMatchObject({ state: "ended", endReason: "the tool is gone" });
    expect(await auditOf(db, "grant.ended")).toHaveLength(1);
  });

  it("a refresh that fails after the feed is written ends nothing", async () => {
    const { db, hash } = await refreshedWorld();
    const g = await grant(db, { scope: "tool", definitionHash: await hash() }, new Date());
    await expect(
      syncServerTools(db, server, [addNote("changed"), tool("list_notes")], {
        ...OPTS,
        alsoWrite: async (tx, changes) => {
          await endGrantsForChanges(tx, changes);
          throw new Error("the outbox could not be written");
        },
      }),
    ).rejects.toThrow("outbox");
    expect((await listed(db, g, new Date()))?.state).toBe("live");
    expect(await auditOf(db, "grant.ended")).toEqual([]);
  });
});

describe("grants whose own limits ran out keep that reason", () => {
  it("an expired grant is not re-ended by a token revocation", async () => {
    const db = await grantWorld();
    const g = await grant(db, { scope: "tool", minutes: 15 }, T0);
    await revokeToken(db, { name: AGENT, actor: "olga" }, at(30));
    expect(await listed(db, g, at(31))).toMatchObject({
      endReason: "expired",
      endedAt: at(15).toISOString(),
    });
    expect(await auditOf(db, "grant.ended")).toEqual([]);
  });
});
