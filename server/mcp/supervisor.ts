import "server-only";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { RequestOptions } from "@modelcontextprotocol/sdk/shared/protocol.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import {
  type CallToolResult,
  ErrorCode,
  ListRootsRequestSchema,
  McpError,
  type Tool,
  ToolListChangedNotificationSchema,
} from "@modelcontextprotocol/sdk/types.js";
import type { Agent } from "undici";
import type { ServerState } from "@/lib/api-types";
import { GatehouseError } from "@/lib/errors";
import type { ServerConfig } from "../config";
import type { Logger } from "../log";
import { createGuardedAgent, guardedFetch } from "../net/guarded-fetch";
import { GuardedHttpTransport } from "./http-transport";
import { collectPages } from "./pages";
import { BoundedStdioTransport, LineRing } from "./stdio-transport";

/** Most pages of `tools/list` followed in one refresh. */
export const MAX_TOOL_PAGES = 20;
/** Backoff after a failure: base 1 s doubling to a 60 s cap, with jitter in [50 %, 100 %]. */
export const BACKOFF = { baseMs: 1000, capMs: 60_000 } as const;
/** A connection must stay ready this long before the backoff exponent resets. */
export const STABLE_AFTER_MS = 60_000;
/**
 * A crash loop: this many crashes within `windowMs` stop the retries until the owner presses
 * Reconnect. Every failure of a stdio server counts (its process died or never started); an
 * HTTP server's failures count only after it was ready, so an endpoint that is merely down
 * keeps being retried at the backoff cap.
 */
export const CRASH_LOOP = { crashes: 5, windowMs: 3 * 60_000 } as const;
/** Transitions kept for the owner's view of a server's history. */
export const HISTORY_LENGTH = 50;
/** Coalesces bursts of `notifications/tools/list_changed`. */
export const REFRESH_DEBOUNCE_MS = 300;

export interface SupervisorSnapshot {
  name: string;
  state: ServerState;
  lastError: string | null;
  nextRetryAt: string | null;
  readySince: string | null;
  serverInfo: { name: string; version: string } | null;
  listedTools: number;
  stderrTail: string[];
  /** Newest last: state changes with their time and, for failures, the reason. */
  history: { at: string; state: ServerState; detail: string | null }[];
}

export interface SupervisorDeps {
  log: Logger;
  /** Periodic refresh of the tool list; 0 disables it. */
  refreshSeconds: number;
  onState(snapshot: SupervisorSnapshot): void;
  /** Receives every complete tool list; must not throw. */
  onTools(server: ServerConfig, tools: Tool[]): void;
  /** Backoff steps; default {@link BACKOFF}. Tests pass smaller ones to run a crash loop quickly. */
  backoff?: { baseMs: number; capMs: number };
}

/** Delay before retry number `attempt` (1-based), with jitter from `random` in [0, 1). */
export function backoffDelay(
  attempt: number,
  random: number = Math.random(),
  steps: { baseMs: number; capMs: number } = BACKOFF,
): number {
  const exp = Math.min(steps.capMs, steps.baseMs * 2 ** Math.max(0, attempt - 1));
  return Math.round(exp * (0.5 + random / 2));
}

function messageOf(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  // undici reports every network failure as "fetch failed" with the reason (the outbound guard's
  // refusal, ECONNREFUSED, ...) only in `cause`; without it lastError would not say what happened.
  const cause = err.cause instanceof Error ? err.cause.message : "";
  // The guard's own refusals say everything the owner needs ("refused: localhost resolves to …").
  if (cause.startsWith("refused: ")) return cause;
  return cause && !err.message.includes(cause) ? `${err.message}: ${cause}` : err.message;
}

/**
 * Keeps one MCP server connected: `dark` (disabled) or `connecting → ready`, and on any failure
 * `backoff` until the next try. Reads (`snapshot`) never touch the connection, so a hung server
 * can never block them. Events from an earlier connection are ignored by generation number.
 */
export class ServerSupervisor {
  private state: ServerState;
  private lastError: string | null = null;
  private nextRetryAt: number | null = null;
  private readySince: number | null = null;
  private serverInfo: { name: string; version: string } | null = null;
  private listedTools = 0;
  private client: Client | null = null;
  private transport: Transport | null = null;
  private agent: Agent | null = null;
  private generation = 0;
  private attempt = 0;
  private retryTimer: NodeJS.Timeout | null = null;
  private stableTimer: NodeJS.Timeout | null = null;
  private refreshTimer: NodeJS.Timeout | null = null;
  private periodicTimer: NodeJS.Timeout | null = null;
  private refreshing: Promise<void> | null = null;
  private readonly stderr = new LineRing();

  constructor(
    readonly config: ServerConfig,
    private readonly deps: SupervisorDeps,
  ) {
    this.state = config.enabled ? "connecting" : "dark";
  }

  start(): void {
    if (!this.config.enabled) {
      this.setState("dark");
      return;
    }
    void this.connect();
    if (this.deps.refreshSeconds > 0) {
      this.periodicTimer = setInterval(() => this.scheduleRefresh(), this.deps.refreshSeconds * 1000);
      this.periodicTimer.unref();
    }
  }

  snapshot(): SupervisorSnapshot {
    return {
      name: this.config.name,
      state: this.state,
      lastError: this.lastError,
      nextRetryAt: this.nextRetryAt ? new Date(this.nextRetryAt).toISOString() : null,
      readySince: this.readySince ? new Date(this.readySince).toISOString() : null,
      serverInfo: this.serverInfo,
      listedTools: this.listedTools,
      stderrTail: this.stderr.snapshot(),
      history: [...this.history],
    };
  }

  private readonly history: SupervisorSnapshot["history"] = [];
  private crashTimes: number[] = [];

  private setState(state: ServerState, detail: string | null = null): void {
    this.state = state;
    this.history.push({ at: new Date().toISOString(), state, detail });
    if (this.history.length > HISTORY_LENGTH) this.history.shift();
    this.deps.onState(this.snapshot());
  }

  private makeTransport(): Transport {
    const c = this.config;
    if (c.transport === "stdio") {
      return new BoundedStdioTransport({
        command: c.command ?? "",
        args: c.args,
        env: c.env,
        cwd: c.cwd,
        maxFrameBytes: c.maxFrameBytes,
        stderr: this.stderr,
      });
    }
    this.agent ??= createGuardedAgent({
      server: c.name,
      allowPrivate: c.allowPrivate,
      connectTimeoutMs: c.timeoutMs,
    });
    const gen = this.generation;
    return new GuardedHttpTransport({
      url: new URL(c.url ?? ""),
      kind: c.transport === "sse" ? "sse" : "http",
      headers: c.headers,
      fetch: guardedFetch(this.agent, {
        allowPrivate: c.allowPrivate,
        server: c.name,
        credentialHeaders: Object.keys(c.headers),
        minIntervalMs: c.minIntervalMs,
      }),
      maxFrameBytes: c.maxFrameBytes,
      onFatal: (error) => this.fail(gen, error.message),
    });
  }

  private async connect(): Promise<void> {
    // A reconnect or retry that was already on its way when stop() ran must not dial again.
    if (this.state === "closed") return;
    const gen = ++this.generation;
    this.clearTimer("retryTimer");
    this.nextRetryAt = null;
    this.setState("connecting");
    const client = new Client(
      { name: "gatehouse", version: "0.1.0" },
      { capabilities: { roots: { listChanged: false } } },
    );
    // Roots: Gatehouse exposes no filesystem to tool servers. Sampling and elicitation are not
    // declared, so the SDK refuses them with a JSON-RPC error.
    client.setRequestHandler(ListRootsRequestSchema, async () => ({ roots: [] }));
    client.setNotificationHandler(ToolListChangedNotificationSchema, async () => {
      if (gen === this.generation) this.scheduleRefresh();
    });
    let transport: Transport;
    try {
      transport = this.makeTransport();
    } catch (err) {
      this.fail(gen, `cannot start: ${messageOf(err)}`);
      return;
    }
    client.onclose = () => this.fail(gen, this.lastErrorOf(gen) ?? "connection closed");
    client.onerror = (err) => {
      if (gen !== this.generation) return;
      this.pendingError = messageOf(err);
      this.deps.log.warn(`server ${this.config.name}: ${messageOf(err)}`);
    };
    this.client = client;
    this.transport = transport;
    try {
      await client.connect(transport, { timeout: this.config.timeoutMs });
      if (gen !== this.generation) return;
      const info = client.getServerVersion();
      this.serverInfo = info ? { name: String(info.name), version: String(info.version) } : null;
      await this.listAndPublish(gen);
      if (gen !== this.generation) return;
      this.lastError = null;
      this.pendingError = null;
      this.readySince = Date.now();
      this.setState("ready");
      this.deps.log.info(`server ${this.config.name} ready`, { tools: this.listedTools });
      this.stableTimer = setTimeout(() => {
        if (gen === this.generation && this.state === "ready") this.attempt = 0;
      }, STABLE_AFTER_MS);
      this.stableTimer.unref();
    } catch (err) {
      this.fail(gen, messageOf(err));
    }
  }

  private pendingError: string | null = null;

  private lastErrorOf(gen: number): string | null {
    return gen === this.generation ? this.pendingError : null;
  }

  /** The connection of generation `gen` failed: tear it down and schedule the next try. */
  private fail(gen: number, reason: string): void {
    if (gen !== this.generation || this.state === "closed" || this.state === "backoff") return;
    const wasReady = this.state === "ready";
    this.generation++;
    this.lastError = reason;
    this.pendingError = null;
    this.readySince = null;
    this.clearTimer("stableTimer");
    void this.teardown();
    const now = Date.now();
    if (this.config.transport === "stdio" || wasReady) {
      this.crashTimes = [...this.crashTimes.filter((t) => now - t < CRASH_LOOP.windowMs), now];
      if (this.crashTimes.length >= CRASH_LOOP.crashes) {
        this.nextRetryAt = null;
        this.deps.log.error(
          `server ${this.config.name} failed ${this.crashTimes.length} times in ${CRASH_LOOP.windowMs / 60_000} minutes: not retrying until an owner reconnects it; last error: ${reason}`,
        );
        this.setState("failed", reason);
        return;
      }
    }
    this.attempt++;
    const delay = backoffDelay(this.attempt, Math.random(), this.deps.backoff);
    this.nextRetryAt = now + delay;
    this.deps.log.warn(`server ${this.config.name} failed: ${reason}; retry in ${delay} ms`);
    this.setState("backoff", reason);
    this.retryTimer = setTimeout(() => void this.connect(), delay);
    this.retryTimer.unref();
  }

  /** Teardowns still stopping an old child; `stop()` waits for them so none is orphaned. */
  private readonly teardowns = new Set<Promise<void>>();

  private teardown(): Promise<void> {
    const client = this.client;
    const transport = this.transport;
    this.client = null;
    this.transport = null;
    if (client) client.onclose = undefined;
    const done = (async () => {
      try {
        await (client ? client.close() : transport?.close());
      } catch (err) {
        this.deps.log.debug(`server ${this.config.name}: close failed: ${messageOf(err)}`);
      }
    })();
    this.teardowns.add(done);
    void done.finally(() => this.teardowns.delete(done));
    return done;
  }

  private clearTimer(which: "retryTimer" | "stableTimer" | "refreshTimer" | "periodicTimer"): void {
    const t = this[which];
    if (t) {
      clearTimeout(t);
      this[which] = null;
    }
  }

  private async listAndPublish(gen: number): Promise<void> {
    const client = this.client;
    if (!client) return;
    const tools: Tool[] = await collectPages(
      async (params) => {
        const res = await client.listTools(params, { timeout: this.config.timeoutMs });
        return { items: res.tools, nextCursor: res.nextCursor };
      },
      { maxPages: MAX_TOOL_PAGES },
    );
    if (gen !== this.generation) return;
    this.listedTools = tools.length;
    this.deps.onTools(this.config, tools);
  }

  /** Debounced re-list of tools (list_changed notifications and the periodic timer). */
  scheduleRefresh(): void {
    if (this.refreshTimer) return;
    this.refreshTimer = setTimeout(() => {
      this.refreshTimer = null;
      void this.refreshTools();
    }, REFRESH_DEBOUNCE_MS);
    this.refreshTimer.unref();
  }

  /** Re-lists tools now if ready; concurrent calls share one refresh. */
  async refreshTools(): Promise<void> {
    if (this.state !== "ready") return;
    if (this.refreshing) return this.refreshing;
    const gen = this.generation;
    this.refreshing = this.listAndPublish(gen)
      .catch((err) => this.deps.log.warn(`server ${this.config.name}: refresh failed: ${messageOf(err)}`))
      .finally(() => {
        this.refreshing = null;
      });
    return this.refreshing;
  }

  /**
   * Calls a tool on this server with the server's `timeoutMs`. On timeout the SDK sends
   * `notifications/cancelled` and the caller gets `upstream_timeout`.
   */
  async callTool(name: string, args: Record<string, unknown>, signal?: AbortSignal): Promise<CallToolResult> {
    const result = (await this.read((client, options) =>
      client.callTool({ name, arguments: args }, undefined, { ...options, signal }),
    )) as CallToolResult;
    // The SDK fills in `content: []` when a result has none: that is no answer, not an empty success.
    if (result.content.length === 0 && result.structuredContent === undefined) {
      throw new GatehouseError(
        "upstream_error",
        `server ${this.config.name}: the server returned an empty result`,
      );
    }
    return result;
  }

  /** The reason the connection of generation `gen` failed, if it has failed since. */
  private failureSince(gen: number): string | null {
    if (gen === this.generation || (this.state !== "backoff" && this.state !== "failed")) return null;
    return this.lastError;
  }

  /**
   * Runs a request on the live connection with the server's deadline (tool calls, and an owner's
   * reads of resources and prompts). `server_unavailable` when not ready; a timeout becomes
   * `upstream_timeout`, anything else `upstream_error`.
   */
  async read<T>(fn: (client: Client, options: RequestOptions) => Promise<T>): Promise<T> {
    const client = this.client;
    if (this.state !== "ready" || !client) {
      const why = this.lastError ? `: ${this.lastError}` : "";
      throw new GatehouseError("server_unavailable", `server ${this.config.name} is ${this.state}${why}`);
    }
    const gen = this.generation;
    try {
      return await fn(client, { timeout: this.config.timeoutMs });
    } catch (err) {
      if (err instanceof GatehouseError) throw err;
      if (err instanceof McpError && err.code === ErrorCode.RequestTimeout) {
        throw new GatehouseError(
          "upstream_timeout",
          `server ${this.config.name} did not answer within ${this.config.timeoutMs} ms`,
          { cause: err },
        );
      }
      // When the connection failed under the request (oversized frame, process exit), the SDK
      // only says "Connection closed"; the reason is the failure the supervisor recorded.
      const failure = this.failureSince(gen);
      const why = failure ? ` (${failure})` : "";
      throw new GatehouseError("upstream_error", `server ${this.config.name}: ${messageOf(err)}${why}`, {
        cause: err,
      });
    }
  }

  /** Owner's "reconnect now": drops the current connection and dials at once. */
  reconnectNow(): void {
    if (!this.config.enabled || this.state === "closed") return;
    this.generation++;
    this.attempt = 0;
    this.crashTimes = [];
    this.clearTimer("retryTimer");
    this.clearTimer("stableTimer");
    void this.teardown().then(() => this.connect());
  }

  async stop(): Promise<void> {
    this.generation++;
    for (const t of ["retryTimer", "stableTimer", "refreshTimer", "periodicTimer"] as const)
      this.clearTimer(t);
    this.state = "closed";
    await this.teardown();
    await Promise.all([...this.teardowns]);
    await this.agent?.close().catch(() => undefined);
    this.agent = null;
    this.deps.onState(this.snapshot());
  }
}
