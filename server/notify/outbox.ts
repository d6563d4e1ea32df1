import "server-only";
import { randomUUID } from "node:crypto";
import { and, asc, desc, eq, isNull, lt, lte, ne, notInArray, or, sql } from "drizzle-orm";
import type { ChangeView } from "@/lib/api-types";
import type { DeliveryView } from "@/lib/notification-types";
import { reviewerEmails } from "../auth/users";
import type { NotificationEvent, NotificationsConfig } from "../config";
import { parseApprovedBy } from "../store/approved-by";
import { type Db, first } from "../store/db";
import { type calls, calls as callsTable, notificationDeliveries } from "../store/schema";
import {
  DIGEST_AFTER,
  type DigestPayload,
  isDigestRow,
  requesterKey,
  takeDigest,
  waitingOf,
} from "./digests";

/**
 * The notification outbox (db first): what is queued when something happens, and the queries
 * the dispatcher and the delivery log run over it. Enqueueing is a plain insert made on the
 * caller's transaction (`tx`), so a call and the messages about it are committed together or
 * not at all, and nothing here ever waits on the network. A try is taken with a conditional
 * update (`claimDelivery`, claims.ts), so of several processes sending from one store, one sends it.
 */

export type CallNotificationEvent = Exclude<NotificationEvent, "catalogue.changed">;
export type DeliveryRow = typeof notificationDeliveries.$inferSelect;
type CallRow = typeof calls.$inferSelect;

/** A catalogue change as the refresh recorded it. */
export type CatalogueChange = Omit<ChangeView, "unread">;

/** A call as messages tell of it: the facts of the moment, no argument values unless asked for. */
export interface CallFacts {
  id: string;
  tool: string;
  server: string;
  requester: { kind: "agent" | "user"; name: string };
  status: string;
  approvalReason: string | null;
  argumentsDigest: string;
  expiresAt: string | null;
  /** Distinct reviewers the call needs (a rule's `approvals`; 1 otherwise). */
  approvalsNeeded: number;
  /** Approvals it has so far. */
  approvals: number;
  decidedBy: string | null;
  reason: string | null;
  /** The rule that decided it (allowed, denied or held it), when one did. */
  rule: string | null;
  /** The grant that let it run without review, when one did. */
  grant: string | null;
  /** Only in rows for a webhook with `includeArguments`. */
  arguments?: Record<string, unknown>;
}

export interface CallPayload {
  event: CallNotificationEvent;
  at: string;
  call: CallFacts;
  /** Email rows: the address it goes to, as it was when queued. */
  to?: string;
}

export interface CataloguePayload {
  event: "catalogue.changed";
  at: string;
  server: string;
  changes: CatalogueChange[];
}

/** What a row's `payload` column holds; the message is built from it at send time. */
export type DeliveryPayload = CallPayload | CataloguePayload;

export const nowIso = () => new Date().toISOString();

/** Statuses in which a call holds a reviewer's approval. */
const APPROVED = new Set(["running", "succeeded", "failed", "interrupted"]);

/** A call's approvals; calls approved before approvals were listed count their one decider. */
function approvalsOf(call: CallRow): number {
  const listed = parseApprovedBy(call.approvedBy).length;
  if (listed > 0) return listed;
  return call.decidedBy !== null && APPROVED.has(call.status) ? 1 : 0;
}

export function callFacts(call: CallRow): CallFacts {
  return {
    id: call.id,
    tool: call.tool,
    server: call.server,
    requester: { kind: call.requesterKind as "agent" | "user", name: call.requesterName },
    status: call.status,
    approvalReason: call.approvalReason,
    argumentsDigest: call.argumentsDigest,
    expiresAt: call.expiresAt,
    approvalsNeeded: call.approvalsNeeded,
    approvals: approvalsOf(call),
    decidedBy: call.decidedBy,
    reason: call.reason,
    rule: call.rule,
    grant: call.grantId,
  };
}

interface NewDelivery {
  channel: "webhook" | "email";
  target: string;
  event: NotificationEvent;
  callId: string | null;
  requester: string | null;
  payload: DeliveryPayload | DigestPayload;
  deadline: string | null;
  /** When it is first due; default at once. */
  dueAt?: string;
}

async function insertDeliveries(db: Db, rows: NewDelivery[], at: string): Promise<number> {
  if (rows.length === 0) return 0;
  await db.insert(notificationDeliveries).values(
    rows.map((r) => ({
      deliveryId: randomUUID(),
      channel: r.channel,
      target: r.target,
      event: r.event,
      callId: r.callId,
      requester: r.requester,
      payload: JSON.stringify(r.payload),
      status: "queued" as const,
      nextAttemptAt: r.dueAt ?? at,
      deadline: r.deadline,
      createdAt: at,
    })),
  );
  return rows.length;
}

/**
 * Queues one row per webhook subscribed to `event`, and, when email is configured for it, one
 * per reviewer with an address (never the requester themselves). A `call.pending` row's deadline
 * is the call's expiry: a message arriving after nobody can act on it is not sent. While more
 * than {@link DIGEST_AFTER} calls of the requester wait, `call.pending` email goes as one digest
 * per reviewer instead (digests.ts). Returns how many rows were queued. Call it with the `tx` of
 * the transaction that makes `event` true.
 */
export async function enqueueCallEvent(
  db: Db,
  config: NotificationsConfig,
  event: CallNotificationEvent,
  call: CallRow,
): Promise<number> {
  const at = nowIso();
  const facts = callFacts(call);
  const deadline = event === "call.pending" ? call.expiresAt : null;
  const requester = requesterKey(facts.requester);
  const base = { event, callId: call.id, requester, deadline };
  const rows: NewDelivery[] = [];
  for (const hook of config.webhooks) {
    if (!hook.events.includes(event)) continue;
    const withArgs = hook.includeArguments
      ? { ...facts, arguments: JSON.parse(call.arguments) as Record<string, unknown> }
      : facts;
    rows.push({ ...base, channel: "webhook", target: hook.name, payload: { event, at, call: withArgs } });
  }
  if (config.email?.events.includes(event)) {
    const except = call.requesterKind === "user" ? call.requesterName : undefined;
    const people = await reviewerEmails(db, except === undefined ? {} : { except });
    const digested =
      event === "call.pending" && people.length > 0 && (await waitingOf(db, facts.requester)) > DIGEST_AFTER;
    for (const person of people) {
      if (!digested) {
        rows.push({
          ...base,
          channel: "email",
          target: person.name,
          payload: { event, at, call: facts, to: person.email },
        });
        continue;
      }
      const dueAt = await takeDigest(db, person.name, requester, at);
      if (dueAt === null) continue;
      rows.push({
        channel: "email",
        target: person.name,
        event,
        callId: null,
        requester,
        deadline: null,
        dueAt,
        payload: { event, at, digest: { requester: facts.requester, waiting: 0 }, to: person.email },
      });
    }
  }
  return await insertDeliveries(db, rows, at);
}

/** Queues `catalogue.changed` for every webhook subscribed to it; nothing for an empty list. */
export async function enqueueCatalogueChange(
  db: Db,
  config: NotificationsConfig,
  server: string,
  changes: readonly CatalogueChange[],
): Promise<number> {
  if (changes.length === 0) return 0;
  const at = nowIso();
  const payload: CataloguePayload = {
    event: "catalogue.changed",
    at: changes[0]?.at ?? at,
    server,
    changes: [...changes],
  };
  const rows: NewDelivery[] = config.webhooks
    .filter((hook) => hook.events.includes("catalogue.changed"))
    .map((hook) => ({
      channel: "webhook",
      target: hook.name,
      event: "catalogue.changed",
      callId: null,
      requester: null,
      payload,
      deadline: null,
    }));
  return await insertDeliveries(db, rows, at);
}

/**
 * Where a row goes, as the dispatcher counts its slots: every email row shares one key (one SMTP
 * server and transport serve them all), each webhook has its own. The same in SQL and in code.
 */
export function destinationOf(row: { channel: string; target: string }): string {
  return row.channel === "email" ? "email" : `webhook:${row.target}`;
}
const destinationSql = sql<string>`(CASE ${notificationDeliveries.channel} WHEN 'email' THEN 'email' ELSE 'webhook:' || ${notificationDeliveries.target} END)`;

/**
 * Each due row's turn among its destination's due rows of the same requester (1 for the oldest):
 * ordering by it first sends one row of every requester before a second of any, so one
 * requester's backlog never holds another's messages back.
 */
const turnSql = sql`row_number() over (partition by ${destinationSql}, ${notificationDeliveries.requester} order by ${notificationDeliveries.nextAttemptAt}, ${notificationDeliveries.id})`;

/**
 * Queued rows due by `now`, none for a destination in `skip`: in turns by requester (`turnSql`),
 * within a turn oldest due first (then oldest queued).
 */
export async function dueDeliveries(
  db: Db,
  now: string,
  limit: number,
  skip: readonly string[] = [],
): Promise<DeliveryRow[]> {
  return await db
    .select()
    .from(notificationDeliveries)
    .where(
      and(
        eq(notificationDeliveries.status, "queued"),
        lte(notificationDeliveries.nextAttemptAt, now),
        or(isNull(notificationDeliveries.claimedUntil), lte(notificationDeliveries.claimedUntil, now)),
        skip.length > 0 ? notInArray(destinationSql, [...skip]) : undefined,
      ),
    )
    .orderBy(turnSql, asc(notificationDeliveries.nextAttemptAt), asc(notificationDeliveries.id))
    .limit(limit);
}

/** The next queued rows by due time, none for a destination in `skip` (the dispatcher also skips those in flight). */
export async function nextQueued(
  db: Db,
  limit: number,
  skip: readonly string[] = [],
): Promise<{ id: number; channel: string; target: string; nextAttemptAt: string }[]> {
  return await db
    .select({
      id: notificationDeliveries.id,
      channel: notificationDeliveries.channel,
      target: notificationDeliveries.target,
      nextAttemptAt: notificationDeliveries.nextAttemptAt,
    })
    .from(notificationDeliveries)
    .where(
      and(
        eq(notificationDeliveries.status, "queued"),
        skip.length > 0 ? notInArray(destinationSql, [...skip]) : undefined,
      ),
    )
    .orderBy(asc(notificationDeliveries.nextAttemptAt), asc(notificationDeliveries.id))
    .limit(limit);
}

/** What one try changes on its row. */
export interface AttemptRecord {
  status: "queued" | "delivered" | "failed";
  attempts: number;
  lastStatus: number | null;
  lastError: string | null;
  /** When still queued: the next try. */
  nextAttemptAt?: string;
}

/**
 * Records a try's outcome; a finished row gets its `finishedAt`. Only a queued row changes and,
 * given `claimedUntil` (the lease of `claimDelivery`, claims.ts), only while that claim still holds.
 * Returns whether the row changed.
 */
export async function recordAttempt(
  db: Db,
  id: number,
  record: AttemptRecord,
  claimedUntil?: string,
): Promise<boolean> {
  const finished = record.status !== "queued";
  const changed = await db
    .update(notificationDeliveries)
    .set({
      status: record.status,
      attempts: record.attempts,
      lastStatus: record.lastStatus,
      lastError: record.lastError,
      ...(record.nextAttemptAt ? { nextAttemptAt: record.nextAttemptAt } : {}),
      ...(finished ? { finishedAt: nowIso() } : {}),
      claimedUntil: null,
    })
    .where(
      and(
        eq(notificationDeliveries.id, id),
        eq(notificationDeliveries.status, "queued"),
        claimedUntil === undefined ? undefined : eq(notificationDeliveries.claimedUntil, claimedUntil),
      ),
    )
    .returning({ id: notificationDeliveries.id });
  return changed.length > 0;
}

/** Finished rows kept per destination; older ones are deleted as new ones finish. */
export const KEEP_FINISHED = 200;

/** Deletes all but the newest `keep` finished rows of one destination (queued rows are never touched). */
export async function pruneFinished(
  db: Db,
  channel: "webhook" | "email",
  target: string,
  keep = KEEP_FINISHED,
): Promise<void> {
  const of = and(
    eq(notificationDeliveries.channel, channel),
    eq(notificationDeliveries.target, target),
    ne(notificationDeliveries.status, "queued"),
  );
  const oldestKept = await first(
    db
      .select({ id: notificationDeliveries.id })
      .from(notificationDeliveries)
      .where(of)
      .orderBy(desc(notificationDeliveries.id))
      .limit(1)
      .offset(keep - 1),
  );
  if (!oldestKept) return;
  await db.delete(notificationDeliveries).where(and(of, lt(notificationDeliveries.id, oldestKept.id)));
}

/** The newest `limit` rows of one channel (and target, if given) as the delivery log shows them. */
export async function recentDeliveries(
  db: Db,
  where: { channel: "webhook" | "email"; target?: string },
  limit = 50,
): Promise<DeliveryView[]> {
  const rows = await db
    .select()
    .from(notificationDeliveries)
    .where(
      and(
        eq(notificationDeliveries.channel, where.channel),
        where.target === undefined ? undefined : eq(notificationDeliveries.target, where.target),
      ),
    )
    .orderBy(desc(notificationDeliveries.id))
    .limit(limit);
  return rows.map((r) => ({
    id: r.id,
    deliveryId: r.deliveryId,
    event: r.event,
    callId: r.callId,
    recipient: r.channel === "email" ? r.target : null,
    digestOf: isDigestRow(r) && r.requester !== null ? r.requester.slice(r.requester.indexOf(":") + 1) : null,
    status: r.status,
    attempts: r.attempts,
    createdAt: r.createdAt,
    finishedAt: r.finishedAt,
    nextAttemptAt: r.status === "queued" ? r.nextAttemptAt : null,
    lastStatus: r.lastStatus,
    lastError: r.lastError,
  }));
}

/** A call's status now, or null when there is no such call (the dispatcher asks before each try). */
export async function callStatusNow(db: Db, id: string): Promise<string | null> {
  const row = await first(
    db.select({ status: callsTable.status }).from(callsTable).where(eq(callsTable.id, id)),
  );
  return row?.status ?? null;
}
