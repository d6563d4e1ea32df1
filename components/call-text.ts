/**
 * Words for one call, shared by the activity list, a call's story and its audit trail: where it
 * went, what decided it, how long the tool ran, and what each audit row says happened.
 */

import { decisionSourceOf, decisionSourceText } from "@/components/grant-text";
import type { AuditEventView, CallView } from "@/lib/api-types";
import { approvalsNeededText, approvalsText, decidersText, namesText } from "@/lib/decision-text";
import { capitalized, formatDateTime, formatDuration } from "@/lib/format";
import { toolErrorText } from "@/lib/tool-error-text";

/** The actor the audit log names for what Gatehouse did on its own (expiry, a restart, an end). */
const GATEHOUSE_ACTOR = "gatehouse";

/**
 * The server a call went to, or null when there is none: a call of a tool no server offers (an
 * unknown name, refused at once) is stored with an empty server. Render "on <server>" only when
 * this is not null.
 */
export function serverOf(call: Pick<CallView, "server">): string | null {
  return call.server === "" ? null : call.server;
}

/**
 * What decided a call, as the activity list's Decision column reads it: "Approved by rita",
 * "Allowed by rule notes-reads", "Waiting (1 of 2 approvals)", "Read-only, no review", ...
 */
/**
 * Who stopped an interrupted call's tool: Gatehouse at a restart (its start marks the call with
 * "Gatehouse stopped…"), or the tool server, which failed or went silent after the call was sent.
 * Either way the outcome is unknown and the call is not run again.
 */
export function interruptedBy(call: Pick<CallView, "error">): "restart" | "server" {
  return call.error?.message.startsWith("Gatehouse stopped") ? "restart" : "server";
}

/** "Gatehouse stopped while the tool ran" or "the tool server failed or did not answer while the tool ran". */
export function interruptedWhy(call: Pick<CallView, "error">): string {
  return interruptedBy(call) === "restart"
    ? "Gatehouse stopped while the tool ran"
    : "the tool server failed or did not answer while the tool ran";
}

export function decisionText(call: CallView): string {
  return capitalized(decisionPhrase(call));
}

function decisionPhrase(call: CallView): string {
  const source = decisionSourceOf(call);
  // What a rule or grant decided alone; a held call goes on to say who decided it.
  if (source && source.kind !== "held") return decisionSourceText(source);
  const held = source ? ` (${decisionSourceText(source)})` : "";
  const sofar = call.approvalsNeeded > 1 ? approvalsText(call.approvedBy.length, call.approvalsNeeded) : null;
  if (call.status === "denied")
    return `denied by ${call.decidedBy ?? "?"}${call.reason ? `: ${call.reason}` : ""}`;
  if (call.status === "refused") {
    const code = call.error ? `refused: ${call.error.code}` : "refused";
    return call.decidedBy ? `${code} when ${call.decidedBy} approved` : code;
  }
  if (call.decidedBy) return `approved by ${decidersText(call)}${held}`;
  if (call.status === "pending") return sofar ? `waiting (${sofar})` : "waiting";
  if (call.status === "expired") return sofar ? `nobody finished deciding (${sofar})` : "nobody decided";
  if (call.status === "withdrawn") return "withdrawn by the requester";
  return call.destructive ? "—" : "read-only, no review";
}

/**
 * Who decided a call, as the approvals page's "Recently decided" list says it beside the call's
 * status badge ("approved by rita", "denied by rita", "expired at 1 of 2 approvals"), or null
 * when a rule or grant decided alone (its own phrase stands beside). Only a decided call names
 * deciders: approvals short of a call's count are no approval.
 */
export function recentDecisionText(call: CallView): string | null {
  if (call.decidedBy) return `${call.status === "denied" ? "denied" : "approved"} by ${decidersText(call)}`;
  const source = decisionSourceOf(call);
  if (source && source.kind !== "held") return null;
  const sofar =
    call.approvedBy.length > 0 ? approvalsText(call.approvedBy.length, call.approvalsNeeded) : null;
  switch (call.status) {
    case "expired":
      return sofar ? `expired at ${sofar}` : "expired without a decision";
    case "refused":
      return "refused by Gatehouse";
    case "interrupted":
      return interruptedBy(call) === "restart"
        ? "interrupted by a restart"
        : "interrupted: the server failed under it";
    case "withdrawn":
      return sofar ? `withdrawn by the requester at ${sofar}` : "withdrawn by the requester";
    default:
      return call.destructive ? "no decision recorded" : "read-only, ran without review";
  }
}

/** The code of a failure the tool itself reported (an `isError` result). */
const TOOL_ERROR = "tool_error";

/**
 * Why a call failed, as one line beside it: `message` is, for an error the tool reported, its
 * own words from the stored result after Gatehouse's ("the tool reported an error: disk full"),
 * else Gatehouse's message alone; `toolText` is the tool's words alone (cleaned, one line,
 * capped: see `toolErrorText`), null when it gave none. Null when the call has no error.
 */
export function callErrorText(
  call: Pick<CallView, "error" | "result">,
): { message: string; code: string; toolText: string | null } | null {
  if (!call.error) return null;
  const toolText = call.error.code === TOOL_ERROR ? toolErrorText(call.result) : null;
  const message = toolText ? `${call.error.message}: ${toolText}` : call.error.message;
  return { message, code: call.error.code, toolText };
}

/** What the run time measures, as a column's or a fact's explanation says it. */
export const RUN_TIME_MEANING =
  "The tool's run time: from when Gatehouse sent the call to when the answer came.";

/**
 * A call's run time as its story states it, or null when the tool was never asked: "12 ms, from
 * when Gatehouse sent the call (2025-01-31 13:04:05) to the tool's answer". The figure is the
 * call's `durationMs`, the same one its outcome's audit row holds.
 */
export function runTimeText(
  call: Pick<CallView, "status" | "startedAt" | "finishedAt" | "durationMs" | "error">,
): string | null {
  if (!call.startedAt) return null;
  const sent = formatDateTime(call.startedAt);
  if (call.status === "running") return `Still running: Gatehouse let it run at ${sent}`;
  if (call.durationMs !== null) {
    return `${formatDuration(call.durationMs)}, from when Gatehouse sent the call (${sent}) to the tool's answer`;
  }
  if (call.status === "interrupted") return `Unknown: ${interruptedWhy(call)} (let run at ${sent})`;
  return null;
}

/** One audit row in words: what happened and who did it, then the detail under a label. */
export interface AuditStepWords {
  /** What happened, by whom or for how long: "Succeeded in 12 ms", "Requested by olga". */
  what: string;
  /** What goes with it, when anything does: "Gatehouse ran it, approved by rita". */
  more: string | null;
  /** What the row's detail is ("Why", "Reason", "Error", ...), shown before it. */
  detailLabel: string;
  /** The detail as it is to be shown (a prefix the label already says is left out); null when none. */
  detail: string | null;
}

/** What a trail tells about its call beside each row: who approved it, and how many had to. */
export interface TrailContext {
  /** Who approved the call, in order (see {@link approversIn}). */
  approvers: readonly string[];
  /** How many approvals the call needs; absent when not known (the trail says "approval"). */
  approvalsNeeded?: number;
}

/** The reviewers whose approvals a trail records (`call.approval`, `call.approved`), each once, in order. */
export function approversIn(events: readonly AuditEventView[]): string[] {
  const names: string[] = [];
  for (const e of events) {
    if ((e.action === "call.approval" || e.action === "call.approved") && !names.includes(e.actor)) {
      names.push(e.actor);
    }
  }
  return names;
}

const APPROVAL_REFUSED = /^approval refused: /i;
/** Between what happened and what goes with it, as the trail shows them on one line. */
const SEPARATOR = " · ";

/** An audit row's words on one line: "Succeeded in 12 ms · Gatehouse ran it, approved by rita". */
export function auditStepText(words: Pick<AuditStepWords, "what" | "more">): string {
  return words.more === null ? words.what : `${words.what}${SEPARATOR}${words.more}`;
}

/**
 * What one audit row of a call says happened, in sentence case. The actor is named as what they
 * did: "Requested by olga · waiting for a reviewer's approval", "Approved by rita 5 s after the
 * request", "Succeeded in 12 ms · Gatehouse ran it, approved by rita". An outcome's figure is the
 * tool's run time (see {@link RUN_TIME_MEANING}); a decision's is the wait since the request.
 * Gatehouse's own steps (expiry, a restart) name nobody.
 */
export function auditStepWords(event: AuditEventView, trail: TrailContext): AuditStepWords {
  const actor = event.actor;
  const d = event.durationMs === null ? null : formatDuration(event.durationMs);
  const afterRequest = d ? ` ${d} after the request` : "";
  const ranIt =
    trail.approvers.length > 0
      ? `Gatehouse ran it, approved by ${namesText(trail.approvers)}`
      : "Gatehouse ran it";
  const words = (
    what: string,
    more: string | null,
    detailLabel: string,
    detail = event.detail,
  ): AuditStepWords => ({ what, more, detailLabel, detail });
  switch (event.action) {
    case "call.pending": {
      const waitsFor =
        trail.approvalsNeeded === undefined ? "approval" : approvalsNeededText(trail.approvalsNeeded);
      return words(`Requested by ${actor}`, `waiting for ${waitsFor}`, "Why");
    }
    case "call.started":
      // The detail says why: read-only, an allow rule, or a grant.
      return words(`Requested by ${actor}`, "Gatehouse ran it at once", "Why");
    case "call.approval":
      return words(`Approved by ${actor}${afterRequest}`, "more approvals needed", "So far");
    case "call.approved":
      return words(`Approved by ${actor}${afterRequest}`, null, "Approvals");
    case "grant.created":
      return words(`Grant made by ${actor} with the approval`, null, "Grant");
    case "grant.revoked":
      return words(`Grant revoked by ${actor}`, null, "Grant");
    case "grant.ended":
      return words(actor === GATEHOUSE_ACTOR ? "Grant ended" : `Grant ended by ${actor}`, null, "Grant");
    case "call.denied":
      return words(`Denied by ${actor}${afterRequest}`, null, "Reason");
    case "call.expired":
      return words(`Expired without a decision${afterRequest}`, null, "Why");
    case "call.refused":
      // Refused as a reviewer approved it (the approval no longer applied), or at the request.
      if ((event.detail !== null && APPROVAL_REFUSED.test(event.detail)) || event.durationMs !== null) {
        return words(
          `Approved by ${actor}${afterRequest}`,
          "refused by Gatehouse: the approval no longer applied",
          "Why",
          event.detail?.replace(APPROVAL_REFUSED, "") ?? null,
        );
      }
      // Refused while it waited: a deny rule added since it was held, found at start.
      if (actor === GATEHOUSE_ACTOR) return words("Refused by Gatehouse", "the current rules deny it", "Why");
      return words(`Requested by ${actor}`, "refused by Gatehouse", "Why");
    case "call.rejudged":
      return words("Judged again by Gatehouse", "the current rules ask for more approvals", "Why");
    case "call.succeeded":
      return words(d ? `Succeeded in ${d}` : "Succeeded", ranIt, "Note");
    case "call.failed":
      return words(d ? `Failed after ${d}` : "Failed", ranIt, "Error");
    case "call.interrupted":
      // Gatehouse's own row is a restart's; the requester's, a server that failed under the call.
      return actor === GATEHOUSE_ACTOR
        ? words("Interrupted", "Gatehouse stopped while the tool ran; the outcome is unknown", "Note")
        : words(
            "Interrupted",
            "the server failed or did not answer while the tool ran; the outcome is unknown",
            "Why",
          );
    case "call.withdrawn":
      return words(`Withdrawn by ${actor}`, null, "Why");
    default:
      return words(`${event.action} by ${actor}`, d, "Detail");
  }
}
