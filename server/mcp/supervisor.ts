import "server-only";
import type {
  CallToolResult,
  Client,
  ListToolsResult,
  RequestOptions,
  Tool,
  Transport,
} from "@modelcontextprotocol/client";
import type { ServerState } from "@/lib/api-types";
import { GatehouseError } from "@/lib/errors";
import type { ServerConfig } from "../config";
import { requestErrorForAgents, unavailableForAgents } from "./agent-facing";
import { answerOf, newClient, progressRoute } from "./client";
import { EraVerdict } from "./era";
import {
  classifyFailure,
  connectionClosed,
  type Failure,
  failureContext,
  MODERN_PROTOCOL_VERSION,
  messageOf,
  negotiationFailed,
  SessionLostError,
  unreached,
} from "./failures";
import { ListenLoop } from "./listen";
import { collectPages } from "./pages";
import { RefreshPacing } from "./refresh-pacing";
import { BoundedStdioTransport, LineRing } from "./stdio-transport";
import {
  backoffDelay,
  CRASH_LOOP,
  HISTORY_LENGTH,
  MAX_LIST_TTL_MS,
  MAX_TOOL_PAGES,
  STABLE_AFTER_MS,
  type SupervisorDeps,
  type SupervisorSnapshot,
  watchUntil,
} from "./supervision";
import { createTransport, ServerAgent } from "./transports";

export type { SupervisorDeps, SupervisorSnapshot } from "./supervision";

/**
 * Keeps one MCP server connected: `dark` (disabled) or `connecting → ready`, and on a failure
 * `backoff` until the next try, or `failed` (a crash loop, or a refusal no retry can fix) until
 * the owner's Reconnect. Reads (`snapshot`) never touch the connection, so a hung server
 * can never block them. Events from an earlier connection are ignored by generation number.
 */
export class ServerSupervisor {
  private state: ServerState;
  private lastError: string | null = null;
  private nextRetryAt: number | null = null;
  private readySince: number | null = null;
  private serverInfo: { name: string; version: string } | null = null;
  private protocolVersion: string | null = null;
  private readonly era: EraVerdict;
  private listenLoop: ListenLoop | null = null;
  private listedTools = 0;
  /**
   * Until when the last listing is fresh by the server's own cache hint (a 2026-07-28 result's
   * `ttlMs`, at most {@link MAX_LIST_TTL_MS}): the periodic refresh skips a fresh list. A
   * `list_changed`, a reconnect or a failed request still re-list at once.
   */
  private listFreshUntil = 0;
  /** The tools of the last listing by name, as the SDK is given them with each call. */
  private listedDefinitions = new Map<string, Tool>();
  private client: Client | null = null;
  private transport: Transport | null = null;
  private generation = 0;
  private attempt = 0;
  private retryTimer: NodeJS.Timeout | null = null;
  private stableTimer: NodeJS.Timeout | null = null;
  private refreshing: Promise<void> | null = null;
  private readonly stderr = new LineRing();
  private readonly agent: ServerAgent;
  private readonly pacing: RefreshPacing;

  constructor(
    readonly config: ServerConfig,
    private readonly deps: SupervisorDeps,
  ) {
    this.state = config.enabled ? "connecting" : "dark";
    this.agent = new ServerAgent(config);
    this.era = new EraVerdict(config.transport);
    this.pacing = new RefreshPacing({
      run: () => this.refreshTools(),
      onNote: () => this.deps.onState(this.snapshot()),
      limits: deps.refreshLimits,
      clock: deps.clock,
      periodicDue: () => Date.now() >= this.listFreshUntil,
    });
  }

  start(): void {
    if (!this.config.enabled) {
      this.setState("dark");
      return;
    }
    void this.connect();
    this.pacing.startPeriodic(this.deps.refreshSeconds * 1000);
  }

  snapshot(): SupervisorSnapshot {
    return {
      name: this.config.name,
      state: this.state,
      lastError: this.lastError,
      nextRetryAt: this.nextRetryAt ? new Date(this.nextRetryAt).toISOString() : null,
      readySince: this.readySince ? new Date(this.readySince).toISOString() : null,
      serverInfo: this.serverInfo,
      protocolVersion: this.protocolVersion,
      listedTools: this.listedTools,
      stderrTail: this.stderr.snapshot(),
      refreshNote: this.pacing.note,
      history: [...this.history],
    };
  }

  private readonly history: SupervisorSnapshot["history"] = [];
  private crashTimes: number[] = [];

  private setState(state: ServerState, detail: string | null = null): void {
    this.state = state;
    this.history.push({ at: new Date().toISOString(), state, detail });
    if (this.history.length > HISTORY_LENGTH) this.history.shift();
    for (const check of [...this.stateWatchers]) check();
    this.deps.onState(this.snapshot());
  }

  private makeTransport(): Transport {
    const gen = this.generation;
    const onFatal = (error: Error) => this.failWith(gen, error);
    return createTransport(this.config, { stderr: this.stderr, agent: this.agent, onFatal });
  }

  /** Dials a new connection; `detail` says why, in the history (e.g. a lost session). */
  private async connect(detail: string | null = null): Promise<void> {
    // A reconnect or retry that was already on its way when stop() ran must not dial again.
    if (this.state === "closed") return;
    const gen = ++this.generation;
    this.pendingError = null;
    this.clearTimer("retryTimer");
    this.nextRetryAt = null;
    this.setState("connecting", detail);
    const client = newClient({
      onToolsChanged: () => {
        if (gen === this.generation) this.scheduleRefresh();
      },
      roots: this.config.roots,
      stdio: this.config.transport === "stdio",
      ...(this.era.patient ? { stdioProbeTimeoutMs: this.config.timeoutMs } : {}),
    });
    let transport: Transport;
    try {
      transport = this.makeTransport();
    } catch (err) {
      this.failWith(gen, `cannot start: ${messageOf(err)}`);
      return;
    }
    client.onclose = () => {
      // While connecting, the request under way fails too, and the catch below reports the real
      // error: the SDK closes the connection *before* it throws (an initialize answered with an
      // unsupported protocol version, say), and "connection closed" would hide why.
      if (gen === this.generation && this.state === "connecting") return;
      this.failWith(gen, this.pendingError ?? "connection closed");
    };
    client.onerror = (err) => {
      if (gen !== this.generation || this.lostSession === gen) return;
      if (err instanceof SessionLostError) {
        this.lostSession = gen;
        // Deferred: the request that met the lost session must fail with this error (which says
        // whether it may be retried), not with the "connection closed" of the teardown.
        setImmediate(() => this.failWith(gen, err));
        return;
      }
      this.pendingError = err;
      // While connecting, fail() reports the attempt's error: a second line each try is noise. So
      // are the SDK's tries to reopen a broken event stream: a real outage fails the next request.
      // So is each request a 2026-07-28 server sends (the SDK drops them unanswered): a hostile
      // server must not fill the log one line per request.
      const quiet =
        this.state === "connecting" ||
        /^(SSE stream disconnected|Failed to reconnect SSE|Dropped inbound)/.test(err.message);
      const level = quiet ? "debug" : "warn";
      this.deps.log[level](`server ${this.config.name}: ${messageOf(err)}`);
    };
    this.client = client;
    this.transport = transport;
    try {
      await client.connect(transport, { timeout: this.config.timeoutMs, ...this.era.connectOptions() });
      if (gen !== this.generation) return this.abandon(client, transport);
      this.era.connected(client);
      const info = client.getServerVersion();
      this.serverInfo = info ? { name: String(info.name), version: String(info.version) } : null;
      this.protocolVersion = client.getNegotiatedProtocolVersion() ?? null;
      await this.listAndPublish(gen);
      if (gen !== this.generation) return this.abandon(client, transport);
      this.lastError = null;
      this.pendingError = null;
      this.readySince = Date.now();
      this.setState("ready");
      this.deps.log.info(`server ${this.config.name} ready`, {
        tools: this.listedTools,
        protocol: this.protocolVersion,
      });
      this.startListening(gen, client);
      this.stableTimer = setTimeout(() => {
        if (gen === this.generation && this.state === "ready") this.attempt = 0;
      }, STABLE_AFTER_MS);
      this.stableTimer.unref();
    } catch (err) {
      if (gen !== this.generation) return this.abandon(client, transport);
      if (this.era.failed(client, transport, err) === "probe-again") {
        const why = "the server no longer speaks 2025; dialling it again with server/discover";
        this.deps.log.info(`server ${this.config.name}: ${why}`);
        this.generation++;
        void this.teardown().then(() => this.connect(why));
        return;
      }
      // "Connection closed" (or, during the era probe, "the negotiation failed") says only that the
      // transport went away; the transport's own error (a process exit, a refused dial) says why.
      const vague = connectionClosed(err) || negotiationFailed(err);
      // (The SDK keeps a probe's transport errors to itself: a child's exit is asked for.)
      const exit = transport instanceof BoundedStdioTransport ? transport.exitReason : null;
      this.failWith(gen, vague ? (this.pendingError ?? (exit ? new Error(exit) : err)) : err);
    }
  }

  /**
   * On a 2026-07-28 connection whose server offers tool-list changes, keeps a listen stream open
   * for them ({@link ListenLoop}); a 2025 server sends its notifications unasked.
   */
  private startListening(gen: number, client: Client): void {
    if (this.protocolVersion !== MODERN_PROTOCOL_VERSION) return;
    if (client.getServerCapabilities()?.tools?.listChanged !== true) return;
    this.listenLoop = new ListenLoop({
      client,
      server: this.config.name,
      log: this.deps.log,
      timeoutMs: this.config.timeoutMs,
      current: () => gen === this.generation && this.state === "ready",
      onGap: () => this.scheduleRefresh(),
    });
    this.listenLoop.start();
  }

  /**
   * Closes a dial that a newer one overtook (two Reconnects in a row, say), unless it is still
   * the one teardown() would close: its child must not outlive it.
   */
  private abandon(client: Client, transport: Transport): void {
    if (this.client === client) return;
    client.onclose = undefined;
    const done = client
      .close()
      .catch(() => transport.close())
      .catch(() => undefined);
    this.teardowns.add(done);
    void done.finally(() => this.teardowns.delete(done));
  }

  /** The last error the current connection's transport reported (a later one's gen is ignored). */
  private pendingError: unknown = null;
  /** The generation whose session the server forgot; its later errors are the teardown's echo. */
  private lostSession = -1;

  /** `fail` with the failure `err` stands for (see {@link classifyFailure}). */
  private failWith(gen: number, err: unknown): void {
    if (gen === this.generation) this.era.connectionFailed(err);
    this.fail(gen, this.classify(err));
  }

  private classify(err: unknown): Failure {
    return classifyFailure(err, failureContext(this.config));
  }

  /**
   * The connection of generation `gen` failed: tear it down, then by the failure's kind go to
   * `failed` (permanent: only Reconnect dials again), dial a new session at once (a lost session,
   * the first time since the connection was last stable), or schedule the next try (backoff).
   */
  private fail(gen: number, failure: Failure): void {
    if (gen !== this.generation || this.state === "closed" || this.state === "backoff") return;
    const { reason } = failure;
    const wasReady = this.state === "ready";
    this.generation++;
    this.lastError = reason;
    this.pendingError = null;
    this.readySince = null;
    this.protocolVersion = null;
    this.clearTimer("stableTimer");
    void this.teardown();
    const now = Date.now();
    let crashLoop = false;
    if (failure.kind !== "permanent" && (this.config.transport === "stdio" || wasReady)) {
      this.crashTimes = [...this.crashTimes.filter((t) => now - t < CRASH_LOOP.windowMs), now];
      crashLoop = this.crashTimes.length >= CRASH_LOOP.crashes;
    }
    if (failure.kind === "permanent" || crashLoop) {
      this.nextRetryAt = null;
      const loop = `${this.crashTimes.length} times in ${CRASH_LOOP.windowMs / 60_000} minutes`;
      const why = crashLoop ? ` ${loop}; last error: ${reason}` : `: ${reason}`;
      this.deps.log.error(
        `server ${this.config.name} failed${why}; not retrying until an owner reconnects it`,
      );
      this.setState("failed", reason);
      return;
    }
    this.attempt++;
    if (failure.kind === "session_lost" && this.attempt === 1) {
      // The server restarted and answers again: a new session now, not after a backoff. Only once
      // until the connection is stable again: a server that keeps forgetting sessions (replicas
      // behind a balancer without affinity, say) gets the usual backoff, and the crash window.
      // An HTTP connection has no process to stop, so the new one need not wait for the teardown.
      this.deps.log.info(`server ${this.config.name}: ${reason}; starting a new session`);
      void this.connect(reason);
      return;
    }
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
    this.listenLoop?.stop();
    this.listenLoop = null;
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

  private clearTimer(which: "retryTimer" | "stableTimer"): void {
    const t = this[which];
    if (t) {
      clearTimeout(t);
      this[which] = null;
    }
  }

  private async listAndPublish(gen: number): Promise<void> {
    const client = this.client;
    if (!client) return;
    // Page by page, not the SDK's listTools(), which reads every page or fails: a server that
    // never stops paging is read for MAX_TOOL_PAGES pages, and what they held is its list.
    let ttlMs: unknown;
    const tools: Tool[] = await collectPages(
      async (params) => {
        const res: ListToolsResult = await client.request(
          { method: "tools/list", params: params ?? {} },
          { timeout: this.config.timeoutMs },
        );
        // The first page's hint speaks for the list (as the SDK's own cache reads it).
        if (!params) ttlMs = (res as { ttlMs?: unknown }).ttlMs;
        return { items: res.tools, nextCursor: res.nextCursor };
      },
      { maxPages: MAX_TOOL_PAGES },
    );
    if (gen !== this.generation) return;
    const fresh =
      typeof ttlMs === "number" && Number.isFinite(ttlMs) ? Math.min(Math.max(0, ttlMs), MAX_LIST_TTL_MS) : 0;
    this.listFreshUntil = Date.now() + fresh;
    this.listedTools = tools.length;
    this.listedDefinitions = new Map(tools.map((t) => [t.name, t]));
    this.deps.onTools(this.config, tools);
  }

  /** A re-list of tools, debounced and paced (list_changed, the periodic timer, a connection check). */
  scheduleRefresh(): void {
    this.pacing.request();
  }

  /**
   * Re-lists tools now if ready; concurrent calls share one refresh. A refresh that fails is a
   * connection that fails (never `ready` with a list nobody could fetch): backoff, `failed` or,
   * for a lost session, a new one at once, which lists the tools itself and is awaited here.
   */
  async refreshTools(): Promise<void> {
    if (this.state !== "ready") return;
    if (this.refreshing) return this.refreshing;
    const gen = this.generation;
    this.refreshing = this.listAndPublish(gen)
      .catch(async (err) => {
        this.failWith(gen, err);
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
   */
  async callTool(
    name: string,
    args: Record<string, unknown>,
    opts: { signal?: AbortSignal; onProgress?: RequestOptions["onprogress"] } = {},
  ): Promise<CallToolResult> {
    const { signal, onProgress } = opts;
    const result = await this.read(async (client, options) => {
      const route = onProgress ? progressRoute(client, onProgress) : null;
      try {
        const meta = route ? { _meta: { progressToken: route.token } } : {};
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
        const deadline = AbortSignal.timeout(this.config.timeoutMs);
        return await client.callTool(
          { name, arguments: args, ...meta },
          {
            ...options,
            signal: signal ? AbortSignal.any([signal, deadline]) : deadline,
            ...(toolDefinition ? { toolDefinition } : {}),
          },
        );
      } finally {
        route?.done();
      }
    });
    return answerOf(this.config.name, result as CallToolResult);
  }

  /** The reason the connection of generation `gen` failed, if it has failed since. */
  private failureSince(gen: number): string | null {
    if (gen === this.generation || (this.state !== "backoff" && this.state !== "failed")) return null;
    return this.lastError;
  }

  /**
   * Runs a request on the live connection with the server's deadline (tool calls, and an owner's
   * reads of resources and prompts). `server_unavailable` when not ready; a timeout becomes
   * `upstream_timeout`, anything else `upstream_error`. When the server has forgotten the
   * session (it restarted), a new one is started; a request that only reads is then run once
   * more on it, any other (a `tools/call`) fails saying it was not retried.
   */
  async read<T>(fn: (client: Client, options: RequestOptions) => Promise<T>): Promise<T> {
    const client = this.client;
    if (this.state !== "ready" || !client) throw this.unavailable();
    const gen = this.generation;
    try {
      return await fn(client, { timeout: this.config.timeoutMs });
    } catch (err) {
      if (!(err instanceof SessionLostError) || !err.retrySafe) throw this.requestError(err, gen);
      this.failWith(gen, err);
      const next = await this.nextReady(gen);
      const retryGen = this.generation;
      try {
        return await fn(next, { timeout: this.config.timeoutMs });
      } catch (again) {
        throw this.requestError(again, retryGen);
      }
    }
  }

  private unavailable(): GatehouseError {
    // The state alone: the last error is the server's words and Gatehouse's internals, for owners.
    return new GatehouseError("server_unavailable", unavailableForAgents(this.config.name, this.state));
  }

  /** What the caller of {@link read} gets for a request of generation `gen` that failed. */
  private requestError(err: unknown, gen: number): GatehouseError {
    if (err instanceof GatehouseError) return err;
    if (err instanceof SessionLostError) this.failWith(gen, err);
    // The server did not answer at all (refused, reset, an HTTP error, a broken stream): check at
    // once whether the connection still works, so the status does not say `ready` while it is not.
    else if (unreached(err)) this.scheduleRefresh();
    // When the connection failed under the request (oversized frame, process exit), the SDK
    // only says "Connection closed"; the reason is the failure the supervisor recorded.
    const failure = this.failureSince(gen);
    const told = requestErrorForAgents(err, {
      name: this.config.name,
      timeoutMs: this.config.timeoutMs,
      failure,
    });
    if (told.code === "upstream_error" && !(err instanceof SessionLostError)) {
      // Owners keep the detail; agents get what kind of failure it was (see agent-facing.ts).
      const why = failure ? ` (${failure})` : "";
      this.deps.log.warn(`server ${this.config.name}: a request failed: ${this.classify(err).reason}${why}`);
    }
    return told;
  }

  /** Checks run on every state change: the waits of {@link nextReady}. */
  private readonly stateWatchers = new Set<() => void>();

  /**
   * The client of the first connection newer than generation `gen` to become ready. Fails with
   * `server_unavailable` when that connection fails first (or the supervisor stops), and with
   * `upstream_timeout` after `timeoutMs`.
   */
  private nextReady(gen: number): Promise<Client> {
    const { name, timeoutMs } = this.config;
    const late = () =>
      new GatehouseError("upstream_timeout", `server ${name} was not ready again within ${timeoutMs} ms`);
    return watchUntil(this.stateWatchers, timeoutMs, late, () => {
      if (this.generation <= gen || this.state === "connecting") return undefined;
      if (this.state === "ready" && this.client) return this.client;
      throw this.unavailable();
    });
  }

  /** Owner's "reconnect now": drops the current connection and dials at once. */
  reconnectNow(): void {
    if (!this.config.enabled || this.state === "closed") return;
    this.generation++;
    this.attempt = 0;
    this.era.reset();
    this.crashTimes = [];
    this.clearTimer("retryTimer");
    this.clearTimer("stableTimer");
    void this.teardown().then(() => this.connect());
  }

  async stop(): Promise<void> {
    this.generation++;
    this.clearTimer("retryTimer");
    this.clearTimer("stableTimer");
    this.pacing.stop();
    this.state = "closed";
    for (const check of [...this.stateWatchers]) check();
    await this.teardown();
    await Promise.all([...this.teardowns]);
    await this.agent.close();
    this.deps.onState(this.snapshot());
  }
}
