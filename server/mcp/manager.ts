import "server-only";
import type { CallToolResult, Tool } from "@modelcontextprotocol/client";
import type { ServerState } from "@/lib/api-types";
import { GatehouseError } from "@/lib/errors";
import type { GatehouseConfig, ServerConfig } from "../config";
import type { Logger } from "../log";
import { inSpan, tracing } from "../tracing";
import { type Forwarder, isTakenHere, RemoteSupervisor } from "./remote";
import type { HistoryStore, SupervisorDeps, SupervisorSnapshot, UpstreamObserver } from "./supervision";
import { ServerSupervisor } from "./supervisor";

/** A server as the manager hands it out: supervised here, or run by another replica. */
export type Supervised = ServerSupervisor | RemoteSupervisor;

/** What a tool call sends with it (see `ServerRequests.callTool`), and its reconnect wait's bounds. */
type CallOptions = {
  signal?: AbortSignal;
  onProgress?: (progress: ToolProgress) => void;
  /** Passed on to the tool server as its `_meta.traceparent` (traces). */
  traceparent?: string | null;
  reconnect?: ReconnectWaitOptions;
};

export interface ManagerDeps {
  log: Logger;
  onState(snapshot: SupervisorSnapshot): void;
  onTools(server: ServerConfig, tools: Tool[]): void | Promise<void>;
  /** Passed to every supervisor; default `BACKOFF` (1 s doubling to 60 s). */
  backoff?: SupervisorDeps["backoff"];
  /** OAuth sign-ins, passed to every supervisor (see `SignInSource`). */
  signIn?: SupervisorDeps["signIn"];
  /** Where every server's history outlives a restart (see `HistoryStore`); default: memory only. */
  history?: SupervisorDeps["history"];
  /**
   * Replicas side by side (PostgreSQL): each stdio server runs on the one replica that holds it.
   * Every stdio server starts as run elsewhere (its calls forwarded by `forwarder`, its state
   * the holder's stored history until its events say more) until {@link McpManager.hold} says this
   * replica holds it. Absent: every server runs here.
   */
  placement?: { forwarder: Forwarder };
  /**
   * Hears every `tools/call` (forwarded ones included, timed here) and every `tools/list` of a
   * server supervised here (metrics); must not throw.
   */
  onUpstream?: UpstreamObserver;
}

/** A progress notification of a running tool call, as the tool server sent it. */
export interface ToolProgress {
  progress: number;
  total?: number;
  message?: string;
}

/** The states a server leaves by itself, to `ready` or to a failure: a call may wait them out. */
const RECONNECTING: ReadonlySet<ServerState> = new Set(["connecting", "backoff"]);

/** What a call waited for its server to come back (see {@link McpManager.callTool}). */
export interface ReconnectWait {
  /** How long it waited, in milliseconds. */
  ms: number;
  /** The state the server was in when the call came (`connecting` or `backoff`). */
  from: ServerState;
  /** The state it was in when the wait ended: `ready`, or what it went to instead (or still was). */
  to: ServerState;
}

/** How a call waits for a server that is reconnecting (see {@link McpManager.callTool}). */
export interface ReconnectWaitOptions {
  /** Epoch milliseconds the wait never passes (an approved call's expiry); default: none. */
  notAfter?: number;
  /** Told what was waited, once, before the call is sent or fails; never for a call that did not wait. */
  onWaited?(wait: ReconnectWait): void;
}

/** One supervisor per configured server. Starting never waits on any server. */
export class McpManager {
  private readonly supervisors = new Map<string, Supervised>();
  /** Checks run on every state change of any server: the waits of {@link untilReachable}. */
  private readonly stateWatchers = new Set<() => void>();

  constructor(
    private readonly config: GatehouseConfig,
    private readonly deps: ManagerDeps,
  ) {
    for (const server of config.servers) this.supervisors.set(server.name, this.placed(server));
  }

  /** Whether `server` runs on one replica at a time (see {@link ManagerDeps.placement}). */
  private heldByOne(server: ServerConfig): boolean {
    return this.deps.placement !== undefined && server.transport === "stdio";
  }

  /** A new supervisor for `server`: here, or a stand-in for the replica that holds it. */
  private placed(server: ServerConfig): Supervised {
    const placement = this.deps.placement;
    if (!placement || !this.heldByOne(server)) return this.supervise(server);
    return new RemoteSupervisor(server, placement.forwarder, this.deps.history);
  }

  /**
   * This replica now holds stdio server `name` (its lock): it is started here, in the place of
   * its stand-in. Nothing when it runs here already.
   */
  async hold(name: string): Promise<void> {
    const current = this.get(name);
    if (!(current instanceof RemoteSupervisor)) return;
    const next = this.supervise(current.config);
    this.supervisors.set(name, next);
    // Calls waiting on the stand-in wait on the server started here from now on.
    this.stateChanged();
    await next.start();
  }

  /**
   * This replica no longer holds stdio server `name` (its lock was lost, or it stops): the
   * server is stopped here and its calls go to whichever replica takes it.
   */
  async release(name: string): Promise<void> {
    const current = this.get(name);
    const placement = this.deps.placement;
    if (current instanceof RemoteSupervisor || !placement) return;
    const stand = new RemoteSupervisor(current.config, placement.forwarder, this.deps.history);
    this.supervisors.set(name, stand);
    this.stateChanged();
    await current.stop();
    await stand.start();
  }

  /** Reads the state of every server held elsewhere again (its holder's events were missed). */
  async reloadElsewhere(): Promise<void> {
    await Promise.all(
      [...this.supervisors.values()].map((s) => (s instanceof RemoteSupervisor ? s.reload() : undefined)),
    );
  }

  /** The holder of stdio server `name` said its state (its event reached this replica). */
  heard(name: string, state: ServerState): void {
    const current = this.supervisors.get(name);
    if (!(current instanceof RemoteSupervisor)) return;
    current.heard(state);
    // The holder's state changes reach a stand-in only as these events: a call waiting for the
    // server to come back (`untilReachable`) must hear them, or it waits its whole timeout.
    this.stateChanged();
  }

  /** Runs the checks of the calls waiting in {@link untilReachable}. */
  private stateChanged(): void {
    for (const check of [...this.stateWatchers]) check();
  }

  /**
   * Which live replica holds each server of {@link heldByOneReplica} (its label); servers nobody
   * holds now are missing. Null when servers are not placed (one process).
   */
  async holders(): Promise<Map<string, string> | null> {
    const placement = this.deps.placement;
    return placement ? placement.forwarder.holders(this.heldByOneReplica()) : null;
  }

  /** The servers this replica may have to hold: enabled stdio servers, when replicas place them. */
  heldByOneReplica(): string[] {
    return this.config.servers.filter((s) => s.enabled && this.heldByOne(s)).map((s) => s.name);
  }

  private supervise(server: ServerConfig, history = this.deps.history): ServerSupervisor {
    const deps = this.deps;
    return new ServerSupervisor(server, {
      log: deps.log,
      refreshSeconds: this.config.catalogue.refreshSeconds,
      onState: (snapshot) => {
        deps.onState(snapshot);
        this.stateChanged();
      },
      onTools: deps.onTools,
      backoff: deps.backoff,
      ...(deps.signIn ? { signIn: deps.signIn } : {}),
      ...(history ? { history } : {}),
      ...(deps.onUpstream ? { onUpstream: deps.onUpstream } : {}),
    });
  }

  /**
   * Puts a supervisor for `server` (a configured server, `enabled` changed) in the place of its
   * current one, which is stopped, and starts it: how an owner's "Switch on" or "Switch off"
   * takes effect without a restart. Readers see the new one at once. Its history goes on from
   * the old one's, and its first change is not marked as a start of Gatehouse.
   */
  async replace(server: ServerConfig): Promise<void> {
    const old = this.get(server.name);
    if (old instanceof RemoteSupervisor) {
      // Run elsewhere: the stand-in takes the new config; the holder (if any) switches its own.
      const stand = this.placed(server);
      this.supervisors.set(server.name, stand);
      const at = this.config.servers.findIndex((s) => s.name === server.name);
      if (at >= 0) this.config.servers[at] = server;
      await stand.start();
      // Nothing runs here to say so: the others (the holder among them) hear the change from here.
      this.deps.onState(stand.snapshot());
      return;
    }
    const store = this.deps.history;
    const earlier = old.snapshot().history;
    let first = true;
    const history: HistoryStore = {
      load: (name, limit) => store?.load(name, limit) ?? earlier.slice(-limit),
      append: (name, entry, limit) => {
        // The same object is in the new supervisor's own list: this run goes on, it did not start.
        if (first) delete entry.started;
        first = false;
        store?.append(name, entry, limit);
      },
    };
    const next = this.supervise(server, history);
    this.supervisors.set(server.name, next);
    const at = this.config.servers.findIndex((s) => s.name === server.name);
    if (at >= 0) this.config.servers[at] = server;
    await old.stop();
    await next.start();
  }

  /** Starts every supervisor; resolves once their earlier runs' history is read (never rejects). */
  async start(): Promise<void> {
    await Promise.all([...this.supervisors.values()].map((s) => s.start()));
  }

  /** Snapshots of every server, in config order; never awaits a connection. */
  list(): { config: ServerConfig; status: SupervisorSnapshot }[] {
    return [...this.supervisors.values()].map((s) => ({ config: s.config, status: s.snapshot() }));
  }

  get(name: string): Supervised {
    const s = this.supervisors.get(name);
    if (!s) throw new GatehouseError("not_found", `no server named "${name}" is configured`);
    return s;
  }

  /**
   * Calls `tool` on `server` (see `ServerSupervisor.callTool`). `onProgress` hears the server's
   * progress notifications for this call as it sent them (untrusted: unchecked, unpaced) until
   * the answer; without it no progress is asked for.
   *
   * With `reconnect`, a call for a server that is coming back by itself (`connecting`, or
   * `backoff` after a crash or a bounce) waits until it is `ready` instead of failing at once, for
   * at most the server's `timeoutMs` and never past `reconnect.notAfter`; a server that goes
   * elsewhere meanwhile (`failed`, `needs_auth`, `closed`) ends the wait, and the call then fails
   * as it would have. Once sent, the call has its whole `timeoutMs` of its own: the wait is no part
   * of the tool's deadline, so a slow reconnect never cuts a call short. A server that is `dark`,
   * `failed`, `closed` or waits for a sign-in fails the call at once, as without `reconnect`.
   */
  async callTool(
    server: string,
    tool: string,
    args: Record<string, unknown>,
    opts: {
      signal?: AbortSignal;
      onProgress?: (progress: ToolProgress) => void;
      reconnect?: ReconnectWaitOptions;
      /** The span the request to the tool server is traced under (traces). */
      traceparent?: string | null;
    } = {},
  ): Promise<CallToolResult> {
    const { reconnect, traceparent, ...rest } = opts;
    const supervisor = reconnect ? await this.reachable(server, reconnect) : this.get(server);
    const callOpts: CallOptions = { ...rest, ...(reconnect ? { reconnect } : {}) };
    if (!tracing()) return this.observedCall(supervisor, server, tool, args, callOpts);
    const attributes = {
      "mcp.method.name": "tools/call",
      "gen_ai.tool.name": tool,
      "gen_ai.operation.name": "execute_tool",
      "gatehouse.server": server,
      "network.transport": supervisor.config.transport === "stdio" ? "pipe" : "tcp",
    };
    return inSpan(`tools/call ${tool}`, { kind: "client", attributes, traceparent }, (span) =>
      this.observedCall(supervisor, server, tool, args, { ...callOpts, traceparent: span.traceparent }),
    );
  }

  /** Calls `tool` on `supervisor`, timed for `onUpstream`. */
  private async observedCall(
    supervisor: Supervised,
    server: string,
    tool: string,
    args: Record<string, unknown>,
    callOpts: CallOptions,
  ): Promise<CallToolResult> {
    const observe = this.deps.onUpstream;
    if (!observe) return this.callOn(supervisor, server, tool, args, callOpts);
    // Timed from the request, after any wait for the server to come back: the server's own time.
    const started = performance.now();
    try {
      const result = await this.callOn(supervisor, server, tool, args, callOpts);
      observe(server, "tools/call", "ok", (performance.now() - started) / 1000);
      return result;
    } catch (err) {
      observe(server, "tools/call", upstreamOutcome(err), (performance.now() - started) / 1000);
      throw err;
    }
  }

  /**
   * Calls `tool` on `supervisor`. A stand-in's call that found this replica holding the server
   * (it took the server while the call looked for a holder; nothing was sent) goes to the server
   * started here, once it is in place and reachable, within the server's `timeoutMs`.
   */
  private async callOn(
    supervisor: Supervised,
    server: string,
    tool: string,
    args: Record<string, unknown>,
    callOpts: CallOptions,
  ): Promise<CallToolResult> {
    const { reconnect, ...sendOpts } = callOpts;
    try {
      return await supervisor.callTool(tool, args, sendOpts);
    } catch (err) {
      if (!(supervisor instanceof RemoteSupervisor) || !isTakenHere(err)) throw err;
      // Within the server's timeout, and never past the call's own bound (an approval's expiry).
      const notAfter = Math.min(
        reconnect?.notAfter ?? Number.POSITIVE_INFINITY,
        Date.now() + supervisor.config.timeoutMs,
      );
      await this.untilReplaced(supervisor, notAfter, sendOpts.signal);
      const here = await this.reachable(server, { ...reconnect, notAfter });
      if (here instanceof RemoteSupervisor) throw err;
      return here.callTool(tool, args, sendOpts);
    }
  }

  /** Resolves once another supervisor is in `supervisor`'s place, at `notAfter`, or when `signal` aborts. */
  private untilReplaced(supervisor: Supervised, notAfter: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.stateWatchers.delete(check);
        signal?.removeEventListener("abort", done);
        resolve();
      };
      const check = () => {
        if (this.supervisors.get(supervisor.config.name) !== supervisor) done();
      };
      const timer = setTimeout(done, Math.max(0, notAfter - Date.now()));
      timer.unref();
      this.stateWatchers.add(check);
      signal?.addEventListener("abort", done, { once: true });
      if (signal?.aborted) done();
      else check();
    });
  }

  /**
   * The supervisor a request for `server` goes to, once the server is not reconnecting: waited
   * for while it is (see {@link untilReachable}), for at most its `timeoutMs` and never past
   * `notAfter`, then `onWaited` told what was waited.
   */
  async reachable(server: string, opts: ReconnectWaitOptions = {}): Promise<Supervised> {
    let supervisor = this.get(server);
    // One bound for the whole wait, however many supervisors it waits on.
    const notAfter = Math.min(
      opts.notAfter ?? Number.POSITIVE_INFINITY,
      Date.now() + supervisor.config.timeoutMs,
    );
    let waited: ReconnectWait | null = null;
    for (;;) {
      const wait = await this.untilReachable(supervisor, notAfter);
      if (wait) waited = waited ? { ...wait, ms: waited.ms + wait.ms, from: waited.from } : wait;
      // Replicas: this one took the server while the call waited (or let it go): wait on its new
      // supervisor now, the one the call goes to.
      const now = this.get(server);
      if (now === supervisor) break;
      supervisor = now;
    }
    if (waited) opts.onWaited?.(waited);
    return supervisor;
  }

  /**
   * Waits while `supervisor`'s server is {@link RECONNECTING}, woken by its state changes (never by
   * polling), for at most its `timeoutMs` and never past `notAfter`; a supervisor put in its place
   * (replicas: this one took the server, or let it go) ends the wait. Null when it was not
   * reconnecting (nothing waited); otherwise what was waited and how it ended.
   */
  private untilReachable(supervisor: Supervised, notAfter?: number): Promise<ReconnectWait | null> {
    const from = supervisor.currentState;
    if (!RECONNECTING.has(from)) return Promise.resolve(null);
    const started = Date.now();
    const limit = Math.min(supervisor.config.timeoutMs, (notAfter ?? Number.POSITIVE_INFINITY) - started);
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.stateWatchers.delete(check);
        resolve({ ms: Date.now() - started, from, to: supervisor.currentState });
      };
      const check = () => {
        const now = this.supervisors.get(supervisor.config.name);
        if (now !== supervisor || !RECONNECTING.has(supervisor.currentState)) done();
      };
      const timer = setTimeout(done, Math.max(0, limit));
      // A wait never keeps the process up.
      timer.unref();
      this.stateWatchers.add(check);
    });
  }

  async stop(): Promise<void> {
    await Promise.all([...this.supervisors.values()].map((s) => s.stop()));
  }

  get servers(): readonly ServerConfig[] {
    return this.config.servers;
  }
}

/** How a failed request to a tool server is counted: its deadline passed, or it failed otherwise. */
export function upstreamOutcome(err: unknown): "timeout" | "error" {
  return err instanceof GatehouseError && err.code === "upstream_timeout" ? "timeout" : "error";
}
