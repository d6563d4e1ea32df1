import "server-only";
import type { CallStatus, CallView } from "@/lib/api-types";
import type { ErrorCode } from "@/lib/errors";
import { callProblem } from "../catalogue/callable";
import { parseApprovedBy } from "../store/approved-by";
import type { Db } from "../store/db";
import type { calls, tools } from "../store/schema";
import { argumentsDigest } from "./arguments";
import { newCallId } from "./ids";

/**
 * Calls as rows and as views: pure functions, no store. What a new call's row holds, how a row
 * reads to its API user, how a result is capped for storage and why an approval cannot apply.
 */

export type CallRow = typeof calls.$inferSelect;
type ToolRow = typeof tools.$inferSelect;

/** The moments of a call that people are told of (PRODUCT.md §10). */
export type CallEventName = "call.pending" | "call.decided" | "call.expired" | "call.interrupted";

/**
 * Writes what `event` tells of `call` (the notification outbox) inside the transaction that makes
 * it true, on that transaction's `db`; awaited there. See `BrokerDeps.notify`.
 */
export type CallNotify = (db: Db, event: CallEventName, call: CallRow) => Promise<void>;

export interface Requester {
  kind: "agent" | "user";
  name: string;
  /** An agent's tool set, as its token had it when it asked; null or absent: every enabled tool. */
  toolSet?: string | null;
}

/** Results are stored up to this many bytes of JSON; longer ones are kept as a marked preview. */
export const RESULT_STORE_MAX_BYTES = 64 * 1024;

export const nowIso = () => new Date().toISOString();

/** What a call's view needs from the tool's current catalogue row (absent when the row is gone). */
export interface ToolNow {
  description: string | null;
  definitionHash: string | null;
}

export function toView(row: CallRow, tool: ToolNow, fullResult?: unknown): CallView {
  const started = row.startedAt ? Date.parse(row.startedAt) : Number.NaN;
  const finished = row.finishedAt ? Date.parse(row.finishedAt) : Number.NaN;
  return {
    id: row.id,
    tool: row.tool,
    server: row.server,
    status: row.status,
    destructive: row.destructive,
    approvalReason: row.approvalReason,
    toolDescription: tool.description,
    toolChanged:
      row.definitionHash !== null &&
      tool.definitionHash !== null &&
      tool.definitionHash !== row.definitionHash,
    arguments: JSON.parse(row.arguments) as Record<string, unknown>,
    requester: { kind: row.requesterKind as "agent" | "user", name: row.requesterName },
    createdAt: row.createdAt,
    expiresAt: row.expiresAt,
    decidedAt: row.decidedAt,
    decidedBy: row.decidedBy,
    reason: row.reason,
    startedAt: row.startedAt,
    finishedAt: row.finishedAt,
    result: fullResult ?? (row.result ? JSON.parse(row.result) : null),
    resultTruncated: fullResult === undefined ? row.resultTruncated : false,
    error: row.errorCode ? { code: row.errorCode, message: row.errorMessage ?? "" } : null,
    // Only a tool that answered has a run time: an interrupted call's finish is the restart's.
    durationMs:
      (row.status === "succeeded" || row.status === "failed") &&
      Number.isFinite(started) &&
      Number.isFinite(finished)
        ? finished - started
        : null,
    rule: row.rule,
    grantId: row.grantId,
    approvalsNeeded: row.approvalsNeeded,
    approvedBy: approvedByOf(row),
  };
}

/** The reviewers who approved a call so far (a damaged column reads as none). */
export function approvedByOf(row: Pick<CallRow, "approvedBy">): string[] {
  return parseApprovedBy(row.approvedBy);
}

/**
 * The columns a call's outcome sets; `startedAt` and `finishedAt` become the moments the call was
 * sent to the tool and its answer came (see `runCall`).
 */
export type OutcomeColumns = Pick<
  CallRow,
  "status" | "startedAt" | "finishedAt" | "result" | "resultTruncated" | "errorCode" | "errorMessage"
> & { status: CallStatus };

/** A call row's optional columns, unset; new rows spread it and fill in the rest. */
const emptyCall = {
  definitionHash: null,
  approvalReason: null,
  expiresAt: null,
  decidedAt: null,
  decidedBy: null,
  reason: null,
  startedAt: null,
  finishedAt: null,
  result: null,
  resultTruncated: false,
  errorCode: null,
  errorMessage: null,
  rule: null,
  grantId: null,
  approvalsNeeded: 1,
  approvedBy: "[]",
  replica: null,
} satisfies Partial<CallRow>;

/** What a new call is about, before the catalogue has said whether it may run. */
export interface CallSubject {
  tool: string;
  server: string;
  remoteName: string;
  args: Record<string, unknown>;
  destructive: boolean;
}

/** A new call's row, created now, before its status and outcome are known. */
export function newCall(requester: Requester, c: CallSubject): Omit<CallRow, "status"> {
  return {
    ...emptyCall,
    id: newCallId(),
    tool: c.tool,
    server: c.server,
    remoteName: c.remoteName,
    arguments: JSON.stringify(c.args),
    argumentsDigest: argumentsDigest(c.args),
    destructive: c.destructive,
    requesterKind: requester.kind,
    requesterName: requester.name,
    createdAt: nowIso(),
  };
}

/**
 * The stored form of a result: its JSON when that fits in {@link RESULT_STORE_MAX_BYTES}, else
 * `{truncated: true, bytes, preview}` whose own JSON fits (the preview is the start of the JSON
 * text, shortened until the escaped whole is within the cap).
 */
export function capResult(result: unknown): { text: string; truncated: boolean } {
  const json = JSON.stringify(result) ?? "null";
  const bytes = Buffer.byteLength(json);
  if (bytes <= RESULT_STORE_MAX_BYTES) return { text: json, truncated: false };
  const whole = Buffer.from(json);
  let budget = RESULT_STORE_MAX_BYTES - 100;
  for (;;) {
    // A cut inside a multi-byte character decodes to U+FFFD; drop it rather than show it.
    const preview = whole
      .subarray(0, budget)
      .toString("utf8")
      .replace(/\uFFFD$/, "");
    const text = JSON.stringify({ truncated: true, bytes, preview });
    const over = Buffer.byteLength(text) - RESULT_STORE_MAX_BYTES;
    if (over <= 0) return { text, truncated: true };
    budget -= over;
  }
}

/** How a decided call was decided, for "already decided" answers. */
export function decisionText(row: CallRow): string {
  switch (row.status) {
    case "running":
    case "succeeded":
    case "failed":
    case "interrupted":
      if (!row.decidedAt) return `it is already ${row.status}`;
      return row.decidedBy ? `${row.decidedBy} approved it` : "it was approved";
    case "denied":
      return row.decidedBy ? `${row.decidedBy} denied it` : "it was denied";
    case "expired":
      return "it expired before anyone decided";
    case "refused":
      return `it was refused${row.errorMessage ? `: ${row.errorMessage}` : ""}`;
    default:
      return `it is already ${row.status}`;
  }
}

/** Milliseconds a call waited for its decision (the duration of its pending state). */
export function pendingMs(row: { createdAt: string }): number {
  return Math.max(0, Date.now() - Date.parse(row.createdAt));
}

/**
 * Why an approval cannot apply to this call, or null when it can. An approval is bound to what
 * the reviewer was shown: the exact arguments (their digest at request time) and the tool's
 * definition as it was then; beyond that the tool must be callable now, as for a new request.
 */
export function bindingProblem(
  row: CallRow,
  tool: ToolRow | null,
): { code: ErrorCode; message: string } | null {
  let args: Record<string, unknown> | null;
  try {
    args = JSON.parse(row.arguments) as Record<string, unknown>;
  } catch {
    args = null;
  }
  if (!args || argumentsDigest(args) !== row.argumentsDigest) {
    return { code: "arguments_changed", message: "the stored arguments no longer match what was requested" };
  }
  if (!tool?.present) return { code: "tool_gone", message: "the tool is no longer listed by its server" };
  if (tool.definitionHash !== row.definitionHash) return TOOL_CHANGED;
  const problem = callProblem(tool, row.tool);
  if (!problem) return null;
  // The reviewer reads these after "Approval refused:", about the call in front of them.
  switch (problem.code) {
    case "tool_changed":
      return TOOL_CHANGED;
    case "tool_not_enabled":
      return { code: problem.code, message: "the tool is no longer enabled" };
    default:
      return { code: "tool_unusable", message: "the tool cannot be called" };
  }
}

const TOOL_CHANGED = {
  code: "tool_changed",
  message: "the tool's definition changed since the call was requested",
} as const;

/** A cursor for paging the activity list: the last call's creation time and id. */
export function callCursor(call: Pick<CallView, "createdAt" | "id">): string {
  return `${call.createdAt}|${call.id}`;
}
