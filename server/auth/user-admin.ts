import "server-only";
import { and, eq, gte, lt, ne } from "drizzle-orm";
import type { Role, UserView } from "@/lib/api-types";
import { GatehouseError } from "@/lib/errors";
import { endGrants } from "../grants";
import { writeAudit } from "../store/audit";
import { type Db, first, transaction } from "../store/db";
import { notificationDeliveries, notificationDigests, sessions, users } from "../store/schema";
import type { LoginThrottle } from "./access";
import { hashPassword, sha256 } from "./crypto";
import { parseRoles, passwordHashOf, toUserView, updateUser, verifyCredentials } from "./users";

/** What of the sign-in throttle these functions use: forgetting a name's failed sign-ins. */
export type NameThrottle = Pick<LoginThrottle, "forget">;

async function findUser(tx: Db, name: string): Promise<typeof users.$inferSelect> {
  const row = await first(tx.select().from(users).where(eq(users.name, name)));
  if (!row) throw new GatehouseError("not_found", `no user named "${name}"`);
  return row;
}

/** "1 session", "2 sessions": how audit details and answers count sessions. */
export function sessionsText(n: number, other = false): string {
  return `${n} ${other ? "other " : ""}session${n === 1 ? "" : "s"}`;
}

/**
 * Deletes a person's sessions (all, or all but the one whose cookie value is `keep`) and says
 * how many. Rows, not flags: a deleted session's cookie finds nothing on its next request.
 */
async function deleteSessions(tx: Db, userId: number, keep?: string): Promise<number> {
  const deleted = await tx
    .delete(sessions)
    .where(
      and(eq(sessions.userId, userId), keep === undefined ? undefined : ne(sessions.idHash, sha256(keep))),
    )
    .returning({ idHash: sessions.idHash });
  return deleted.length;
}

/**
 * Refuses (`conflict`) to take `name` out of the owners when nobody else holds the role, with the
 * same words as a role change: without an owner nobody could manage the instance any more.
 */
async function keepAnOwner(tx: Db, name: string): Promise<void> {
  const others = (
    await tx.select({ name: users.name, roles: users.roles }).from(users).where(ne(users.name, name))
  ).some((u) => parseRoles(u.roles).includes("owner"));
  if (!others) {
    throw new GatehouseError("conflict", `${name} is the last owner: give someone else the owner role first`);
  }
}

export interface EndSessionsParams {
  name: string;
  /** Who did it, for the audit log ("cli" or a user name). */
  actor: string;
}

/**
 * "Sign them out everywhere": deletes every session of the person, with a `user.sessions_ended`
 * audit row ("2 sessions ended") in the same transaction, whether or not any was open — the
 * owner's action is on record either way. Nothing else of the person changes. Returns how many
 * ended. `not_found` for an unknown name.
 */
export async function endUserSessions(db: Db, params: EndSessionsParams): Promise<number> {
  return transaction(db, async (tx) => {
    const row = await findUser(tx, params.name);
    const ended = await deleteSessions(tx, row.id);
    await writeAudit(tx, {
      actor: params.actor,
      action: "user.sessions_ended",
      subject: row.name,
      detail: `${sessionsText(ended)} ended`,
    });
    return ended;
  });
}

export interface UpdatePersonParams {
  name: string;
  /** A new address ("" or null clears it); absent: unchanged. */
  email?: string | null;
  /** New roles; absent: unchanged. */
  roles?: Role[];
  /** A new password set by an owner (a reset); absent: unchanged. Must already be valid. */
  password?: string;
  actor: string;
}

/**
 * `PATCH /api/users/:name` and `gatehouse user set`: the address and roles as `updateUser` sets
 * them, and a password reset, all in one transaction (a refused role change resets nothing).
 * A reset stores the new hash, ends every session of the person (an attacker who had one is
 * out; so is the person, who signs in again with the new password), writes a `user.password`
 * audit row ("reset; 2 sessions ended", never the password) and, once committed, forgets the
 * name's failed sign-ins in `throttle` (so a person locked out by guessing can sign in at once,
 * on every replica: the counts are in the store; `null`: forget nothing).
 *
 * `not_found` for an unknown name; `bad_request` for a bad address or no roles; `conflict` for
 * taking the owner role from the last owner; `forbidden` for a reset of the actor's own password
 * (a stolen cookie would lock the person out: {@link changeOwnPassword} asks for the current one).
 */
export async function updatePerson(
  db: Db,
  throttle: NameThrottle | null,
  params: UpdatePersonParams,
): Promise<{ user: UserView; sessionsEnded: number }> {
  // A session cookie alone must not set its own person's password: that asks for the current one.
  if (params.password !== undefined && params.name === params.actor) {
    throw new GatehouseError(
      "forbidden",
      "To change your own password, give the current one (Settings, Change your password).",
    );
  }
  // Hashed before the write lock is taken: scrypt takes a while and needs no lock.
  const passwordHash = params.password === undefined ? null : await hashPassword(params.password);
  const out = await transaction(db, async (tx) => {
    const { name, actor } = params;
    const user = await updateUser(tx, { name, actor, email: params.email, roles: params.roles });
    if (passwordHash === null) return { user, sessionsEnded: 0 };
    await tx.update(users).set({ passwordHash }).where(eq(users.id, user.id));
    const sessionsEnded = await deleteSessions(tx, user.id);
    await writeAudit(tx, {
      actor,
      action: "user.password",
      subject: name,
      detail: `reset; ${sessionsText(sessionsEnded)} ended`,
    });
    return { user, sessionsEnded };
  });
  if (passwordHash !== null) await throttle?.forget(params.name);
  return out;
}

export interface ChangeOwnPasswordParams {
  /** The signed-in person. */
  name: string;
  current: string;
  /** The new password; must already be valid. */
  password: string;
  /** The cookie value of the session asking: it stays signed in. */
  keepSession: string | null;
  /** The client's address for the throttle (null: counted by name only). */
  address: string | null;
}

/**
 * A person changes their own password. The current one is checked like a sign-in, attempt
 * counted in `throttle` first (a stolen session cookie must not become a way to guess the
 * password faster than the sign-in page allows): a wrong one is `invalid_credentials` and
 * changes nothing; a throttled one throws `TooManyAttempts`. Then, in one transaction, the new
 * hash, every OTHER session of theirs ended, and a `user.password` audit row ("changed; 1 other
 * session ended"). `bad_request` when the new password is the current one; `unauthenticated`
 * when the password was reset (or the person removed) while it was checked. `verify` is the
 * check (default `verifyCredentials`; tests use it to act meanwhile).
 */
export async function changeOwnPassword(
  db: Db,
  throttle: LoginThrottle,
  params: ChangeOwnPasswordParams,
  verify: typeof verifyCredentials = verifyCredentials,
): Promise<{ user: UserView; sessionsEnded: number }> {
  const attempt = await throttle.begin({ name: params.name, address: params.address });
  let checked: string | null = null;
  let user: UserView | null = null;
  try {
    // Inside the try: a store that fails to answer settles the attempt as failed too.
    checked = await passwordHashOf(db, params.name);
    user = await verify(db, params.name, params.current);
  } finally {
    if (user) await attempt.succeeded();
    else await attempt.failed();
  }
  if (!user) throw new GatehouseError("invalid_credentials", "The current password is not right.");
  if (params.current === params.password) {
    throw new GatehouseError("bad_request", "The new password is the same as the current one.");
  }
  const passwordHash = await hashPassword(params.password);
  const id = user.id;
  return transaction(db, async (tx) => {
    // Only over the password that was checked: an owner's reset (or a removal) while the hashes
    // were computed wins, and a session opened with the old password cannot undo it.
    const row =
      checked === null
        ? undefined
        : await first(
            tx
              .update(users)
              .set({ passwordHash })
              .where(and(eq(users.id, id), eq(users.passwordHash, checked)))
              .returning(),
          );
    if (!row)
      throw new GatehouseError(
        "unauthenticated",
        "Your password was changed or reset meanwhile; sign in again.",
      );
    const sessionsEnded = await deleteSessions(tx, id, params.keepSession ?? undefined);
    await writeAudit(tx, {
      actor: row.name,
      action: "user.password",
      subject: row.name,
      detail: `changed; ${sessionsText(sessionsEnded, true)} ended`,
    });
    return { user: toUserView(row), sessionsEnded };
  });
}

export interface RemoveUserParams {
  name: string;
  /** Who did it, for the audit log ("cli" or a user name). */
  actor: string;
  /**
   * Withdraws the person's pending calls inside this transaction, on the `tx` it is given, and
   * says how many (the calls room does it: server/auth does not import it). Called with the
   * reason to record. On PostgreSQL the removal's transaction may run more than once: only store
   * statements here (publish on a bus after `removeUser` resolves).
   */
  withdrawPending: (tx: Db, requester: { kind: "user"; name: string }, why: string) => Promise<number>;
}

/**
 * What a caller hands the calls room's `transition()` to withdraw a removed person's pending
 * calls (`pending → withdrawn`, each with its `call.withdrawn` audit row saying why), so the API
 * and the CLI record the same words. Shaped like its `TransitionSpec`, which server/auth cannot
 * import.
 */
export function pendingWithdrawal(requester: { kind: "user"; name: string }, why: string, actor: string) {
  return {
    from: "pending" as const,
    to: "withdrawn" as const,
    requester,
    set: {
      finishedAt: new Date().toISOString(),
      errorCode: "withdrawn",
      errorMessage: "the requester was removed before anyone decided",
    },
    actor,
    audit: (call: { createdAt: string }) => ({
      detail: why,
      durationMs: Math.max(0, Date.now() - Date.parse(call.createdAt)),
    }),
  };
}

/** What a removal ended, for the answer and the CLI's line. */
export interface RemovedUser {
  user: UserView;
  sessionsEnded: number;
  grantsEnded: number;
  callsWithdrawn: number;
}

/**
 * Removes a person, in one transaction (on SQLite under one write lock, on PostgreSQL
 * SERIALIZABLE, so a concurrent CLI cannot slip in between the last-owner check and the
 * delete): every grant they made and every grant made for
 * their own calls ends ("<name> was removed", a `grant.ended` row each — eagerly, so a later user
 * given the same name cannot bring them back), their pending calls are withdrawn
 * (`withdrawPending`), mail still queued to their address is given up ("the recipient was
 * removed"), their sessions and change-feed marks go, then their row, with a `user.remove`
 * audit row ("owner,reviewer; 1 session ended, 2 grants ended, 0 calls withdrawn").
 *
 * History keeps the name: audit rows, calls (requester, decider, approvers), grants and the
 * delivery log store names as text, so they read as before. Agent tokens they created stay: they
 * belong to the agents using them, and an owner revokes them if they should go.
 *
 * `not_found` for an unknown name; `conflict` for the last owner (themselves included).
 */
export async function removeUser(db: Db, params: RemoveUserParams, now = new Date()): Promise<RemovedUser> {
  const { name, actor } = params;
  return transaction(db, async (tx) => {
    const row = await findUser(tx, name);
    const held = parseRoles(row.roles);
    if (held.includes("owner")) await keepAnOwner(tx, name);
    const why = `${name} was removed`;
    // Each nested in this transaction (a savepoint).
    let grantsEnded = await endGrants(tx, { requester: { kind: "user", name } }, why, actor, now);
    for (const madeAs of ["reviewer", "owner"] as const) {
      grantsEnded += await endGrants(tx, { createdBy: name, madeAs }, why, actor, now);
    }
    const callsWithdrawn = await params.withdrawPending(tx, { kind: "user", name }, why);
    await tx
      .update(notificationDeliveries)
      .set({ status: "failed", lastError: "the recipient was removed", finishedAt: now.toISOString() })
      .where(
        and(
          eq(notificationDeliveries.channel, "email"),
          eq(notificationDeliveries.target, name),
          eq(notificationDeliveries.status, "queued"),
        ),
      );
    // Their digest state goes too, so a later user of the name is mailed afresh: its keys are
    // "<name>\n<requester>", from "<name>\n" up to (not including) "<name>\v" in byte order.
    await tx
      .delete(notificationDigests)
      .where(and(gte(notificationDigests.key, `${name}\n`), lt(notificationDigests.key, `${name}\v`)));
    const sessionsEnded = await deleteSessions(tx, row.id);
    // change_reads go with the row (ON DELETE CASCADE).
    await tx.delete(users).where(eq(users.id, row.id));
    const grantsText = `${grantsEnded} grant${grantsEnded === 1 ? "" : "s"} ended`;
    const callsText = `${callsWithdrawn} call${callsWithdrawn === 1 ? "" : "s"} withdrawn`;
    await writeAudit(tx, {
      actor,
      action: "user.remove",
      subject: name,
      detail: `${held.join(",")}; ${sessionsText(sessionsEnded)} ended, ${grantsText}, ${callsText}`,
    });
    return { user: toUserView(row), sessionsEnded, grantsEnded, callsWithdrawn };
  });
}
