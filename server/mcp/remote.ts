import "server-only";
import type {
  CallToolResult,
  Client,
  Progress,
  RequestOptions,
  ServerCapabilities,
} from "@modelcontextprotocol/client";
import type { ServerState } from "@/lib/api-types";
import { GatehouseError } from "@/lib/errors";
import type { ServerConfig } from "../config";
import { HISTORY_LENGTH, type HistoryEntry, type HistoryStore, type SupervisorSnapshot } from "./supervision";

/**
 * What a request on a tool server may use of its client: the reads (`ServerSupervisor.read`)
 * take this much, so that a server running on another replica can be read through it too.
 */
export type ReadClient = Pick<
  Client,
  "getServerCapabilities" | "request" | "readResource" | "getPrompt" | "callTool"
>;

/** The MCP methods a replica asks another to send to a server it holds, and nothing else. */
export const FORWARDED_METHODS = [
  "tools/call",
  "resources/list",
  "resources/read",
  "resources/templates/list",
  "prompts/list",
  "prompts/get",
  "capabilities",
  /** An owner's Reconnect pressed on a replica that does not run the server. */
  "reconnect",
] as const;
export type ForwardedMethod = (typeof FORWARDED_METHODS)[number];

/** Sends a request for a server to the replica that runs it (server/replicas/forward.ts). */
export interface Forwarder {
  /**
   * Resolves with the holder's answer to `method` on `server`. Rejects with `upstream_elsewhere`
   * when the holder cannot be reached (nothing was sent to the tool server), with the holder's
   * own error otherwise (its code; an outcome it could not know as an `upstream_error` with a
   * cause, which `outcomeUnknown` reads as unknown).
   */
  send(
    server: string,
    method: ForwardedMethod,
    params: Record<string, unknown>,
    opts: {
      timeoutMs: number;
      signal?: AbortSignal;
      /** Hears the tool server's progress notifications of a `tools/call`, relayed by the holder. */
      onProgress?: (progress: Progress) => void;
    },
  ): Promise<unknown>;
  /** Of `servers`, those a live replica holds now, each with that replica's label. */
  holders(servers: string[]): Promise<Map<string, string>>;
}

/**
 * A request forwarded for a server that this replica itself holds now: it took the server while
 * the request looked for a holder. Nothing was sent; the manager sends the request to the server
 * started here instead (`McpManager.callOn`).
 */
export class TakenHere extends GatehouseError {
  /** Said by a property: `instanceof` on GatehouseError's subclasses answers for every GatehouseError. */
  readonly takenHere = true;
  constructor(server: string) {
    super(
      "upstream_elsewhere",
      `server ${server} is being started on this replica; try again in a few seconds`,
    );
  }
}

export const isTakenHere = (err: unknown): boolean =>
  typeof err === "object" && err !== null && (err as { takenHere?: unknown }).takenHere === true;

/**
 * How much longer than the server's own deadline a forwarded request may take: the hop, and the
 * holder's wait for a server it is starting (`HOLDER_START_WAIT_MS`, 10 s) with room to spare.
 */
const FORWARD_MARGIN_MS = 15_000;

/**
 * A stdio server that another replica runs (it holds the server's lock): calls and reads go to
 * that replica over the internal route; nothing is started here. Its state and history are the
 * holder's: read from the stored history (which the holder writes) at start, then as the
 * holder's events tell ({@link heard}); the Servers page shows where it runs.
 */
export class RemoteSupervisor {
  private state: ServerState;
  private history: HistoryEntry[] = [];
  private capabilities: { value: ServerCapabilities | undefined; at: number } | null = null;

  constructor(
    readonly config: ServerConfig,
    private readonly forwarder: Forwarder,
    private readonly stored?: HistoryStore,
  ) {
    this.state = config.enabled ? "connecting" : "dark";
  }

  /** Reads the holder's history (its last state); nothing runs here. Never rejects. */
  async start(): Promise<void> {
    await this.reload();
  }

  async stop(): Promise<void> {}

  /** Reads the holder's state again from the stored history (events about it may have been missed). Never rejects. */
  async reload(): Promise<void> {
    if (!this.stored) return;
    try {
      this.history = await this.stored.load(this.config.name, HISTORY_LENGTH);
    } catch {
      // Unread now: the next event reads it again.
      return;
    }
    const last = this.history.at(-1);
    // `closed`: its last holder stopped; another takes it over.
    if (last && this.config.enabled) this.state = last.state === "closed" ? "connecting" : last.state;
  }

  /** The holder's state, as its event said; the stored history is read again for the page. */
  heard(state: ServerState): void {
    // A holder that stops says `closed`, which may arrive after its successor's first state: it
    // tells nothing of the server, which a survivor takes over (the Servers page says when none has).
    if (state === "closed") return;
    this.state = state;
    this.capabilities = null;
    void this.reload().then(() => {
      // The event is newer than what the holder's batched history write may have stored yet.
      this.state = this.config.enabled ? state : "dark";
    });
  }

  get currentState(): ServerState {
    return this.state;
  }

  snapshot(): SupervisorSnapshot {
    return {
      name: this.config.name,
      state: this.state,
      lastError: null,
      nextRetryAt: null,
      readySince: null,
      serverInfo: null,
      protocolVersion: null,
      listedTools: 0,
      stderrTail: [],
      refreshNote: null,
      history: [...this.history],
      elsewhere: true,
    };
  }

  /** The holder re-lists on its own; nothing to do here. */
  scheduleRefresh(): void {}

  async refreshTools(): Promise<void> {}

  /** Asks the holder to reconnect (an owner's Reconnect on this replica's Servers page). */
  reconnectNow(): void {
    // Nothing to tell when it fails: the holder is gone, and whoever takes the server over starts it afresh.
    this.forward("reconnect", {}).catch(() => undefined);
  }

  async callTool(
    name: string,
    args: Record<string, unknown>,
    opts: { signal?: AbortSignal; onProgress?: (progress: Progress) => void } = {},
  ): Promise<CallToolResult> {
    return (await this.forward(
      "tools/call",
      { name, arguments: args },
      opts.signal,
      opts.onProgress,
    )) as CallToolResult;
  }

  /**
   * Runs `fn` with a client whose requests go to the holder. Its capabilities are asked for
   * once and kept until the holder's state changes.
   */
  async read<T>(fn: (client: ReadClient, options: RequestOptions) => Promise<T>): Promise<T> {
    if (this.capabilities === null || Date.now() - this.capabilities.at > 60_000) {
      const value = (await this.forward("capabilities", {})) as ServerCapabilities | null;
      this.capabilities = { value: value ?? undefined, at: Date.now() };
    }
    const capabilities = this.capabilities.value;
    const ask = (method: string, params: unknown, options?: RequestOptions): Promise<never> => {
      if (!(FORWARDED_METHODS as readonly string[]).includes(method) || method === "reconnect") {
        return Promise.reject(
          new GatehouseError("internal", `${method} is not forwarded to another replica`),
        );
      }
      return this.forward(
        method as ForwardedMethod,
        (params ?? {}) as Record<string, unknown>,
        options?.signal,
      ) as Promise<never>;
    };
    // The SDK's typed overloads cannot be written for a stand-in: each method forwards its request.
    const client = {
      getServerCapabilities: () => capabilities,
      request: (req: { method: string; params?: unknown }, options?: RequestOptions) =>
        ask(req.method, req.params, options),
      readResource: (params: unknown, options?: RequestOptions) => ask("resources/read", params, options),
      getPrompt: (params: unknown, options?: RequestOptions) => ask("prompts/get", params, options),
      callTool: (params: unknown, options?: RequestOptions) => ask("tools/call", params, options),
    } as unknown as ReadClient;
    return fn(client, { timeout: this.config.timeoutMs });
  }

  private forward(
    method: ForwardedMethod,
    params: Record<string, unknown>,
    signal?: AbortSignal,
    onProgress?: (progress: Progress) => void,
  ): Promise<unknown> {
    if (!this.config.enabled) {
      return Promise.reject(
        new GatehouseError("server_unavailable", `server ${this.config.name} is switched off`),
      );
    }
    return this.forwarder.send(this.config.name, method, params, {
      timeoutMs: this.config.timeoutMs + FORWARD_MARGIN_MS,
      ...(signal ? { signal } : {}),
      ...(onProgress ? { onProgress } : {}),
    });
  }
}
