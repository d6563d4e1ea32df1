import "server-only";
import type { FetchLike } from "@modelcontextprotocol/client";
import type { Agent } from "undici";
import type { ServerConfig } from "../config";
import { createGuardedAgent, guardedFetch } from "../net/guarded-fetch";

/** Tests pass a policy under which one loopback address counts as public (see server/net). */
export type AddressPolicy = (ip: string) => string | null;

/**
 * The fetch of one server's OAuth requests (metadata, registration, token, refresh, revocation),
 * through a guarded Agent of its own with the server's `allowPrivate`: a metadata document that
 * points an endpoint at a loopback, private or metadata address is refused when the request is
 * dialled. A POST (it carries a code, a verifier, a refresh token or a client secret) follows no
 * redirect; a GET follows the guard's redirects. Every request ends at the server's `timeoutMs`.
 */
export class OAuthFetch {
  private agent: Agent | null = null;

  constructor(
    private readonly config: ServerConfig,
    private readonly refuse?: AddressPolicy,
  ) {}

  get fetch(): FetchLike {
    const c = this.config;
    this.agent ??= createGuardedAgent({
      server: c.name,
      allowPrivate: c.allowPrivate,
      connectTimeoutMs: c.timeoutMs,
      ...(this.refuse ? { refuse: this.refuse } : {}),
    });
    const base = { server: c.name, allowPrivate: c.allowPrivate, credentialHeaders: [] };
    const get = guardedFetch(this.agent, base);
    const post = guardedFetch(this.agent, { ...base, refuseRedirects: true });
    return async (url, init) => {
      const signal = init?.signal
        ? AbortSignal.any([init.signal, AbortSignal.timeout(c.timeoutMs)])
        : AbortSignal.timeout(c.timeoutMs);
      const method = (init?.method ?? "GET").toUpperCase();
      // The global Response (guardedFetch's): the SDK tells an error response from error text
      // with `instanceof Response`, and undici's own class would fail it.
      return (method === "GET" || method === "HEAD" ? get : post)(url, { ...init, signal });
    };
  }

  async close(): Promise<void> {
    const agent = this.agent;
    this.agent = null;
    await agent?.close().catch(() => undefined);
  }
}
