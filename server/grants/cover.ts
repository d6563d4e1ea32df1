import "server-only";
import { and, desc, eq, sql } from "drizzle-orm";
import { alias } from "drizzle-orm/sqlite-core";
import { GRANT_MAX_MINUTES, GRANT_MAX_USES, type GrantScope } from "@/lib/api-types";
import { grantScopeText } from "@/lib/decision-text";
import { GatehouseError } from "@/lib/errors";
import { writeAudit } from "../store/audit";
import { type Db, first, transaction } from "../store/db";
import { prepared } from "../store/prepared";
import { grants, users } from "../store/schema";
import { newGrantId } from "./ids";
import { liveWhere } from "./live";

export type GrantRow = typeof grants.$inferSelect;

/** What a grant must match to cover a call. */
export interface CoverQuery {
  requesterKind: "agent" | "user";
  requesterName: string;
  tool: string;
  /** The tool's current definition hash: a grant covers only the definition it was made for. */
  definitionHash: string;
  /** `argumentsDigest` of the call's arguments (server/calls/arguments.ts). */
  argumentsDigest: string;
}

export interface NewGrant {
  requesterKind: "agent" | "user";
  requesterName: string;
  tool: string;
  /** The definition hash the approved call was bound to. */
  definitionHash: string;
  scope: GrantScope;
  /** The approved call's arguments digest; kept for `arguments` grants only. */
  argumentsDigest: string;
  /** The approved call. */
  callId: string;
  /** The reviewer who approved (a user name). */
  createdBy: string;
  /** 1 to `GRANT_MAX_MINUTES`. */
  minutes: number;
  /** 1 to `GRANT_MAX_USES` more calls; absent: only time limits it. */
  uses?: number;
}

/** "these exact arguments for 60 min, at most 10 calls, for agent \"build-bot\"" (audit rows, logs). */
export function describeGrant(
  g: Pick<NewGrant, "scope" | "minutes" | "uses" | "requesterKind" | "requesterName">,
) {
  const scope = grantScopeText[g.scope];
  const uses = g.uses === undefined ? "" : `, at most ${g.uses} call${g.uses === 1 ? "" : "s"}`;
  return `${scope} for ${g.minutes} min${uses}, for ${g.requesterKind} "${g.requesterName}"`;
}

/**
 * Inserts a grant and its `grant.created` audit row (actor: the reviewer, subject: the tool, the
 * approved call's id) in one transaction — inside the caller's when given one (the approval's
 * `tx`: a savepoint within it). Starts at `now` (default: the current time) and lasts `minutes`.
 *
 * Throws `bad_request` for minutes or uses out of bounds, and `grant_not_allowed` when
 * `createdBy` is not a user who may approve (a reviewer, or an owner). The grant remembers which
 * of the two roles it was made under (`madeAs`, reviewer first) and stands only while its maker
 * keeps that role (PRODUCT.md §11: it ends "when its reviewer loses the role").
 */
export async function createGrant(db: Db, g: NewGrant, now = new Date()): Promise<GrantRow> {
  if (!Number.isInteger(g.minutes) || g.minutes < 1 || g.minutes > GRANT_MAX_MINUTES) {
    throw new GatehouseError("bad_request", `grant.minutes: between 1 and ${GRANT_MAX_MINUTES}`);
  }
  if (g.uses !== undefined && (!Number.isInteger(g.uses) || g.uses < 1 || g.uses > GRANT_MAX_USES)) {
    throw new GatehouseError("bad_request", `grant.uses: between 1 and ${GRANT_MAX_USES}`);
  }
  return await transaction(db, async (tx) => {
    const maker = await first(
      tx.select({ roles: users.roles }).from(users).where(eq(users.name, g.createdBy)),
    );
    const held = (maker?.roles ?? "").split(",");
    const madeAs = held.includes("reviewer") ? "reviewer" : held.includes("owner") ? "owner" : null;
    if (!madeAs) {
      throw new GatehouseError(
        "grant_not_allowed",
        `only a reviewer or an owner can grant: ${g.createdBy} holds neither role`,
      );
    }
    const [row] = await tx
      .insert(grants)
      .values({
        id: newGrantId(),
        requesterKind: g.requesterKind,
        requesterName: g.requesterName,
        tool: g.tool,
        definitionHash: g.definitionHash,
        scope: g.scope,
        argumentsDigest: g.scope === "arguments" ? g.argumentsDigest : null,
        callId: g.callId,
        createdBy: g.createdBy,
        madeAs,
        createdAt: now.toISOString(),
        expiresAt: new Date(now.getTime() + g.minutes * 60_000).toISOString(),
        usesAllowed: g.uses ?? null,
      })
      .returning();
    if (!row) throw new Error("the grant's insert returned no row");
    await writeAudit(tx, {
      actor: g.createdBy,
      action: "grant.created",
      subject: g.tool,
      callId: g.callId,
      detail: `${describeGrant(g)} (grant ${row.id})`,
    });
    return row;
  });
}

/** Placeholders of the prepared cover statements. */
const p = {
  now: sql.placeholder("now"),
  kind: sql.placeholder("kind"),
  name: sql.placeholder("name"),
  tool: sql.placeholder("tool"),
  hash: sql.placeholder("hash"),
  digest: sql.placeholder("digest"),
};

function params(q: CoverQuery, now: Date) {
  return {
    now: now.toISOString(),
    kind: q.requesterKind,
    name: q.requesterName,
    tool: q.tool,
    hash: q.definitionHash,
    digest: q.argumentsDigest,
  };
}

/** An alias for the inner select of `takeGrant`, so its columns never mean the updated row's. */
const candidate = alias(grants, "candidate");

/** The grants of `t` matching a cover query: same requester, tool and definition; its arguments or any. */
function matches(t: typeof grants | typeof candidate) {
  return and(
    eq(t.tool, p.tool),
    eq(t.requesterName, p.name),
    eq(t.requesterKind, p.kind),
    eq(t.definitionHash, p.hash),
    sql`(${t.scope} = 'tool' OR ${t.argumentsDigest} = ${p.digest})`,
  );
}

/** Which of several covering grants is used: an `arguments` one first, then the one expiring last. */
function preference(t: typeof grants | typeof candidate) {
  return [sql`(${t.scope} = 'arguments') DESC`, desc(t.expiresAt), desc(t.createdAt)];
}

/**
 * The live grant that would cover such a call, without using it (dry runs, and the decision
 * before the call is stored); prefers an `arguments` grant, then the one expiring last. Null:
 * none covers it.
 */
export async function findCoveringGrant(db: Db, q: CoverQuery, now = new Date()): Promise<GrantRow | null> {
  const query = prepared(db, "grants.findCovering", () =>
    db
      .select()
      .from(grants)
      .where(and(matches(grants), liveWhere(grants, p.now)))
      .orderBy(...preference(grants))
      .limit(1)
      .prepare(),
  );
  return (await query.execute(params(q, now)))[0] ?? null;
}

/**
 * Takes one use of the live grant that covers such a call, in ONE conditional statement: the
 * covering grant is chosen and its `uses` raised (and `lastUsedAt` set) by the same UPDATE,
 * which checks again that it is live; `.returning()` says whether it took the use (a row: the
 * grant after the use) or not (none: no live grant covered the call when the row was written).
 * Call it inside the transaction that stores the call row, so a call that is not stored spends
 * no use. Returns the grant after the use, or null when none covers the call.
 *
 * Exactly once, so N covered calls against k uses left succeed exactly k times, whatever
 * connections they come from:
 * - SQLite: a statement is atomic and one writer runs at a time.
 * - PostgreSQL: the UPDATE locks the chosen row before it writes, and under READ COMMITTED
 *   re-checks its WHERE (`id = chosen AND live`, so `uses < usesAllowed`) against the row's
 *   newest committed version once a concurrent writer of that row has committed: a use taken
 *   meanwhile is seen, the last use goes to one statement only, and the others return no row
 *   (the choice itself is not made again: such a call waits for review even when another grant
 *   would have covered it). Inside `transaction()` (the call's birth is written in one) the
 *   transaction is SERIALIZABLE: a concurrent use of the same row rolls it back with a
 *   serialization failure, and it is run again from the start, choosing afresh.
 */
export async function takeGrant(db: Db, q: CoverQuery, now = new Date()): Promise<GrantRow | null> {
  const statement = prepared(db, "grants.take", () => {
    const chosen = db
      .select({ id: candidate.id })
      .from(candidate)
      .where(and(matches(candidate), liveWhere(candidate, p.now)))
      .orderBy(...preference(candidate))
      .limit(1);
    return db
      .update(grants)
      .set({ uses: sql`${grants.uses} + 1`, lastUsedAt: sql`${p.now}` })
      .where(and(sql`${grants.id} = (${chosen})`, liveWhere(grants, p.now)))
      .returning()
      .prepare();
  });
  const [used] = await statement.execute(params(q, now));
  return used ?? null;
}
