import "server-only";
import { AsyncLocalStorage } from "node:async_hooks";
import type { CallToolResult } from "@modelcontextprotocol/client";
import { inArray, isNull, notInArray, or } from "drizzle-orm";
import { GatehouseError } from "@/lib/errors";
import { cleanDescription } from "../catalogue/definition";
import type { CallProgressEvent, EventBus } from "../events";
import type { Logger } from "../log";
import { outcomeUnknown } from "../mcp/failures";
import type { ReconnectWait, ReconnectWaitOptions } from "../mcp/manager";
import type { Db } from "../store/db";
import { calls, replicas } from "../store/schema";
import type { WriteBatch } from "../store/write-batch";
import { inCallSpan } from "../tracing";
import {
  type CallNotify,
  type CallRow,
  capResult,
  nowIso,
  type OutcomeColumns,
  RESULT_STORE_MAX_BYTES,
} from "./call-row";
import { finishCall, getCall } from "./queries";
import { type MovedCall, outcomeAction, transition } from "./transition";

/** A progress notification of a running call, as its tool server sent it (untrusted). */
export interface ToolProgress {
  progress: number;
  total?: number;
  message?: string;
}

/** What running a call needs: the store, the call path's group commit, the bus and the way to the tool. */
export interface RunDeps {
  db: Db;
  writes: Pick<WriteBatch, "write">;
  log: Logger;
  /** Where the call's progress is published while it runs (`call.progress`). */
  bus: EventBus;
  /**
   * Asks the tool server. `onProgress` is to hear the server's progress notifications for this
   * call, from when it is asked until it answers; `reconnect`, to wait for a server that is
   * coming back rather than fail at once, and to hear how long it waited (see `McpManager.callTool`).
   */
  callTool(
    server: string,
    tool: string,
    args: Record<string, unknown>,
    opts: {
      onProgress: (progress: ToolProgress) => void;
      reconnect: ReconnectWaitOptions;
      /** The run's span (traces): the tool server's request is traced under it. */
      traceparent?: string | null;
    },
  ): Promise<CallToolResult>;
  /** Told of a held call interrupted under its tool (`call.interrupted`), in the outcome's write. */
  notify?: CallNotify;
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
  "id" | "tool" | "server" | "remoteName" | "requesterName" | "destructive" | "expiresAt" | "approvalReason"
> & { args: Record<string, unknown> };

/** The statuses a run ends in. */
type RunStatus = "succeeded" | "failed" | "interrupted";

/** "waited 840 ms for server x to reconnect (it was in backoff)", for the outcome's audit row. */
function waitedText(server: string, wait: ReconnectWait): string {
  const was = wait.from === "backoff" ? "it was in backoff" : "it was connecting";
  const end = wait.to === "ready" ? "" : `; it was still not ready (${wait.to})`;
  return `waited ${wait.ms} ms for server ${server} to reconnect (${was})${end}`;
}

/**
 * Asks the tool server and records the outcome, `running → succeeded | failed | interrupted`, with
 * its audit row in the same group-committed write, before resolving. Like `transition()`, it moves
 * only a call still `running`, and writes the audit row only when the call moved (`moved`).
 * Never throws for the tool's sake: a failure of the call is its outcome. Returns the columns
 * written and the full result, if any.
 *
 * The run time is the tool's alone: from the moment the call is sent to the tool server to the
 * moment its answer (or failure) came. The outcome sets `startedAt` and `finishedAt` to those two
 * moments and the audit row's `durationMs` to the span between them, so the call's view (which
 * subtracts the two) and its story's audit row give the same figure. The wait between the
 * decision and the send (a group commit, an approval's transaction) is no part of it, nor is a
 * wait for a server that was reconnecting: the call waits for it (for at most the server's
 * `timeoutMs`, and an approved call never past its expiry) instead of failing at once, and the
 * outcome's audit row says how long.
 *
 * A destructive call whose request went out and got no answer (the server died or the connection
 * broke under it, or it timed out: `outcomeUnknown`) is `interrupted`, outcome unknown, as after a
 * Gatehouse crash: the server may have done the work before it went, so "failed" would be false,
 * and it is never re-run. A read-only call failing that way is `failed`: nothing it may have done
 * needs a reviewer. A call refused before anything was sent is `failed` either way.
 */
export function runCall(
  deps: RunDeps,
  call: RunnableCall,
  /**
   * The agent's request span, when the call runs within that request: its request to the tool
   * server is then traced straight under it. Absent (a held call run later, by an approval), the
   * run gets a span of its own under the call's remembered trace.
   */
  inRequest?: string | null,
): ReturnType<typeof runNow> {
  if (inRequest !== undefined) return runNow(deps, call, inRequest);
  // Traced as part of the agent's request, even when a reviewer's approval runs it later.
  return inCallSpan(call.id, "run", { attributes: { "gatehouse.call.id": call.id } }, async (span) => {
    const outcome = await runNow(deps, call, span.traceparent);
    span.setAttribute("gatehouse.call.status", outcome.stored.status);
    return outcome;
  });
}

async function runNow(
  deps: RunDeps,
  call: RunnableCall,
  traceparent: string | null,
): Promise<{ stored: OutcomeColumns & { status: RunStatus }; full: unknown; moved: boolean }> {
  let full: unknown;
  let truncatedNote: string | null = null;
  let waitedNote: string | null = null;
  const stored: OutcomeColumns & { status: RunStatus } = {
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
  let sent = Date.now();
  let answered = sent;
  const reconnect: ReconnectWaitOptions = {
    ...(call.expiresAt ? { notAfter: Date.parse(call.expiresAt) } : {}),
    onWaited: (wait) => {
      // The run time starts when the call is sent, after the wait.
      sent = Date.now();
      waitedNote = waitedText(call.server, wait);
    },
  };
  try {
    const result = await deps.callTool(call.server, call.remoteName, call.args, {
      onProgress: progress.report,
      reconnect,
      traceparent,
    });
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
    else if (call.destructive && outcomeUnknown(err)) {
      stored.status = "interrupted";
      stored.errorCode = "interrupted";
      stored.errorMessage = `outcome unknown (the tool may have run; it is not run again): ${err.message}`;
    }
  } finally {
    // Before the outcome is written and announced: whoever waits hears no progress after it.
    progress.end();
  }
  stored.startedAt = new Date(sent).toISOString();
  stored.finishedAt = new Date(answered).toISOString();
  const durationMs = answered - sent;
  let moved = false;
  // Only a call that waited for a reviewer was ever told of (as at a restart).
  const told = stored.status === "interrupted" && call.approvalReason !== null;
  // On PostgreSQL the conditional update decides alone (PostgreSQL re-checks `status = 'running'`
  // on the row as last committed), and the rest only follows from its answer: the outcome and its
  // audit row are one statement, run outside any transaction (`alone`) unless a notification
  // goes with them; then at READ COMMITTED. SERIALIZABLE added nothing here but conflicts:
  // concurrent outcomes touch the same index pages (time-ordered ids), so under 32 concurrent
  // calls they failed one another past every retry.
  await deps.writes.write(
    async (tx) => {
      // `running →` outcome is a conditional update (see `finishCall`): written once, whichever
      // replica's restart or outcome reached the row first. `moved` is set by every attempt, so a
      // retried transaction (PostgreSQL) leaves the last attempt's answer.
      moved = await finishCall(tx, call.id, stored, {
        actor: call.requesterName,
        action: outcomeAction(stored.status),
        subject: call.tool,
        detail: [waitedNote, stored.errorMessage, truncatedNote].filter(Boolean).join("; ") || null,
        // An interrupted call has no run time: the tool's answer never came.
        durationMs: stored.status === "interrupted" ? null : durationMs,
      });
      if (moved && told) await deps.notify?.(tx, "call.interrupted", await getCall(tx, call.id));
    },
    { isolation: "read committed", alone: !told },
  );
  return { stored, full, moved };
}

/**
 * Marks every call left `running` by a replica that is gone (Gatehouse stopped, or crashed, while
 * its tool ran) as `interrupted`: its outcome is unknown, and it is never run again. Gone: one of
 * `dead` (replicas whose lease ran out, their rows not yet deleted), or named by no replica row
 * (a process that stopped, a broker without a registry), or none recorded (rows from before
 * replicas were). Only a call that waited for a reviewer is told of (`call.interrupted`); a
 * read-only one never was. Run at start and whenever replicas are found dead; idempotent, and
 * exactly once per call across replicas (a conditional update, see `transition`).
 */
export async function interruptLeftRunning(
  deps: { db: Db; bus: EventBus; notify?: CallNotify },
  dead: string[],
): Promise<MovedCall[]> {
  const { db, bus } = deps;
  return await transition(db, bus, {
    from: "running",
    to: "interrupted",
    where: or(
      isNull(calls.replica),
      dead.length > 0 ? inArray(calls.replica, dead) : undefined,
      notInArray(calls.replica, db.select({ id: replicas.id }).from(replicas)),
    ),
    alsoWrite: async (tx, c) => {
      if (c.approvalReason !== null) await deps.notify?.(tx, "call.interrupted", c);
    },
    set: {
      finishedAt: nowIso(),
      errorCode: "interrupted",
      errorMessage: "Gatehouse stopped while the call was running: outcome unknown",
    },
    actor: "gatehouse",
    audit: () => ({ detail: "outcome unknown" }),
  });
}
