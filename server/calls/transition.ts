import "server-only";
import { and, eq, lte, type SQL } from "drizzle-orm";
import type { CallStatus } from "@/lib/api-types";
import type { EventBus } from "../events";
import { writeAudit } from "../store/audit";
import { type Db, transaction } from "../store/db";
import { calls } from "../store/schema";
import type { CallRow } from "./call-row";

/**
 * A call's state machine. A call is born `refused`, `pending` or `running` (its insert and audit
 * row are one group-committed write, see the broker); after that it moves only along these
 * edges, each named by the audit action that records it:
 *
 * ```
 * pending → running      call.approved     the last reviewer needed approved it (the only way a held call runs)
 * pending → denied       call.denied       a reviewer denied it
 * pending → expired      call.expired      nobody decided within approvals.expireAfterSeconds
 * pending → withdrawn    call.withdrawn    its requester took it back
 * pending → refused      call.refused      approval came, but the tool is no longer what was shown, or a
 *                                          deny rule now matches it (at approval or at start, rejudge.ts)
 * running → succeeded    call.succeeded    the tool answered (the outcome write, see run.ts)
 * running → failed       call.failed       the tool failed or reported an error (likewise)
 * running → interrupted  call.interrupted  outcome unknown, never re-run: Gatehouse stopped meanwhile, or a
 *                                          destructive call's server died or timed out under it (run.ts)
 * ```
 *
 * An approval short of a call's `approvalsNeeded` is no move: it is recorded as `call.approval`
 * on a call that stays `pending` (see approve.ts); nor is a count raised by the current rules at
 * start, recorded as `call.rejudged` (see rejudge.ts).
 */
export const CALL_TRANSITIONS = {
  pending: {
    running: "call.approved",
    denied: "call.denied",
    expired: "call.expired",
    withdrawn: "call.withdrawn",
    refused: "call.refused",
  },
  running: { succeeded: "call.succeeded", failed: "call.failed", interrupted: "call.interrupted" },
} as const satisfies Partial<Record<CallStatus, Partial<Record<CallStatus, string>>>>;

type Transitions = typeof CALL_TRANSITIONS;
export type MovableStatus = keyof Transitions;

/** The columns a transition may set beside the status. */
type TransitionColumns = Partial<
  Pick<
    CallRow,
    | "decidedAt"
    | "decidedBy"
    | "reason"
    | "startedAt"
    | "finishedAt"
    | "errorCode"
    | "errorMessage"
    | "approvedBy"
    | "rule"
    | "approvalsNeeded"
    | "approvalReason"
    | "replica"
  >
>;

/** What a transition returns of each call it moved: its row as it now is. */
export type MovedCall = CallRow;

export interface TransitionSpec<F extends MovableStatus> {
  from: F;
  to: keyof Transitions[F] & CallStatus;
  /** One call; absent, every call in `from` (narrowed by `dueBy`). */
  id?: string;
  /** Only calls whose `expiresAt` is at or before this ISO time. */
  dueBy?: string;
  /** Only a call whose `approvedBy` column is still this (the approvals the decider read). */
  approvedBy?: string;
  /** Only calls of this requester. */
  requester?: { kind: "agent" | "user"; name: string };
  /** One more condition the calls must meet (the replicas a running call may be left by). */
  where?: SQL;
  set: TransitionColumns;
  /** Who made the move, as the audit log names them ("gatehouse" for the host itself). */
  actor: string;
  /** The audit row's detail and duration for one moved call. */
  audit: (call: MovedCall) => { detail?: string | null; durationMs?: number | null };
  /**
   * Runs for each moved call inside the same transaction, after its audit row: writes that must
   * stand or fall with the move (the notification outbox), on the transaction's `tx`. A throw (or
   * rejection) rolls the whole move back.
   */
  alsoWrite?: (tx: Db, call: MovedCall) => Promise<void>;
  /** `false`: on SQLite, fail at once when another process holds the write lock (see `TransactionOptions`). */
  wait?: boolean;
}

/**
 * Moves calls from `from` to `to` with one conditional update, and writes each moved call's audit
 * row in the same transaction: either both are stored or neither is (a failed audit insert rolls
 * the status back, and the error reaches the caller). Only calls still in `from` move, so of two
 * concurrent deciders exactly one wins; the other finds nothing moved (an empty result). Once
 * committed, each moved call is published on the bus, once.
 *
 * Exactly once on PostgreSQL too, across replicas: the update is a conditional UPDATE inside a
 * SERIALIZABLE {@link transaction}. Of two concurrent movers of one row, the second blocks on the
 * row lock and, once the first commits, is rolled back (serialization failure) and run again by
 * `transaction`, when it reads the new status and its `WHERE status = from` matches nothing (under
 * READ COMMITTED alone the same holds: the UPDATE re-checks its WHERE on the row it locked). The
 * bus hears only after the transaction resolved, so a retried attempt never publishes.
 */
export async function transition<F extends MovableStatus>(
  db: Db,
  bus: EventBus,
  spec: TransitionSpec<F>,
): Promise<MovedCall[]> {
  const action = (CALL_TRANSITIONS[spec.from] as Record<string, string>)[spec.to];
  if (!action) throw new Error(`no transition from ${spec.from} to ${spec.to}`);
  const moved = await transaction(
    db,
    async (tx) => {
      const rows = await tx
        .update(calls)
        .set({ ...spec.set, status: spec.to })
        .where(
          and(
            eq(calls.status, spec.from),
            spec.id === undefined ? undefined : eq(calls.id, spec.id),
            spec.dueBy === undefined ? undefined : lte(calls.expiresAt, spec.dueBy),
            spec.approvedBy === undefined ? undefined : eq(calls.approvedBy, spec.approvedBy),
            spec.requester === undefined ? undefined : eq(calls.requesterKind, spec.requester.kind),
            spec.requester === undefined ? undefined : eq(calls.requesterName, spec.requester.name),
            spec.where,
          ),
        )
        .returning();
      for (const row of rows) {
        await writeAudit(tx, {
          actor: spec.actor,
          action,
          subject: row.tool,
          callId: row.id,
          ...spec.audit(row),
        });
        await spec.alsoWrite?.(tx, row);
      }
      return rows;
    },
    { wait: spec.wait },
  );
  for (const row of moved) {
    bus.publish({ type: "call", id: row.id, status: spec.to });
    bus.recordCall({ from: spec.from, call: row });
  }
  return moved;
}

/** The audit action of a call's outcome (`running → succeeded | failed | interrupted`, see run.ts). */
export function outcomeAction(status: "succeeded" | "failed" | "interrupted"): string {
  return CALL_TRANSITIONS.running[status];
}
