import "server-only";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { GatehouseError } from "@/lib/errors";
import type { Logger } from "../log";
import { writeAudit } from "../store/audit";
import type { Db } from "../store/db";
import type { WriteBatch } from "../store/write-batch";
import { type CallRow, capResult, nowIso, type OutcomeColumns, RESULT_STORE_MAX_BYTES } from "./call-row";
import { finishCall } from "./queries";
import { outcomeAction } from "./transition";

/** What running a call needs: the store, the call path's group commit and the way to the tool. */
export interface RunDeps {
  db: Db;
  writes: WriteBatch;
  log: Logger;
  callTool(server: string, tool: string, args: Record<string, unknown>): Promise<CallToolResult>;
}

/** A call that is already `running`, with its arguments parsed. */
export type RunnableCall = Pick<
  CallRow,
  "id" | "tool" | "server" | "remoteName" | "requesterName" | "destructive"
> & { args: Record<string, unknown> };

/**
 * Asks the tool server and records the outcome, `running → succeeded | failed`, with its audit
 * row in the same group-committed write, before resolving. Like `transition()`, it moves
 * only a call still `running`, and writes the audit row only when the call moved (`moved`).
 * Never throws for the tool's sake: a failure of the call is its outcome. Returns the columns
 * written and the full result, if any.
 */
export async function runCall(
  deps: RunDeps,
  call: RunnableCall,
): Promise<{ stored: OutcomeColumns & { status: "succeeded" | "failed" }; full: unknown; moved: boolean }> {
  const started = Date.now();
  let full: unknown;
  let truncatedNote: string | null = null;
  const stored: OutcomeColumns & { status: "succeeded" | "failed" } = {
    status: "failed",
    finishedAt: "",
    result: null,
    resultTruncated: false,
    errorCode: null,
    errorMessage: null,
  };
  try {
    const result = await deps.callTool(call.server, call.remoteName, call.args);
    full = result;
    const capped = capResult(result);
    stored.status = result.isError === true ? "failed" : "succeeded";
    stored.result = capped.text;
    stored.resultTruncated = capped.truncated;
    if (result.isError === true) {
      stored.errorCode = "tool_error";
      stored.errorMessage = "the tool reported an error";
    }
    if (capped.truncated) truncatedNote = `result stored truncated to ${RESULT_STORE_MAX_BYTES} bytes`;
  } catch (err) {
    stored.errorCode = err instanceof GatehouseError ? err.code : "internal";
    stored.errorMessage = err instanceof GatehouseError ? err.message : "the call failed unexpectedly";
    if (!(err instanceof GatehouseError)) deps.log.error(`call ${call.id} failed`, { error: String(err) });
  }
  stored.finishedAt = nowIso();
  const durationMs = Date.now() - started;
  let moved = false;
  await deps.writes.write(() => {
    moved = finishCall(deps.db, call.id, stored);
    if (!moved) return;
    writeAudit(deps.db, {
      actor: call.requesterName,
      action: outcomeAction(stored.status),
      subject: call.tool,
      callId: call.id,
      detail: [stored.errorMessage, truncatedNote].filter(Boolean).join("; ") || null,
      durationMs,
    });
  });
  return { stored, full, moved };
}
