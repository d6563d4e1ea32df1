import "server-only";
import type { CallToolResult, Tool } from "@modelcontextprotocol/client";
import { GatehouseError } from "@/lib/errors";
import type { GatehouseConfig, ServerConfig } from "../config";
import type { Logger } from "../log";
import type { SupervisorDeps, SupervisorSnapshot } from "./supervision";
import { ServerSupervisor } from "./supervisor";

export interface ManagerDeps {
  log: Logger;
  onState(snapshot: SupervisorSnapshot): void;
  onTools(server: ServerConfig, tools: Tool[]): void;
  /** Passed to every supervisor; default `BACKOFF` (1 s doubling to 60 s). */
  backoff?: SupervisorDeps["backoff"];
  /** OAuth sign-ins, passed to every supervisor (see `SignInSource`). */
  signIn?: SupervisorDeps["signIn"];
  /** Where every server's history outlives a restart (see `HistoryStore`); default: memory only. */
  history?: SupervisorDeps["history"];
}

/** A progress notification of a running tool call, as the tool server sent it. */
export interface ToolProgress {
  progress: number;
  total?: number;
  message?: string;
}

/** One supervisor per configured server. Starting never waits on any server. */
export class McpManager {
  private readonly supervisors = new Map<string, ServerSupervisor>();

  constructor(
    private readonly config: GatehouseConfig,
    deps: ManagerDeps,
  ) {
    for (const server of config.servers) {
      this.supervisors.set(
        server.name,
        new ServerSupervisor(server, {
          log: deps.log,
          refreshSeconds: config.catalogue.refreshSeconds,
          onState: deps.onState,
          onTools: deps.onTools,
          backoff: deps.backoff,
          ...(deps.signIn ? { signIn: deps.signIn } : {}),
          ...(deps.history ? { history: deps.history } : {}),
        }),
      );
    }
  }

  start(): void {
    for (const s of this.supervisors.values()) s.start();
  }

  /** Snapshots of every server, in config order; never awaits a connection. */
  list(): { config: ServerConfig; status: SupervisorSnapshot }[] {
    return [...this.supervisors.values()].map((s) => ({ config: s.config, status: s.snapshot() }));
  }

  get(name: string): ServerSupervisor {
    const s = this.supervisors.get(name);
    if (!s) throw new GatehouseError("not_found", `no server named "${name}" is configured`);
    return s;
  }

  /**
   * Calls `tool` on `server` (see `ServerSupervisor.callTool`). `onProgress` hears the server's
   * progress notifications for this call as it sent them (untrusted: unchecked, unpaced) until
   * the answer; without it no progress is asked for.
   */
  callTool(
    server: string,
    tool: string,
    args: Record<string, unknown>,
    opts: { signal?: AbortSignal; onProgress?: (progress: ToolProgress) => void } = {},
  ): Promise<CallToolResult> {
    return this.get(server).callTool(tool, args, opts);
  }

  async stop(): Promise<void> {
    await Promise.all([...this.supervisors.values()].map((s) => s.stop()));
  }

  get servers(): readonly ServerConfig[] {
    return this.config.servers;
  }
}
