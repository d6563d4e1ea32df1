import "server-only";
import type { AuthProvider, Transport } from "@modelcontextprotocol/client";
import type { Agent } from "undici";
import type { ServerConfig } from "../config";
import { createGuardedAgent, guardedRequest } from "../net/guarded-fetch";
import { GuardedHttpTransport } from "./http-transport";
import type { AuthChallenge } from "./sign-in";
import { BoundedStdioTransport, type LineRing } from "./stdio-transport";

/**
 * One server's guarded undici Agent, so one server's `allowPrivate` is never another's hole:
 * created on first use, kept across reconnects (its pooled connections with it), closed on stop.
 */
export class ServerAgent {
  private agent: Agent | null = null;

  constructor(private readonly config: ServerConfig) {}

  get(): Agent {
    this.agent ??= createGuardedAgent({
      server: this.config.name,
      allowPrivate: this.config.allowPrivate,
      connectTimeoutMs: this.config.timeoutMs,
    });
    return this.agent;
  }

  async close(): Promise<void> {
    const agent = this.agent;
    this.agent = null;
    await agent?.close().catch(() => undefined);
  }
}

export interface TransportDeps {
  /** Where a stdio child's stderr lines go. */
  stderr: LineRing;
  agent: ServerAgent;
  /** An HTTP server sent a message over `maxFrameBytes`: the connection is not to be trusted. */
  onFatal(error: Error): void;
  /** An OAuth server's bearer source (see `SignInSource`); none otherwise. */
  authProvider?: AuthProvider;
  /** An HTTP server answered 401 or 403 with a Bearer challenge. */
  onChallenge?(status: 401 | 403, challenge: AuthChallenge & { error: string | null }): void;
}

/**
 * A fresh transport for one connection to `config`'s server: a bounded stdio child, or streamable
 * HTTP / legacy SSE through the server's outbound guard. Throws when the config cannot be dialled
 * (an invalid URL).
 */
export function createTransport(config: ServerConfig, deps: TransportDeps): Transport {
  const c = config;
  if (c.transport === "stdio") {
    return new BoundedStdioTransport({
      command: c.command ?? "",
      args: c.args,
      env: c.env,
      cwd: c.cwd,
      maxFrameBytes: c.maxFrameBytes,
      stderr: deps.stderr,
    });
  }
  return new GuardedHttpTransport({
    url: new URL(c.url ?? ""),
    kind: c.transport === "sse" ? "sse" : "http",
    headers: c.headers,
    send: guardedRequest(deps.agent.get(), {
      allowPrivate: c.allowPrivate,
      server: c.name,
      credentialHeaders: Object.keys(c.headers),
      minIntervalMs: c.minIntervalMs,
    }),
    maxFrameBytes: c.maxFrameBytes,
    onFatal: deps.onFatal,
    ...(deps.authProvider ? { authProvider: deps.authProvider } : {}),
    ...(deps.onChallenge ? { onChallenge: deps.onChallenge } : {}),
  });
}
