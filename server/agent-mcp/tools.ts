import "server-only";
import type {
  CallToolResult,
  RequestId,
  ServerContext,
  Tool,
  ToolAnnotations,
} from "@modelcontextprotocol/server";
import { type AgentToolView, type CallView, isFinalCallStatus } from "@/lib/api-types";
import { GatehouseError } from "@/lib/errors";
import type { CallBroker, Requester } from "../calls/broker";
import { watchingCallStarts } from "../calls/run";
import { cleanDescription } from "../catalogue/definition";
import type { CallProgressEvent, EventBus } from "../events";
import type { Logger } from "../log";
import { inSpan, tracing } from "../tracing";
import { finalResult, type LinkContext, stillWaitingResult, text } from "./call-results";
import { rpcFailure } from "./rpc";
import { serverOf } from "./tool-names";
import { isServableInputSchema, isServableOutputSchema, withoutParamHeaders } from "./tool-schemas";

export { CALL_META_KEY, finalResult, type LinkContext, ownMeta, stillWaitingResult } from "./call-results";

/** The JSON-RPC error of a `tools/call` over the agent's `callsPerMinute` (data: `retryAfterSeconds`). */
export const RATE_LIMITED_RPC = -32029;

const PASSED_HINTS = ["destructiveHint", "idempotentHint", "openWorldHint"] as const;

/**
 * An enabled tool as the agent sees it. The server's annotations are untrusted: only the known
 * keys with the right types pass, and `readOnlyHint` says what Gatehouse enforces — a tool whose
 * calls wait for a reviewer is not read-only, whatever its server claims. The title, the output
 * schema (a client validates `structuredContent` against it) and the icons (only those the
 * catalogue let through: `data:` URIs) are passed when the tool has them. Both schemas are served
 * only as 2025 clients can take them (./tool-schemas.ts: one they cannot makes their whole
 * `tools/list` fail): an output schema that fails is left out, an input schema that fails is
 * served as `{type: "object"}` (calls are still checked against the real one). An input schema
 * is served without `x-mcp-header` declarations: Gatehouse checks no `Mcp-Param-*` header.
 */
export function toMcpTool(t: AgentToolView): Tool {
  const given = t.annotations ?? {};
  const annotations: ToolAnnotations = {};
  if (typeof given.title === "string") annotations.title = cleanDescription(given.title, 200);
  for (const key of PASSED_HINTS) {
    const v = given[key];
    if (typeof v === "boolean") annotations[key] = v;
  }
  annotations.readOnlyHint = !t.destructive;
  const inputSchema = isServableInputSchema(t.inputSchema)
    ? withoutParamHeaders(t.inputSchema)
    : { type: "object" as const };
  const server = serverOf(t.name);
  return {
    name: t.name,
    ...(typeof t.title === "string" && t.title !== "" ? { title: t.title } : {}),
    // Clients and models need something to read; an empty description says where the tool is from.
    description: t.description || `${t.name.slice(server.length + 1)} from server ${server}`,
    inputSchema,
    ...(isServableOutputSchema(t.outputSchema) ? { outputSchema: t.outputSchema } : {}),
    annotations,
    ...(t.icons && t.icons.length > 0 ? { icons: t.icons } : {}),
  };
}

/**
 * Everything an agent could see change in `tools/list` (title, schemas, annotations and icons
 * included), to compare before and after an event.
 */
export function toolsSignature(tools: AgentToolView[]): string {
  return JSON.stringify(tools.map(toMcpTool));
}

/**
 * What `callTool` reads of the `tools/call` handler's `ServerContext` (either era): the request's
 * id, its `_meta` (the progress token), its abort signal (the client's cancellation, or the
 * exchange ending) and `notify`, which puts a notification on the request's own stream.
 */
export type CallRequest = {
  mcpReq: Pick<ServerContext["mcpReq"], "id" | "_meta" | "signal" | "notify">;
  /** The HTTP request carrying it: its `traceparent` header is the parent of the call's span (traces). */
  http?: { req?: Request };
};

export interface CallContext {
  broker: CallBroker;
  bus: EventBus;
  log: Logger;
  requester: Requester;
  /** `approvals.waitSeconds`: how long a destructive call is held open. */
  waitSeconds: number;
  /** Gap between progress notifications while a call is held. */
  progressIntervalMs: number;
  /** Where the agent can check a call later (`GATEHOUSE_PUBLIC_ORIGIN` or the request's origin). */
  baseUrl: string;
  /** True once the session is being torn down (DELETE, idle, eviction, shutdown): not a cancellation. */
  closing(): boolean;
  /** A held request starts and ends (sessions holding a call are not evicted). */
  holding(delta: 1 | -1): void;
  /** Ends the SSE stream of a request the client cancelled (the SDK sends it no response). */
  endStream(requestId: RequestId): void;
  /**
   * Aborted when Gatehouse stops holding calls of this server's requests (shutdown, in either
   * era): a held call is then answered as it stands, still pending, and stays in the store.
   * Absent: only the request's own signal ends a hold.
   */
  release?: AbortSignal;
}

/**
 * How long a destructive call is held: `approvals.waitSeconds`, one second short when that is 10 s
 * or more. A client whose request timeout equals `waitSeconds` (the SDK's default timeout is 60 s,
 * like `waitSeconds`) started its clock before ours, and would otherwise give up first — and its
 * cancellation would withdraw the call instead of hearing that it is still pending.
 */
export function holdSeconds(waitSeconds: number): number {
  return waitSeconds >= 10 ? waitSeconds - 1 : waitSeconds;
}

/** How far a progress value moves past the last one sent when nothing else moves it. */
const PROGRESS_NUDGE = 1e-6;

/**
 * A value above `x` by {@link PROGRESS_NUDGE}, or by a few units in the last place where that is
 * lost to rounding (a server's values may be as large as it likes).
 */
export function above(x: number): number {
  // Nothing sent yet (-Infinity): anything is above it.
  if (!Number.isFinite(x)) return x;
  return x + Math.max(PROGRESS_NUDGE, Math.abs(x) * Number.EPSILON * 4);
}

/**
 * The progress notifications of one `tools/call` request, sent with the agent's progress token
 * (nothing without one) and never after {@link AgentProgress.end}. Two sources share one scale,
 * as every value must be above the one before: Gatehouse's own while it holds the call — the
 * seconds waited, of the hold's seconds — and the tool server's once the call runs (its
 * `call.progress` events), moved up by a `base` fixed at its first notification: 0 for a call
 * that ran at once (the agent sees the server's own numbers), just above the last value sent
 * for a held call (`base + progress` of `base + total`). A server value not above the last one
 * sent (a server going back) is dropped. Once the server has reported, Gatehouse's own
 * notifications move on by a nudge only, keeping the server's total. A total below the value it
 * goes with is left out.
 */
class AgentProgress {
  private last = Number.NEGATIVE_INFINITY;
  private lastTotal: number | undefined;
  private base: number | null = null;
  private unfollow: (() => void) | null = null;
  private ended = false;

  constructor(
    private readonly ctx: CallContext,
    private readonly req: CallRequest,
    private readonly signal: AbortSignal,
  ) {}

  /** Gatehouse's own notification: `seconds` waited of `total`. */
  own(seconds: number, total: number, message: string): void {
    if (this.base === null) this.send(Math.max(seconds, above(this.last)), total, message);
    else this.send(above(this.last), this.lastTotal, message);
  }

  /** Forwards the tool server's progress on call `id` from now until {@link end}. */
  follow(id: string): void {
    if (this.req.mcpReq._meta?.progressToken === undefined || this.unfollow || this.ended) return;
    this.unfollow = this.ctx.bus.subscribeProgress(id, (e) => this.upstream(e));
  }

  /** No notification after this: the result's turn. */
  end(): void {
    this.ended = true;
    this.unfollow?.();
    this.unfollow = null;
  }

  private upstream(e: CallProgressEvent): void {
    this.base ??= this.last === Number.NEGATIVE_INFINITY ? 0 : above(this.last);
    const value = this.base + e.progress;
    if (!(value > this.last)) return;
    this.send(value, e.total === undefined ? undefined : this.base + e.total, e.message);
  }

  private send(progress: number, total: number | undefined, message: string | undefined): void {
    const token = this.req.mcpReq._meta?.progressToken;
    if (token === undefined || this.ended || this.signal.aborted || !Number.isFinite(progress)) return;
    // Every value above the one before, whatever rounding made of the sum that gave it.
    if (!(progress > this.last)) return;
    this.last = progress;
    this.lastTotal = total;
    const params = {
      progressToken: token,
      progress,
      ...(total !== undefined && Number.isFinite(total) && total >= progress ? { total } : {}),
      ...(message !== undefined ? { message } : {}),
    };
    this.req.mcpReq
      .notify({ method: "notifications/progress", params })
      .catch((err: unknown) => this.ctx.log.debug(`progress not sent: ${String(err)}`));
  }
}

/**
 * `tools/call`: refusals become an `isError` result saying why; a read-only tool answers with its
 * result; a destructive one becomes the same pending call as `POST /api/calls` and the request
 * is held until a decision (or `waitSeconds`), with progress notifications when the client gave a
 * progress token. The client's cancellation withdraws the pending call. Resource links in the
 * tool's result reach the agent as `gatehouse://` URIs it may read (`links`, {@link finalResult}).
 * With a progress token, the tool server's own progress on the call, while it runs, reaches the
 * agent too (see {@link AgentProgress}), for a call that runs at once and a held one alike.
 * `req`: the handler's `ServerContext` (what of it is read: {@link CallRequest}); a hold ends
 * when its signal aborts or `ctx.release` does. `answerPending`: answers a call that waits for a
 * reviewer at once instead of holding the request (a 2026-07-28 task, tasks.ts); absent, the
 * call is held.
 */
export function callTool<Pending = never>(
  ctx: CallContext,
  params: { name: string; arguments?: Record<string, unknown> },
  req: CallRequest,
  links: LinkContext,
  answerPending?: (call: CallView) => Pending,
): Promise<CallToolResult | Pending> {
  if (!tracing()) return answerCall(ctx, params, req, links, answerPending);
  const attributes = {
    "mcp.method.name": "tools/call",
    "gen_ai.tool.name": params.name.slice(0, 128),
    "gen_ai.operation.name": "execute_tool",
    "jsonrpc.request.id": String(req.mcpReq.id),
  };
  // A client may carry its trace in the request's _meta (as the MCP conventions say) rather than a header.
  const carried = (req.mcpReq._meta as { traceparent?: unknown } | undefined)?.traceparent;
  const traceparent =
    typeof carried === "string" ? carried : (req.http?.req?.headers.get("traceparent") ?? null);
  // The name is the agent's text: in the span's name only when it could be a tool's.
  const target = /^[A-Za-z0-9_.-]{1,128}$/.test(params.name) ? ` ${params.name}` : "";
  return inSpan(`tools/call${target}`, { kind: "server", attributes, traceparent }, (span) =>
    answerCall(ctx, params, req, links, answerPending, span.traceparent),
  );
}

async function answerCall<Pending>(
  ctx: CallContext,
  params: { name: string; arguments?: Record<string, unknown> },
  req: CallRequest,
  links: LinkContext,
  answerPending?: (call: CallView) => Pending,
  traceparent: string | null = null,
): Promise<CallToolResult | Pending> {
  const signal = ctx.release ? AbortSignal.any([req.mcpReq.signal, ctx.release]) : req.mcpReq.signal;
  const progress = new AgentProgress(ctx, req, signal);
  try {
    let outcome: Awaited<ReturnType<CallBroker["request"]>>;
    try {
      outcome = await watchingCallStarts(
        (id) => progress.follow(id),
        () =>
          ctx.broker.request(
            ctx.requester,
            { tool: params.name, arguments: params.arguments ?? {} },
            traceparent,
          ),
      );
    } catch (err) {
      // Over the agent's pace: no answer about the call but about the agent, to back off on.
      if (
        err instanceof GatehouseError &&
        (err.code === "rate_limited" || err.code === "too_many_concurrent_calls")
      ) {
        throw rpcFailure(RATE_LIMITED_RPC, err.message, {
          code: err.code,
          retryAfterSeconds: err.retryAfterSeconds,
        });
      }
      if (err instanceof GatehouseError) return text(`Refused (${err.code}): ${err.message}`, null);
      throw err;
    }
    const checkUrl = `${ctx.baseUrl}/api/calls/${outcome.call.id}`;
    if (outcome.httpStatus === 200 || isFinalCallStatus(outcome.call.status)) {
      const answer = finalResult(outcome.call, checkUrl, links);
      // The links it carries are readable on every replica before the agent sees them.
      await links.listed.linked.settled();
      return answer;
    }
    if (answerPending) return answerPending(outcome.call);
    return await hold(ctx, outcome.call, { id: req.mcpReq.id, signal }, checkUrl, links, progress);
  } finally {
    progress.end();
  }
}

async function hold(
  ctx: CallContext,
  call: CallView,
  request: { id: RequestId; signal: AbortSignal },
  checkUrl: string,
  links: LinkContext,
  progress: AgentProgress,
): Promise<CallToolResult> {
  const { id } = call;
  const seconds = holdSeconds(ctx.waitSeconds);
  const started = Date.now();
  let running = false;
  const waited = () => (Date.now() - started) / 1000;
  const tick = () => {
    const so = `${Math.round(waited())} of ${seconds} s`;
    const message = running
      ? `call ${id} approved; running (${so})`
      : `waiting for a reviewer to approve call ${id} (${so})`;
    progress.own(waited(), seconds, message);
  };
  // From now: the call runs only once approved, and its server's progress is published then.
  progress.follow(id);
  tick();
  const timer = setInterval(tick, ctx.progressIntervalMs);
  timer.unref();
  const unsubscribe = ctx.bus.subscribe((e) => {
    if (e.type !== "call" || e.id !== id || e.status !== "running") return;
    running = true;
    progress.own(waited(), seconds, `call ${id} approved; running`);
  });
  ctx.holding(1);
  try {
    const view = await ctx.broker.wait(id, seconds, request.signal);
    if (request.signal.aborted && !ctx.closing()) {
      // notifications/cancelled from the client: it no longer wants the call made.
      try {
        await ctx.broker.withdraw(ctx.requester, id);
      } catch (err) {
        if (!(err instanceof GatehouseError)) throw err;
        ctx.log.info(`call ${id} was not withdrawn: ${err.message}`);
      }
      ctx.endStream(request.id);
    }
    // After a cancellation or teardown the SDK sends nothing; the call stays in the store.
    if (!isFinalCallStatus(view.status)) return stillWaitingResult(view, Math.round(waited()), checkUrl);
    const answer = finalResult(view, checkUrl, links);
    await links.listed.linked.settled();
    return answer;
  } finally {
    clearInterval(timer);
    unsubscribe();
    ctx.holding(-1);
  }
}
