import "server-only";
import type {
  CallToolResult,
  Client,
  ListToolsResult,
  RequestOptions,
  Tool,
} from "@modelcontextprotocol/client";
import type { ServerState } from "@/lib/api-types";
import { GatehouseError } from "@/lib/errors";
import type { ServerConfig } from "../config";
import type { Logger } from "../log";
import { requestErrorForAgents, unavailableForAgents } from "./agent-facing";
import { answerOf, progressRoute } from "./client";
import { classifyFailure, failureContext, requestTimedOut, SessionLostError, unreached } from "./failures";
import { collectPages } from "./pages";
import { isSignInRequired } from "./sign-in";
import { MAX_LIST_TTL_MS, MAX_TOOL_PAGES, type UpstreamObserver, watchUntil } from "./supervision";

// The requests made over a supervisor's connection (the tool listing, tool calls, reads), and what
// the last listing left, apart from the state machine in supervisor.ts that keeps it up.

/** The supervisor's connection as it is at one moment: read afresh at each use, never kept. */
export interface ConnectionView {
  /** The number of the live connection; a later one has a higher number. */
  gen: number;
  state: ServerState;
  /** The live connection's client (also while it is connecting); null when there is none. */
  client: Client | null;
  /** The reason of the last failure; null since the last connection became ready. */
  lastError: string | null;
}

/** What the request side needs of the state machine it runs on. */
export interface RequestHost {
  readonly config: ServerConfig;
  readonly log: Logger;
  connection(): ConnectionView;
  /** The connection of generation `gen` failed with `err` (a later generation's is ignored). */
  failWith(gen: number, err: unknown): void;
  /** Asks for a paced re-list of the tools, which also checks that the connection still works. */
  scheduleRefresh(): void;
  /** Receives every complete tool list of the live connection (awaited); must not throw or reject. */
  onTools(tools: Tool[]): void | Promise<void>;
  /** Hears each listing's time and outcome (metrics); must not throw. */
  onUpstream?: UpstreamObserver;
}

/**
 * Lists a server's tools page by page, not the SDK's listTools(), which reads every page or
 * fails: a server that never stops paging is read for {@link MAX_TOOL_PAGES} pages, and what
 * they held is its list. `freshForMs` is how long the list is fresh by the server's cache hint
 * (a 2026-07-28 result's `ttlMs`, clamped to [0, {@link MAX_LIST_TTL_MS}]; 0 without one).
 */
async function listToolPages(
  client: Client,
  timeoutMs: number,
): Promise<{ tools: Tool[]; freshForMs: number }> {
  let ttlMs: unknown;
  const tools: Tool[] = await collectPages(
    async (params) => {
      const res: ListToolsResult = await client.request(
        { method: "tools/list", params: params ?? {} },
        { timeout: timeoutMs },
      );
      // The first page's hint speaks for the list (as the SDK's own cache reads it).
      if (!params) ttlMs = (res as { ttlMs?: unknown }).ttlMs;
      return { items: res.tools, nextCursor: res.nextCursor };
    },
    { maxPages: MAX_TOOL_PAGES },
  );
  const freshForMs =
    typeof ttlMs === "number" && Number.isFinite(ttlMs) ? Math.min(Math.max(0, ttlMs), MAX_LIST_TTL_MS) : 0;
  return { tools, freshForMs };
}

/**
 * Runs requests on the connection a {@link RequestHost} keeps: each with the server's deadline,
 * refused while the connection is not ready, and its failure told as agents may hear it. A
 * listing or a re-list that fails is the connection's failure, reported to the host.
 */
export class ServerRequests {
  /** The tools of the last listing by name, as the SDK is given them with each call. */
  private listedDefinitions = new Map<string, Tool>();
  private listed = 0;
  private freshUntil = 0;
  private refreshing: Promise<void> | null = null;
  /** Checks run on every state change of the host: the waits of {@link nextReady}. */
  private readonly stateWatchers = new Set<() => void>();

  constructor(private readonly host: RequestHost) {}

  /** The host's state changed (or it stopped): the waits of {@link nextReady} look again. */
  stateChanged(): void {
    for (const check of [...this.stateWatchers]) check();
  }

  /** How many tools the last listing held (0 before the first). */
  get listedTools(): number {
    return this.listed;
  }

  /**
   * Until when the last listing is fresh by the server's own cache hint (a 2026-07-28 result's
   * `ttlMs`, at most {@link MAX_LIST_TTL_MS}): the periodic refresh skips a fresh list. A
   * `list_changed`, a reconnect or a failed request still re-list at once.
   */
  get listFreshUntil(): number {
    return this.freshUntil;
  }

  /**
   * Lists the tools on the host's connection of generation `gen` (also while it is connecting)
   * and, if it is still the live one when the list is complete, keeps the list and hands it to
   * {@link RequestHost.onTools}. Throws what the listing met; a later generation's list is dropped.
   */
  async listTools(gen: number): Promise<void> {
    const { client } = this.host.connection();
    if (!client) return;
    const started = performance.now();
    const observe = (outcome: "ok" | "timeout" | "error") =>
      this.host.onUpstream?.(
        this.host.config.name,
        "tools/list",
        outcome,
        (performance.now() - started) / 1000,
      );
    let listing: Awaited<ReturnType<typeof listToolPages>>;
    try {
      listing = await listToolPages(client, this.host.config.timeoutMs);
    } catch (err) {
      observe(requestTimedOut(err) ? "timeout" : "error");
      throw err;
    }
    observe("ok");
    const { tools, freshForMs } = listing;
    if (gen !== this.host.connection().gen) return;
    this.freshUntil = Date.now() + freshForMs;
    this.listed = tools.length;
    this.listedDefinitions = new Map(tools.map((t) => [t.name, t]));
    await this.host.onTools(tools);
  }

  /**
   * Re-lists tools now if ready; concurrent calls share one refresh. A refresh that fails is a
   * connection that fails (never `ready` with a list nobody could fetch): backoff, `failed` or,
   * for a lost session, a new one at once, which lists the tools itself and is awaited here.
   */
  async refreshTools(): Promise<void> {
    const { gen, state } = this.host.connection();
    if (state !== "ready") return;
    if (this.refreshing) return this.refreshing;
    this.refreshing = this.listTools(gen)
      .catch(async (err) => {
        this.host.failWith(gen, err);
        if (err instanceof SessionLostError) await this.nextReady(gen).catch(() => undefined);
      })
      .finally(() => {
        this.refreshing = null;
      });
    return this.refreshing;
  }

  /**
   * Calls a tool on this server with the server's `timeoutMs`. On timeout the SDK sends
   * `notifications/cancelled` and the caller gets `upstream_timeout`. `onProgress` (default none)
   * asks for the server's progress and hears each notification (untrusted) until the answer.
   * Progress never extends the deadline (no `resetTimeoutOnProgress`): a server that kept
   * reporting would never time out; a server whose calls run long needs a longer `timeoutMs`.
   * `traceparent` (traces; default none) is sent as the call's `_meta.traceparent`.
   */
  async callTool(
    name: string,
    args: Record<string, unknown>,
    opts: {
      signal?: AbortSignal;
      onProgress?: RequestOptions["onprogress"];
      traceparent?: string | null;
    } = {},
  ): Promise<CallToolResult> {
    const { signal, onProgress, traceparent } = opts;
    const { config } = this.host;
    const result = await this.read(async (client, options) => {
      const route = onProgress ? progressRoute(client, onProgress) : null;
      try {
        // The call's trace goes on in `_meta.traceparent`, where MCP carries W3C trace context
        // (SEP-414); over HTTP the transport sends it as the `traceparent` header too.
        const meta =
          route || traceparent
            ? {
                _meta: {
                  ...(route ? { progressToken: route.token } : {}),
                  ...(traceparent ? { traceparent } : {}),
                },
              }
            : {};
        // `timeoutMs` bounds the whole call, whatever the SDK does inside it (a 2026-07-28
        // `input_required` round sends the call again). The listed definition is given so the SDK
        // sends the right headers at once and never re-lists and re-sends the call on a header
        // mismatch (-32020); without its output schema, which the SDK would otherwise compile and
        // check results against (a server's broken schema would make every call fail here): the
        // agent's own client checks `structuredContent` against the schema Gatehouse serves it.
        // (The SDK's own maxTotalTimeout is checked only when progress arrives, and each round gets
        // a timeout of its own: the deadline is a signal of Gatehouse's.)
        const listed = this.listedDefinitions.get(name);
        const toolDefinition = listed ? { ...listed, outputSchema: undefined } : undefined;
        const deadline = deadlineFor(config.timeoutMs, signal);
        try {
          return await client.callTool(
            { name, arguments: args, ...meta },
            {
              ...options,
              signal: deadline.signal,
              ...(toolDefinition ? { toolDefinition } : {}),
            },
          );
        } finally {
          deadline.done();
        }
      } finally {
        route?.done();
      }
    });
    return answerOf(config.name, result as CallToolResult);
  }

  /**
   * Runs a request on the live connection with the server's deadline (tool calls, and an owner's
   * reads of resources and prompts). `server_unavailable` when not ready; a timeout becomes
   * `upstream_timeout`, anything else `upstream_error`. When the server has forgotten the
   * session (it restarted), a new one is started; a request that only reads is then run once
   * more on it, any other (a `tools/call`) fails saying it was not retried.
   */
  async read<T>(fn: (client: Client, options: RequestOptions) => Promise<T>): Promise<T> {
    const { gen, state, client } = this.host.connection();
    if (state !== "ready" || !client) throw this.unavailable(state);
    const { timeoutMs } = this.host.config;
    try {
      return await fn(client, { timeout: timeoutMs });
    } catch (err) {
      if (!(err instanceof SessionLostError) || !err.retrySafe) throw this.requestError(err, gen);
      this.host.failWith(gen, err);
      const next = await this.nextReady(gen);
      const retryGen = this.host.connection().gen;
      try {
        return await fn(next, { timeout: timeoutMs });
      } catch (again) {
        throw this.requestError(again, retryGen);
      }
    }
  }

  /**
   * The client of the first connection newer than generation `gen` to become ready. Fails with
   * `server_unavailable` when that connection fails first (or the supervisor stops), and with
   * `upstream_timeout` after `timeoutMs`.
   */
  nextReady(gen: number): Promise<Client> {
    const { name, timeoutMs } = this.host.config;
    const late = () =>
      new GatehouseError("upstream_timeout", `server ${name} was not ready again within ${timeoutMs} ms`);
    return watchUntil(this.stateWatchers, timeoutMs, late, () => {
      const now = this.host.connection();
      if (now.gen <= gen || now.state === "connecting") return undefined;
      if (now.state === "ready" && now.client) return now.client;
      throw this.unavailable(now.state);
    });
  }

  private unavailable(state: ServerState): GatehouseError {
    // The state alone: the last error is the server's words and Gatehouse's internals, for owners.
    return new GatehouseError("server_unavailable", unavailableForAgents(this.host.config.name, state));
  }

  /** The reason the connection of generation `gen` failed, if it has failed since. */
  private failureSince(gen: number): string | null {
    const now = this.host.connection();
    if (gen === now.gen || (now.state !== "backoff" && now.state !== "failed")) return null;
    return now.lastError;
  }

  /** What the caller of {@link read} gets for a request of generation `gen` that failed. */
  private requestError(err: unknown, gen: number): GatehouseError {
    if (err instanceof GatehouseError) return err;
    // A lost session, or a grant the authorization server no longer renews (needs_auth).
    if (err instanceof SessionLostError || isSignInRequired(err)) this.host.failWith(gen, err);
    // The server did not answer at all (refused, reset, an HTTP error, a broken stream): check at
    // once whether the connection still works, so the status does not say `ready` while it is not.
    else if (unreached(err)) this.host.scheduleRefresh();
    // When the connection failed under the request (oversized frame, process exit), the SDK
    // only says "Connection closed"; the reason is the failure the supervisor recorded.
    const failure = this.failureSince(gen);
    const { config } = this.host;
    const told = requestErrorForAgents(err, { name: config.name, timeoutMs: config.timeoutMs, failure });
    if (told.code === "upstream_error" && !(err instanceof SessionLostError)) {
      // Owners keep the detail; agents get what kind of failure it was (see agent-facing.ts).
      const why = failure ? ` (${failure})` : "";
      const { reason } = classifyFailure(err, failureContext(config));
      this.host.log.warn(`server ${config.name}: a request failed: ${reason}${why}`);
    }
    return told;
  }
}

/**
 * A signal that aborts after `ms` (a `TimeoutError`, as `AbortSignal.timeout`'s) or when `parent`
 * does, until `done`. Not `AbortSignal.timeout`: its timer keeps the signal, and with it every
 * listener on it, alive for the whole `ms` after the call has ended; the SDK's listener holds
 * the call's request and answer, so a busy server kept a minute of calls in memory
 * (docs/PERFORMANCE.md).
 */
export function deadlineFor(ms: number, parent?: AbortSignal): { signal: AbortSignal; done(): void } {
  const controller = new AbortController();
  const timer = setTimeout(
    () => controller.abort(new DOMException("the call's deadline passed", "TimeoutError")),
    ms,
  );
  const onAbort = () => controller.abort(parent?.reason);
  if (parent?.aborted) onAbort();
  else parent?.addEventListener("abort", onAbort, { once: true });
  return {
    signal: controller.signal,
    done: () => {
      clearTimeout(timer);
      parent?.removeEventListener("abort", onAbort);
    },
  };
}
