import "server-only";
import type {
  AuthProvider,
  CallToolResult,
  Client,
  RequestOptions,
  Transport,
} from "@modelcontextprotocol/client";
import type { ServerState } from "@/lib/api-types";
import type { ServerConfig } from "../config";
import { newClient } from "./client";
import { DialAuth } from "./dial-auth";
import { EraVerdict } from "./era";
import {
  connectionClosed,
  type Failure,
  MODERN_PROTOCOL_VERSION,
  messageOf,
  negotiationFailed,
  SessionLostError,
} from "./failures";
import { ListenLoop } from "./listen";
import { RefreshPacing } from "./refresh-pacing";
import type { ReadClient } from "./remote";
import { ServerRequests } from "./requests";
import { StateHistory } from "./state-history";
import { BoundedStdioTransport, LineRing } from "./stdio-transport";
import {
  backoffDelay,
  CRASH_LOOP,
  STABLE_AFTER_MS,
  type SupervisorDeps,
  type SupervisorSnapshot,
} from "./supervision";
import { Teardowns } from "./teardowns";
import { ServerAgent } from "./transports";

export type { HistoryEntry, HistoryStore, SupervisorDeps, SupervisorSnapshot } from "./supervision";

/**
 * Keeps one MCP server connected: `dark` (disabled) or `connecting → ready`, and on a failure
 * `backoff` until the next try, or `failed` (a crash loop, or a refusal no retry can fix) until
 * the owner's Reconnect. Reads (`snapshot`) never touch the connection, so a hung server
 * can never block them. Events from an earlier connection are ignored by generation number.
 * The requests over the connection (the tool listing, calls, reads) are {@link ServerRequests}.
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
  private client: Client | null = null;
  private transport: Transport | null = null;
  private generation = 0;
  private attempt = 0;
  private retryTimer: NodeJS.Timeout | null = null;
  private stableTimer: NodeJS.Timeout | null = null;
  private readonly stderr = new LineRing();
  private readonly agent: ServerAgent;
  private readonly pacing: RefreshPacing;
  private readonly requests: ServerRequests;
  private readonly history: StateHistory;
  private readonly dialAuth: DialAuth;
  /** Closes of dropped connections; `stop()` waits for them so no old child is orphaned. */
  private readonly teardowns: Teardowns;

  constructor(
    readonly config: ServerConfig,
    private readonly deps: SupervisorDeps,
  ) {
    this.state = config.enabled ? "connecting" : "dark";
    this.agent = new ServerAgent(config);
    this.era = new EraVerdict(config.transport);
    this.history = new StateHistory(config.name, deps.history);
    this.dialAuth = new DialAuth(config, deps.signIn);
    this.teardowns = new Teardowns((err) =>
      deps.log.debug(`server ${config.name}: close failed: ${messageOf(err)}`),
    );
    this.pacing = new RefreshPacing({
      run: () => this.refreshTools(),
      onNote: () => this.deps.onState(this.snapshot()),
      limits: deps.refreshLimits,
      clock: deps.clock,
      periodicDue: () => Date.now() >= this.requests.listFreshUntil,
    });
    this.requests = new ServerRequests({
      config,
      log: deps.log,
      connection: () => ({
        gen: this.generation,
        state: this.state,
        client: this.client,
        lastError: this.lastError,
      }),
      failWith: (gen, err) => this.failWith(gen, err),
      scheduleRefresh: () => this.scheduleRefresh(),
      onTools: (tools) => this.deps.onTools(this.config, tools),
      ...(deps.onUpstream ? { onUpstream: deps.onUpstream } : {}),
    });
  }

  /** Starts supervising; resolves once the earlier runs' history is read (never rejects). */
  start(): Promise<void> {
    const loaded = this.history.load();
    if (!this.config.enabled) {
      this.setState("dark");
      return loaded;
    }
    void this.connect();
    this.pacing.startPeriodic(this.deps.refreshSeconds * 1000);
    return loaded;
  }

  /** The state alone, for a check on every call: {@link snapshot} copies the history and stderr. */
  get currentState(): ServerState {
    return this.state;
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
      listedTools: this.requests.listedTools,
      stderrTail: this.stderr.snapshot(),
      refreshNote: this.pacing.note,
      history: this.history.snapshot(),
    };
  }

  private crashTimes: number[] = [];

  private setState(state: ServerState, detail: string | null = null): void {
    this.state = state;
    this.history.record(state, detail);
    this.requests.stateChanged();
    this.deps.onState(this.snapshot());
  }

  /** A transport for a dial of generation `this.generation` (see {@link DialAuth}). */
  private makeTransport(authProvider: AuthProvider | null): Transport {
    const gen = this.generation;
    return this.dialAuth.transport(authProvider, {
      stderr: this.stderr,
      agent: this.agent,
      onFatal: (error) => this.failWith(gen, error),
      current: () => gen === this.generation,
    });
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
      ...this.era.probeOptions(this.config.timeoutMs),
    });
    const credentials = this.deps.signIn?.credentialsFor(this.config) ?? null;
    if (credentials && "needsSignIn" in credentials) {
      this.waitForSignIn(credentials.needsSignIn, detail);
      return;
    }
    let transport: Transport;
    try {
      transport = this.makeTransport(credentials?.provider ?? null);
      this.era.dialling(transport);
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
      const eraNote = this.era.connected(client, transport);
      const info = client.getServerVersion();
      this.serverInfo = info ? { name: String(info.name), version: String(info.version) } : null;
      this.protocolVersion = client.getNegotiatedProtocolVersion() ?? null;
      await this.requests.listTools(gen);
      if (gen !== this.generation) return this.abandon(client, transport);
      this.lastError = null;
      this.pendingError = null;
      this.readySince = Date.now();
      this.setState("ready", eraNote);
      this.deps.log.info(`server ${this.config.name} ready`, {
        tools: this.requests.listedTools,
        protocol: this.protocolVersion,
        ...(eraNote ? { note: eraNote } : {}),
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

  /** Closes a dial a newer one overtook, unless it is still the one teardown() would close. */
  private abandon(client: Client, transport: Transport): void {
    if (this.client !== client) this.teardowns.abandon(client, transport);
  }

  /** The last error the current connection's transport reported (a later one's gen is ignored). */
  private pendingError: unknown = null;
  /** The generation whose session the server forgot; its later errors are the teardown's echo. */
  private lostSession = -1;

  /** `fail` with the failure `err` stands for (see {@link classifyFailure}). */
  private failWith(gen: number, err: unknown): void {
    if (gen === this.generation) this.era.connectionFailed(err);
    this.fail(gen, this.dialAuth.classify(err));
  }

  /**
   * `needs_auth`: nothing is dialled, and nothing retried, until an owner signs in (the runtime
   * then reconnects the server) or presses Reconnect. Not a failure: no crash counted.
   */
  private waitForSignIn(reason: string, detail: string | null = null): void {
    this.clearTimer("retryTimer");
    this.nextRetryAt = null;
    this.readySince = null;
    this.protocolVersion = null;
    const changed = this.state !== "needs_auth" || this.lastError !== reason;
    this.lastError = reason;
    if (!changed) return;
    this.deps.log.info(`server ${this.config.name} waits for an owner to sign in: ${reason}`);
    this.setState("needs_auth", detail ?? reason);
  }

  /**
   * The connection of generation `gen` failed: tear it down, then by the failure's kind go to
   * `failed` (permanent: only Reconnect dials again), dial a new session at once (a lost session,
   * the first time since the connection was last stable), or schedule the next try (backoff).
   */
  private fail(gen: number, failure: Failure): void {
    if (gen !== this.generation || this.state === "closed" || this.state === "backoff") return;
    if (this.state === "needs_auth") return;
    const { reason } = failure;
    const wasReady = this.state === "ready";
    this.generation++;
    this.lastError = reason;
    this.pendingError = null;
    this.readySince = null;
    this.protocolVersion = null;
    this.clearTimer("stableTimer");
    void this.teardown();
    if (failure.kind === "needs_auth") {
      this.waitForSignIn(reason);
      return;
    }
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

  /** Drops the current connection; its close runs on in {@link Teardowns}. */
  private teardown(): Promise<void> {
    const { client, transport } = this;
    this.listenLoop?.stop();
    this.listenLoop = null;
    this.client = null;
    this.transport = null;
    return this.teardowns.close(client, transport);
  }

  private clearTimer(which: "retryTimer" | "stableTimer"): void {
    const t = this[which];
    if (t) {
      clearTimeout(t);
      this[which] = null;
    }
  }

  /** A re-list of tools, debounced and paced (list_changed, the periodic timer, a connection check). */
  scheduleRefresh(): void {
    this.pacing.request();
  }

  /** Re-lists tools now if ready: see {@link ServerRequests.refreshTools} (shared, failures). */
  refreshTools(): Promise<void> {
    return this.requests.refreshTools();
  }

  /** Calls a tool on the live connection: see {@link ServerRequests.callTool} (deadline, progress). */
  callTool(
    name: string,
    args: Record<string, unknown>,
    opts: {
      signal?: AbortSignal;
      onProgress?: RequestOptions["onprogress"];
      traceparent?: string | null;
    } = {},
  ): Promise<CallToolResult> {
    return this.requests.callTool(name, args, opts);
  }

  /** Runs a request on the live connection: see {@link ServerRequests.read} (deadline, errors, retry). */
  read<T>(fn: (client: ReadClient, options: RequestOptions) => Promise<T>): Promise<T> {
    return this.requests.read(fn);
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
    this.requests.stateChanged();
    await this.teardown();
    await this.teardowns.settled();
    await this.agent.close();
    this.deps.onState(this.snapshot());
  }
}
