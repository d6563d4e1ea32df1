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
} from "./failures";
import { ListenLoop } from "./listen";
import { RefreshPacing } from "./refresh-pacing";
import { ServerRequests } from "./requests";
import { BoundedStdioTransport, LineRing } from "./stdio-transport";
import {
  backoffDelay,
  CRASH_LOOP,
  HISTORY_LENGTH,
  type HistoryEntry,
  STABLE_AFTER_MS,
  type SupervisorDeps,
  type SupervisorSnapshot,
} from "./supervision";
import { createTransport, ServerAgent } from "./transports";

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
    });
  }

  start(): void {
    // Before the first change of this run, which is marked as the start.
    if (this.deps.history) this.history.push(...this.deps.history.load(this.config.name, HISTORY_LENGTH));
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
      listedTools: this.requests.listedTools,
      stderrTail: this.stderr.snapshot(),
      refreshNote: this.pacing.note,
      history: [...this.history],
    };
  }

  private readonly history: HistoryEntry[] = [];
  /** Whether no change has been recorded since start(): the next one is marked `started`. */
  private firstOfRun = true;
  private crashTimes: number[] = [];

  private setState(state: ServerState, detail: string | null = null): void {
    this.state = state;
    const entry: HistoryEntry = { at: new Date().toISOString(), state, detail };
    if (this.firstOfRun) entry.started = true;
    this.firstOfRun = false;
    this.history.push(entry);
    if (this.history.length > HISTORY_LENGTH) this.history.shift();
    this.deps.history?.append(this.config.name, entry, HISTORY_LENGTH);
    this.requests.stateChanged();
    this.deps.onState(this.snapshot());
  }

  /** Whether the current connection was dialled with an OAuth grant's tokens. */
  private dialledWithOAuth = false;
  /** Whether the current connection's server answered 401 naming its resource metadata. */
  private challenged = false;

  private makeTransport(authProvider: AuthProvider | null): Transport {
    const gen = this.generation;
    const onFatal = (error: Error) => this.failWith(gen, error);
    const onChallenge = (
      status: 401 | 403,
      challenge: { resourceMetadataUrl: string | null; scope: string | null; error: string | null },
    ) => {
      if (gen !== this.generation) return;
      const { resourceMetadataUrl, scope } = challenge;
      if (status === 401 && resourceMetadataUrl !== null && !authProvider) {
        this.challenged = true;
        this.deps.signIn?.challenged(this.config.name, { resourceMetadataUrl, scope });
      }
      if (status === 403 && challenge.error === "insufficient_scope") {
        this.deps.signIn?.needsScope(this.config.name, { resourceMetadataUrl, scope });
      }
    };
    return createTransport(this.config, {
      stderr: this.stderr,
      agent: this.agent,
      onFatal,
      onChallenge,
      ...(authProvider ? { authProvider } : {}),
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
      ...(this.era.patient ? { stdioProbeTimeoutMs: this.config.timeoutMs } : {}),
    });
    const credentials = this.deps.signIn?.credentialsFor(this.config) ?? null;
    if (credentials && "needsSignIn" in credentials) {
      this.waitForSignIn(credentials.needsSignIn, detail);
      return;
    }
    this.dialledWithOAuth = credentials !== null;
    this.challenged = false;
    let transport: Transport;
    try {
      transport = this.makeTransport(credentials?.provider ?? null);
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
      await this.requests.listTools(gen);
      if (gen !== this.generation) return this.abandon(client, transport);
      this.lastError = null;
      this.pendingError = null;
      this.readySince = Date.now();
      this.setState("ready");
      this.deps.log.info(`server ${this.config.name} ready`, {
        tools: this.requests.listedTools,
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
    return classifyFailure(err, {
      ...failureContext(this.config),
      oauth: this.dialledWithOAuth,
      challenged: this.challenged,
    });
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
    opts: { signal?: AbortSignal; onProgress?: RequestOptions["onprogress"] } = {},
  ): Promise<CallToolResult> {
    return this.requests.callTool(name, args, opts);
  }

  /** Runs a request on the live connection: see {@link ServerRequests.read} (deadline, errors, retry). */
  read<T>(fn: (client: Client, options: RequestOptions) => Promise<T>): Promise<T> {
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
    await Promise.all([...this.teardowns]);
    await this.agent.close();
    this.deps.onState(this.snapshot());
  }
}
