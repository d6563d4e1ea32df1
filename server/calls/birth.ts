import "server-only";
import { takeGrant } from "../grants";
import { writeAudit } from "../store/audit";
import type { Db } from "../store/db";
import type { tools } from "../store/schema";
import type { CallEventName } from "./broker";
import type { CallRow, Requester } from "./call-row";
import {
  type CallDecision,
  coverQuery,
  grantText,
  runDetail,
  type StopDecision,
  type WaitDecision,
} from "./decision";
import { insertCall } from "./queries";

type ToolRow = typeof tools.$inferSelect;
type Notify = ((db: Db, event: CallEventName, call: CallRow) => void) | undefined;

/**
 * A call's birth: its first row and audit row, as its decision says, inside the broker's group
 * commit (one write, all or nothing). Synchronous, so what it reads and writes in the store cannot
 * interleave with another call's birth.
 */

/** Stores a refused call. A refusal by a deny rule is an automatic decision: it is told of. */
export function writeRefusal(db: Db, row: CallRow, stop: StopDecision, notify: Notify): void {
  insertCall(db, row);
  writeAudit(db, {
    actor: row.requesterName,
    action: "call.refused",
    subject: row.tool,
    callId: row.id,
    detail: stop.rule ? `${stop.code}: ${stop.why}` : `${stop.code}: ${stop.message}`,
  });
  if (stop.rule) notify?.(db, "call.decided", row);
}

export interface Birth {
  call: Omit<CallRow, "status">;
  decision: Exclude<CallDecision, StopDecision>;
  requester: Requester;
  row: ToolRow;
  args: Record<string, unknown>;
  expireAfterSeconds: number;
  notify: Notify;
}

/**
 * Stores a call that waits (`pending`) or runs now (`running`) and returns its row. A call covered
 * by a grant takes the grant's use here, in its own write, so N covered calls use exactly N; when
 * the last use went to another call first, the call waits as it would have without the grant.
 */
export function writeBirth(db: Db, b: Birth): CallRow {
  const { call, decision, requester } = b;
  let wait: WaitDecision | null = decision.outcome === "wait" ? decision : null;
  let grantId: string | null = null;
  let detail = decision.outcome === "run" ? runDetail(decision) : "";
  if (decision.outcome === "run" && decision.by === "grant") {
    const used = takeGrant(db, coverQuery(requester, b.row, b.args));
    if (used) {
      grantId = used.id;
      detail = grantText(used);
    } else wait = decision.otherwise;
  }
  if (wait) {
    const held: CallRow = {
      ...call,
      status: "pending",
      destructive: true,
      approvalReason: wait.reason,
      approvalsNeeded: wait.approvalsNeeded,
      rule: wait.rule,
      expiresAt: new Date(Date.now() + b.expireAfterSeconds * 1000).toISOString(),
    };
    insertCall(db, held);
    writeAudit(db, {
      actor: requester.name,
      action: "call.pending",
      subject: held.tool,
      callId: held.id,
      detail: wait.rule ? `${wait.reason} (${wait.why})` : wait.reason,
    });
    b.notify?.(db, "call.pending", held);
    return held;
  }
  const run = decision.outcome === "run" ? decision : null;
  const started: CallRow = {
    ...call,
    status: "running",
    startedAt: call.createdAt,
    rule: run?.rule ?? null,
    grantId,
    // A call that would have waited keeps its reason, so its story says what the grant skipped.
    approvalReason: run?.by === "grant" ? (run.otherwise?.reason ?? null) : null,
  };
  // The row exists before the tool is asked: a crash mid-call leaves it `interrupted`.
  insertCall(db, started);
  writeAudit(db, {
    actor: requester.name,
    action: "call.started",
    subject: started.tool,
    callId: started.id,
    detail,
  });
  if (run && run.by !== "default") b.notify?.(db, "call.decided", started);
  return started;
}
