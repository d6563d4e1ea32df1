import "server-only";
import { and, count, eq, sql } from "drizzle-orm";
import type { Db } from "../store/db";
import { calls, type notificationDeliveries, notificationDigests } from "../store/schema";

type DeliveryRow = typeof notificationDeliveries.$inferSelect;

/**
 * Pending-call email under a flood: while more than {@link DIGEST_AFTER} calls of one requester
 * wait, a reviewer gets one digest about that requester ("12 calls from billing-bot wait")
 * instead of a mail per call, and at most one every {@link DIGEST_EVERY_MS}. The digest's count
 * is read when it is sent, so one digest covers every call that arrived while it was queued.
 *
 * State per reviewer and requester lives in `notification_digests`: whether a digest is queued
 * and when the next may go. Queueing one is a single conditional upsert (`takeDigest`), so of
 * several replicas (or calls) that want one at once, exactly one queues it.
 */

/** Waiting calls of one requester past which its `call.pending` mail is digested. */
export const DIGEST_AFTER = 5;
/** The least time between two digests to one reviewer about one requester. */
export const DIGEST_EVERY_MS = 15 * 60_000;

/** The requester as the outbox keys it: `agent:<name>` or `user:<name>`. */
export function requesterKey(requester: { kind: string; name: string }): string {
  return `${requester.kind}:${requester.name}`;
}

/** What a digest row's `payload` holds; `waiting` is filled in at send time. */
export interface DigestPayload {
  event: "call.pending";
  at: string;
  digest: { requester: { kind: "agent" | "user"; name: string }; waiting: number };
  /** The reviewer's address, as it was when queued. */
  to: string;
}

export function isDigest(payload: object): payload is DigestPayload {
  return "digest" in payload;
}

/** Whether an outbox row is a digest: pending-call email about no one call. */
export function isDigestRow(row: Pick<DeliveryRow, "channel" | "event" | "callId">): boolean {
  return row.channel === "email" && row.event === "call.pending" && row.callId === null;
}

/** Calls of `requester` waiting for a reviewer now (in the caller's transaction, when given one). */
export async function waitingOf(db: Db, requester: { kind: string; name: string }): Promise<number> {
  const [row] = await db
    .select({ n: count() })
    .from(calls)
    .where(
      and(
        eq(calls.requesterName, requester.name),
        eq(calls.requesterKind, requester.kind),
        eq(calls.status, "pending"),
      ),
    );
  return row?.n ?? 0;
}

/**
 * A line break parts the two: no user name holds one (nor could a NUL: PostgreSQL text refuses
 * it). Removing a person deletes their rows by this form (auth/user-admin.ts).
 */
function stateKey(reviewer: string, requester: string): string {
  return `${reviewer}\n${requester}`;
}

/**
 * Marks a digest to `reviewer` about `requester` as queued, in ONE conditional upsert: it
 * inserts the state row, or flips `queued` from 0 to 1; a digest already queued changes nothing.
 * Returns when the new digest is due (not before the last one's `notBefore`), or null when one is
 * already queued and covers this call too.
 */
export async function takeDigest(
  db: Db,
  reviewer: string,
  requester: string,
  now: string,
): Promise<string | null> {
  const d = notificationDigests;
  const taken = await db
    .insert(d)
    .values({ key: stateKey(reviewer, requester), queued: 1, notBefore: now })
    .onConflictDoUpdate({ target: d.key, set: { queued: 1 }, where: sql`${d.queued} = 0` })
    .returning({ notBefore: d.notBefore });
  const notBefore = taken[0]?.notBefore;
  if (notBefore === undefined) return null;
  return notBefore > now ? notBefore : now;
}

/**
 * A digest row's try ended (delivered or given up): the next digest for its key may be queued,
 * and, when this one was delivered, not sent before {@link DIGEST_EVERY_MS} from now.
 */
export async function digestFinished(db: Db, row: DeliveryRow, delivered: boolean): Promise<void> {
  if (row.requester === null) return;
  const set = delivered
    ? { queued: 0, notBefore: new Date(Date.now() + DIGEST_EVERY_MS).toISOString() }
    : { queued: 0 };
  await db
    .update(notificationDigests)
    .set(set)
    .where(eq(notificationDigests.key, stateKey(row.target, row.requester)));
}

/**
 * The digest row as it is to be sent: its payload with the requester's calls waiting now
 * counted, and that count (0: nothing is left to ask for).
 */
export async function digestNow(db: Db, row: DeliveryRow): Promise<{ row: DeliveryRow; waiting: number }> {
  const payload = JSON.parse(row.payload) as DigestPayload;
  const waiting = await waitingOf(db, payload.digest.requester);
  const now: DigestPayload = { ...payload, digest: { ...payload.digest, waiting } };
  return { row: { ...row, payload: JSON.stringify(now) }, waiting };
}
