/**
 * How grants end (PRODUCT.md §11), over a real in-memory store: revoked by anyone, eagerly with
 * their cause (the real `revokeToken`, the real `setUserRoles`, a real catalogue refresh) in the
 * cause's own transaction, and lazily when an ending was missed.
 */
import { eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { GatehouseError } from "@/lib/errors";
import { memoryDb, OPTS, serverConfig, tool } from "@/test/support/catalogue";
import { revokeToken } from "../auth/tokens";
import { setUserRoles } from "../auth/users";
import { syncServerTools } from "../catalogue/sync";
import type { Db } from "../store/db";
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

function codeOf(f: () => unknown): string {
  try {
    f();
  } catch (err) {
    return err instanceof GatehouseError ? err.code : String(err);
  }
  return "no error";
}

function listed(db: Db, g: GrantRow, now: Date) {
  return listGrants(db, { now }).find((v) => v.id === g.id);
}

/** Makes the next audit row with `action` fail, so the write that adds it fails after its other writes. */
function failAuditOf(db: Db, action: string): void {
  db.$client.exec(
    `CREATE TEMP TRIGGER fail_audit BEFORE INSERT ON audit_events WHEN NEW.action = '${action}'
     BEGIN SELECT RAISE(ABORT, 'the audit row could not be written'); END`,
  );
}

describe("revokeGrant", () => {
  it("ends a grant for good: not covered, listed as revoked by whom, with one audit row", async () => {
    const db = grantWorld();
    addUser(db, "bob", ["reviewer"]);
    const g = grant(db, { scope: "tool" });
    const view = revokeGrant(db, g.id, "bob", at(5));
    expect(view).toMatchObject({ state: "ended", endReason: "revoked by bob", endedAt: at(5).toISOString() });
    expect(findCoveringGrant(db, call(), at(6))).toBeNull();
    expect(takeGrant(db, call(), at(6))).toBeNull();
    expect(listed(db, g, at(6))).toMatchObject({ state: "ended", endReason: "revoked by bob" });
    expect(auditOf(db, "grant.revoked")).toEqual([
      {
        actor: "bob",
        subject: g.tool,
        callId: g.callId,
        detail: `grant ${g.id} for agent "build-bot": revoked by bob`,
      },
    ]);
  });

  it("revoking an ended grant again changes nothing and writes no second row", async () => {
    const db = grantWorld();
    const g = grant(db, { scope: "tool", minutes: 15 });
    const first = revokeGrant(db, g.id, "alice", at(5));
    expect(revokeGrant(db, g.id, "olga", at(6))).toEqual(first);
    expect(auditOf(db, "grant.revoked")).toHaveLength(1);
    // An expired one keeps its reason too.
    const old = grant(db, { scope: "tool", minutes: 15 });
    expect(revokeGrant(db, old.id, "alice", at(20))).toMatchObject({ state: "ended", endReason: "expired" });
    expect(auditOf(db, "grant.revoked")).toHaveLength(1);
  });

  it("revoking a grant that only looked ended (its tool's definition differs) keeps it ended if the definition comes back", async () => {
    const db = grantWorld();
    const g = grant(db, { scope: "tool" });
    db.update(tools)
      .set({ definitionHash: "b".repeat(64) })
      .where(eq(tools.localName, g.tool))
      .run();
    expect(revokeGrant(db, g.id, "alice", at(1))).toMatchObject({ state: "ended" });
    expect(auditOf(db, "grant.ended").map((r) => r.detail)).toEqual([
      `grant ${g.id} for agent "build-bot": the tool's definition changed (made final by alice)`,
    ]);
    // The server goes back to the definition the grant was pinned to.
    db.update(tools).set({ definitionHash: g.definitionHash }).where(eq(tools.localName, g.tool)).run();
    expect(takeGrant(db, call(), at(2))).toBeNull();
    expect(db.select().from(grants).where(eq(grants.id, g.id)).get()?.endedAt).not.toBeNull();
  });

  it("an unknown id is grant_not_found", async () => {
    const db = grantWorld();
    expect(codeOf(() => revokeGrant(db, "g_nope", "alice"))).toBe("grant_not_found");
  });
});

describe("revoking the agent's token ends its grants", () => {
  it("in the revocation's transaction: not covered, listed with the reason, one grant.ended row each", async () => {
    const db = grantWorld();
    const a = grant(db, { scope: "tool" });
    const b = grant(db, { scope: "arguments" });
    const other = grant(db, { requesterName: "other-bot", scope: "tool" });
    revokeToken(db, { name: AGENT, actor: "olga" }, at(10));
    expect(findCoveringGrant(db, call(), at(11))).toBeNull();
    for (const g of [a, b]) {
      expect(listed(db, g, at(11))).toMatchObject({
        state: "ended",
        endReason: "the agent's token was revoked",
        endedAt: at(10).toISOString(),
      });
    }
    expect(auditOf(db, "grant.ended").map((r) => [r.actor, r.detail])).toEqual(
      [a, b].map((g) => ["olga", `grant ${g.id} for agent "build-bot": the agent's token was revoked`]),
    );
    expect(db.select().from(grants).where(eq(grants.id, other.id)).get()?.endedAt).toBeNull();
  });

  it("a revocation that fails ends nothing", async () => {
    const db = grantWorld();
    const g = grant(db, { scope: "tool" });
    expect(codeOf(() => revokeToken(db, { name: "no-such-bot", actor: "olga" }))).toBe("not_found");
    // Fails after the grants were ended, at its own audit row: all of it is rolled back.
    failAuditOf(db, "token.revoke");
    expect(() => revokeToken(db, { name: AGENT, actor: "olga" }, at(10))).toThrow("could not be written");
    expect(db.select().from(agentTokens).where(eq(agentTokens.name, AGENT)).get()?.revokedAt).toBeNull();
    expect(takeGrant(db, call(), at(11))?.id).toBe(g.id);
    expect(listed(db, g, at(11))?.state).toBe("live");
    expect(auditOf(db, "grant.ended")).toEqual([]);
  });

  it("a token revoked behind the room's back still covers nothing, and the list says why", async () => {
    const db = grantWorld();
    const g = grant(db, { scope: "tool" });
    db.update(agentTokens)
      .set({ revokedAt: at(7).toISOString() })
      .where(eq(agentTokens.name, AGENT))
      .run();
    expect(takeGrant(db, call(), at(8))).toBeNull();
    expect(listed(db, g, at(8))).toMatchObject({
      state: "ended",
      endReason: "the agent's token was revoked",
      endedAt: at(7).toISOString(),
    });
  });
});

describe("a reviewer losing the role ends their grants", () => {
  it("setUserRoles takes the role: their grants end in the same transaction, others' stay", async () => {
    const db = grantWorld();
    addUser(db, "bob", ["reviewer"]);
    const mine = grant(db, { scope: "tool", createdBy: "alice" });
    const bobs = grant(db, { scope: "arguments", createdBy: "bob" });
    setUserRoles(db, { name: "alice", roles: ["owner"], actor: "olga" }, at(1));
    expect(listed(db, mine, at(1))).toMatchObject({
      state: "ended",
      endReason: "alice no longer has the reviewer role",
      endedAt: at(1).toISOString(),
    });
    expect(auditOf(db, "grant.ended").map((r) => [r.actor, r.detail])).toEqual([
      ["olga", `grant ${mine.id} for agent "build-bot": alice no longer has the reviewer role`],
    ]);
    expect(auditOf(db, "user.roles")).toEqual([
      { actor: "olga", subject: "alice", callId: null, detail: "reviewer → owner" },
    ]);
    // bob's exact-arguments grant still covers; alice's any-arguments one does not.
    expect(takeGrant(db, call(), at(1))?.id).toBe(bobs.id);
    expect(listed(db, bobs, at(1))?.state).toBe("live");
    // Giving the role back does not bring an ended grant back.
    setUserRoles(db, { name: "alice", roles: ["reviewer"], actor: "olga" }, at(2));
    expect(listed(db, mine, at(2))?.state).toBe("ended");
  });

  it("a role change that fails ends nothing", async () => {
    const db = grantWorld();
    const g = grant(db, { scope: "tool" });
    failAuditOf(db, "user.roles");
    expect(() => setUserRoles(db, { name: "alice", roles: ["owner"], actor: "olga" }, at(1))).toThrow(
      "could not be written",
    );
    expect(db.select().from(users).where(eq(users.name, "alice")).get()?.roles).toBe("reviewer");
    expect(takeGrant(db, call(), at(1))?.id).toBe(g.id);
    expect(auditOf(db, "grant.ended")).toEqual([]);
  });

  it("a role taken behind the room's back: covers nothing, listed with the reason", async () => {
    const db = grantWorld();
    const g = grant(db, { scope: "tool" });
    db.update(users).set({ roles: "owner" }).where(eq(users.name, "alice")).run();
    expect(findCoveringGrant(db, call(), at(1))).toBeNull();
    expect(takeGrant(db, call(), at(1))).toBeNull();
    expect(listed(db, g, at(1))).toMatchObject({
      state: "ended",
      endReason: "alice no longer has the reviewer role",
    });
  });

  it("an owner without the reviewer role grants as owner; losing the owner role ends it", async () => {
    const db = grantWorld();
    addUser(db, "otto", ["owner"]);
    const g = grant(db, { scope: "tool", createdBy: "olga" });
    expect(g.madeAs).toBe("owner");
    expect(takeGrant(db, call(), at(1))?.id).toBe(g.id);
    // otto stays owner, so olga may stop being one.
    setUserRoles(db, { name: "olga", roles: ["reviewer"], actor: "otto" }, at(2));
    expect(listed(db, g, at(2))).toMatchObject({
      state: "ended",
      endReason: "olga no longer has the owner role",
    });
    expect(takeGrant(db, call(), at(2))).toBeNull();
  });

  it("a reviewer who is also an owner grants as reviewer: losing the owner role ends nothing", async () => {
    const db = grantWorld();
    addUser(db, "rose", ["owner", "reviewer"]);
    const g = grant(db, { scope: "tool", createdBy: "rose" });
    expect(g.madeAs).toBe("reviewer");
    setUserRoles(db, { name: "rose", roles: ["reviewer"], actor: "olga" }, at(1));
    expect(takeGrant(db, call(), at(1))?.id).toBe(g.id);
  });

  it("keeping the reviewer role (owner added) ends nothing; the same roles again write nothing", async () => {
    const db = grantWorld();
    const g = grant(db, { scope: "tool" });
    setUserRoles(db, { name: "alice", roles: ["reviewer", "owner"], actor: "olga" }, at(1));
    setUserRoles(db, { name: "alice", roles: ["owner", "reviewer", "owner"], actor: "olga" }, at(1));
    expect(auditOf(db, "user.roles").map((r) => r.detail)).toEqual(["reviewer → owner,reviewer"]);
    expect(takeGrant(db, call(), at(1))?.id).toBe(g.id);
  });
});

describe("setUserRoles", () => {
  it("refuses to take the owner role from the last owner, and allows it once there is another", async () => {
    const db = grantWorld();
    const err = (() => {
      try {
        setUserRoles(db, { name: "olga", roles: ["reviewer"], actor: "olga" });
      } catch (e) {
        return e as GatehouseError;
      }
    })();
    expect(err?.code).toBe("conflict");
    expect(err?.status).toBe(409);
    expect(err?.message).toBe("olga is the last owner: give someone else the owner role first");
    expect(db.select().from(users).where(eq(users.name, "olga")).get()?.roles).toBe("owner");
    expect(auditOf(db, "user.roles")).toEqual([]);

    setUserRoles(db, { name: "alice", roles: ["owner", "reviewer"], actor: "olga" });
    expect(setUserRoles(db, { name: "olga", roles: ["reviewer"], actor: "olga" }).roles).toEqual([
      "reviewer",
    ]);
    expect(auditOf(db, "user.roles").map((r) => r.detail)).toEqual([
      "reviewer → owner,reviewer",
      "owner → reviewer",
    ]);
  });

  it("an unknown person is not_found; no roles at all is bad_request", async () => {
    const db = grantWorld();
    expect(codeOf(() => setUserRoles(db, { name: "nobody", roles: ["reviewer"], actor: "olga" }))).toBe(
      "not_found",
    );
    expect(codeOf(() => setUserRoles(db, { name: "alice", roles: [], actor: "olga" }))).toBe("bad_request");
  });
});

describe("a catalogue refresh ends the grants it makes void", () => {
  const server = serverConfig("notes");
  const addNote = (description: string) => tool("add_note", { description });

  function refreshedWorld() {
    const db = memoryDb();
    addUser(db, "alice", ["reviewer"]);
    addToken(db, AGENT);
    const refresh = (listing: ReturnType<typeof tool>[]) =>
      syncServerTools(db, server, listing, {
        ...OPTS,
        alsoWrite: (changes) => endGrantsForChanges(db, changes),
      });
    refresh([addNote("adds a note"), tool("list_notes")]);
    const hash = () =>
      db.select().from(tools).where(eq(tools.localName, "notes_add_note")).get()?.definitionHash ?? "";
    return { db, refresh, hash };
  }

  it("a changed definition ends grants pinned to the old one, in the refresh's transaction", async () => {
    const { db, refresh, hash } = refreshedWorld();
    const before = hash();
    const old = grant(db, { scope: "tool", definitionHash: before }, new Date());
    const summary = refresh([addNote("adds a note, and deletes the others"), tool("list_notes")]);
    const changed = summary.changes.find((c) => c.kind === "changed");
    expect(changed?.localName).toBe("notes_add_note");
    expect(hash()).not.toBe(before);
    expect(listed(db, old, new Date())).toMatchObject({
      state: "ended",
      endReason: "the tool's definition changed",
      endedAt: changed?.at,
    });
    expect(auditOf(db, "grant.ended").map((r) => [r.actor, r.detail])).toEqual([
      ["server:notes", `grant ${old.id} for agent "build-bot": the tool's definition changed`],
    ]);

    // A grant made for the new definition survives refreshes that change other tools.
    const fresh = grant(db, { scope: "tool", definitionHash: hash() }, new Date());
    refresh([addNote("adds a note, and deletes the others"), tool("list_notes", { description: "new" })]);
    expect(listed(db, fresh, new Date())?.state).toBe("live");
  });

  it("a row moved to the hash of its cleaned definition keeps its grants live, bound to the new hash", async () => {
    const { db, refresh, hash } = refreshedWorld();
    // What an earlier version would have stored: the same content, hashed before cleaning.
    const cleaned = hash();
    const raw = "r".repeat(64);
    db.update(tools)
      .set({ definitionHash: raw, pinnedHash: raw, status: "enabled" })
      .where(eq(tools.localName, "notes_add_note"))
      .run();
    const g = grant(db, { scope: "tool", definitionHash: raw }, new Date());
    const row = db.select().from(tools).where(eq(tools.localName, "notes_add_note")).get();
    expect(row?.definitionHash).toBe(raw);
    refresh([addNote("adds a note"), tool("list_notes")]);
    expect(hash()).toBe(cleaned);
    expect(listed(db, g, new Date())?.state).toBe("live");
    expect(db.select().from(grants).where(eq(grants.id, g.id)).get()?.definitionHash).toBe(cleaned);
  });

  it("a tool that is gone ends its grants", async () => {
    const { db, refresh, hash } = refreshedWorld();
    const g = grant(db, { scope: "tool", definitionHash: hash() }, new Date());
    refresh([tool("list_notes")]);
    expect(listed(db, g, new Date())).toMatchObject({ state: "ended", endReason: "the tool is gone" });
    expect(auditOf(db, "grant.ended")).toHaveLength(1);
  });

  it("a refresh that fails after the feed is written ends nothing", async () => {
    const { db, hash } = refreshedWorld();
    const g = grant(db, { scope: "tool", definitionHash: hash() }, new Date());
    expect(() =>
      syncServerTools(db, server, [addNote("changed"), tool("list_notes")], {
        ...OPTS,
        alsoWrite: (changes) => {
          endGrantsForChanges(db, changes);
          throw new Error("the outbox could not be written");
        },
      }),
    ).toThrow("outbox");
    expect(listed(db, g, new Date())?.state).toBe("live");
    expect(auditOf(db, "grant.ended")).toEqual([]);
  });
});

describe("grants whose own limits ran out keep that reason", () => {
  it("an expired grant is not re-ended by a token revocation", async () => {
    const db = grantWorld();
    const g = grant(db, { scope: "tool", minutes: 15 }, T0);
    revokeToken(db, { name: AGENT, actor: "olga" }, at(30));
    expect(listed(db, g, at(31))).toMatchObject({ endReason: "expired", endedAt: at(15).toISOString() });
    expect(auditOf(db, "grant.ended")).toEqual([]);
  });
});
