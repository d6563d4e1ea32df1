import "server-only";
import { AsyncLocalStorage } from "node:async_hooks";
import type { CallToolResult } from "@modelcontextprotocol/client";
import { GatehouseError } from "@/lib/errors";
import { cleanDescription } from "../catalogue/definition";
import type { CallProgressEvent, EventBus } from "../events";
import type { Logger } from "../log";
import { writeAudit } from "../store/audit";
import type { Db } from "../store/db";
import type { WriteBatch } from "../store/write-batch";
import { type CallRow, capResult, type OutcomeColumns, RESULT_STORE_MAX_BYTES } from "./call-row";
import { finishCall } from "./queries";
import { outcomeAction } from "./transition";

/** A progress notification of a running call, as its tool server sent it (untrusted). */
export interface ToolProgress {
  progress: number;
  total?: number;
  message?: string;
}

/** What running a call needs: the store, the call path's group commit, the bus and the way to the tool. */
export interface RunDeps {
  db: Db;
  writes: WriteBatch;
  log: Logger;
  /** Where the call's progress is published while it runs (`call.progress`). */
  bus: EventBus;
  /**
   * Asks the tool server. `onProgress` is to hear the server's progress notifications for this
   * call, from when it is asked until it answers.
   */
  callTool(
    server: string,
    tool: string,
    args: Record<string, unknown>,
    onProgress: (progress: ToolProgress) => void,
  ): Promise<CallToolResult>;
}

/** The longest progress message passed on, after cleaning (as a description is capped). */
export const PROGRESS_MESSAGE_MAX_CHARS = 200;

/** The least gap between two progress events of one call: at most ten a second pass. */
export const PROGRESS_GAP_MS = 100;

const startsWatched = new AsyncLocalStorage<(id: string) => void>();

/**
 * Runs `fn`, telling `onStart` the id of each call {@link runCall} starts within it (in its
 * asynchronous context): a call that runs at once for the request `fn` makes, so that this
 * request can follow the call's progress events before the call's id reaches it with the
 * outcome. A held call approved later runs in its reviewer's request, not here; its requester
 * learnt its id when it was held.
 */
export function watchingCallStarts<T>(onStart: (id: string) => void, fn: () => Promise<T>): Promise<T> {
  return startsWatched.run(onStart, fn);
}

/** Whether a progress notification can be passed on at all: its `progress` a finite number. */
function hasProgress(raw: ToolProgress): boolean {
  return typeof raw.progress === "number" && Number.isFinite(raw.progress);
}

/** A progress notification made fit to pass on (its `progress` checked by {@link hasProgress}). */
function progressEvent(id: string, raw: ToolProgress): CallProgressEvent {
  const { total, message } = raw as { total?: unknown; message?: unknown };
  const event: CallProgressEvent = { type: "call.progress", id, progress: raw.progress };
  if (typeof total === "number" && Number.isFinite(total)) event.total = total;
  if (typeof message === "string") {
    const clean = cleanDescription(message, PROGRESS_MESSAGE_MAX_CHARS).trim();
    if (clean !== "") event.message = clean;
  }
  return event;
}

/**
 * Publishes the progress a call's tool server reports as `call.progress` events: a notification
 * whose `progress` is no finite number is dropped, a `total` that is none left out, the message
 * cleaned and capped like a description (left out when nothing is left). At most one event per
 * {@link PROGRESS_GAP_MS} passes: the first at once, then, of those that came within the gap,
 * the last one when the gap ends (each says all the ones before it said). Only what passes is
 * cleaned, so a flood costs ten cleanings a second. `end()` publishes the one still held and
 * stops: nothing is published after it.
 */
function progressRelay(id: string, publish: (event: CallProgressEvent) => void) {
  let held: ToolProgress | null = null;
  let gap: NodeJS.Timeout | null = null;
  let ended = false;
  const pass = (raw: ToolProgress) => publish(progressEvent(id, raw));
  const openGap = () => {
    gap = setTimeout(() => {
      gap = null;
      const next = held;
      held = null;
      if (!next) return;
      pass(next);
      openGap();
    }, PROGRESS_GAP_MS);
    gap.unref();
  };
  return {
    report(raw: ToolProgress): void {
      if (ended || !hasProgress(raw)) return;
      if (gap) {
        held = raw;
        return;
      }
      pass(raw);
      openGap();
    },
    end(): void {
      if (ended) return;
      ended = true;
      if (gap) clearTimeout(gap);
      if (held) pass(held);
      held = null;
    },
  };
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
 *
 * The run time is the tool's alone: from the moment the call is sent to the tool server to the
 * moment its answer (or failure) came. The outcome sets `startedAt` and `finishedAt` to those two
 * moments and the audit row's `durationMs` to the span between them, so the call's view (which
 * subtracts the two) and its story's audit row give the same figure. The wait between the
 * decision and the send (a group commit, an approval's transaction) is no part of it.
 */
export async function runCall(
  deps: RunDeps,
  call: RunnableCall,
): Promise<{ stored: OutcomeColumns & { status: "succeeded" | "failed" }; full: unknown; moved: boolean }> {
  let full: unknown;
  let truncatedNote: string | null = null;
  const stored: OutcomeColumns & { status: "succeeded" | "failed" } = {
    status: "failed",
    startedAt: "",
    finishedAt: "",
    result: null,
    resultTruncated: false,
    errorCode: null,
    errorMessage: null,
  };
  const progress = progressRelay(call.id, (event) => deps.bus.publishProgress(event));
  startsWatched.getStore()?.(call.id);
  const sent = Date.now();
  let answered = sent;
  try {
    const result = await deps.callTool(call.server, call.remoteName, call.args, progress.report);
    answered = Date.now();
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
    // Not reassigned after a throw of capResult: the answer had come by then.
    if (full === undefined) answered = Date.now();
    stored.errorCode = err instanceof GatehouseError ? err.code : "internal";
    stored.errorMessage = err instanceof GatehouseError ? err.message : "the call failed unexpectedly";
    if (!(err instanceof GatehouseError)) deps.log.error(`call ${call.id} failed`, { error: String(err) });
  } finally {
    // Before the outcome is written and announced: whoever waits hears no progress after it.
    progress.end();
  }
  stored.startedAt = new Date(sent).toISOString();
  stored.finishedAt = new Date(answered).toISOString();
  const durationMs = answered - sent;
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
