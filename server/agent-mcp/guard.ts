import "server-only";
import type { Principal } from "../auth/access";
import { type AgentToken, tokenFromSecret } from "../auth/tokens";
import type { AgentEndpointConfig } from "../config";
import type { Db } from "../store/db";

/**
 * Which `Host` and `Origin` values Gatehouse answers (DNS-rebinding protection): one list for
 * every request, `/mcp`, the JSON API and the console's pages alike.
 */
export interface AllowedPeers {
  hosts: ReadonlySet<string>;
  origins: ReadonlySet<string>;
}

export interface AllowedPeersInput {
  /** `HOST` the server listens on (default 127.0.0.1). */
  host?: string;
  /** `PORT` (default 3000). */
  port?: string;
  /** `GATEHOUSE_PUBLIC_ORIGIN`, when Gatehouse is reached through a proxy. */
  publicOrigin?: string;
  /** `agentEndpoint.allowedHosts` / `allowedOrigins` from the config: added to the defaults. */
  extraHosts?: readonly string[];
  extraOrigins?: readonly string[];
}

/** The config key that adds a name to the `Host` allow-list: what a refusal tells the operator. */
export const ALLOWED_HOSTS_KEY = "agentEndpoint.allowedHosts";

/** Listen addresses that no client ever sends as a Host. */
const WILDCARDS = new Set(["0.0.0.0", "::", "[::]"]);

/**
 * The default allow-list: the loopback names on Gatehouse's port (127.0.0.1, localhost, [::1]),
 * the listen host itself when it is a real name, and `GATEHOUSE_PUBLIC_ORIGIN`. Anything else
 * must be listed in `agentEndpoint` in the config. Hosts and origins are compared lowercased.
 */
export function allowedPeers(input: AllowedPeersInput): AllowedPeers {
  const port = input.port ?? "3000";
  const names = new Set(["127.0.0.1", "localhost", "[::1]"]);
  const listen = input.host?.trim().toLowerCase();
  if (listen && !WILDCARDS.has(listen)) names.add(listen.includes(":") ? `[${listen}]` : listen);
  const hosts = new Set<string>();
  const origins = new Set<string>();
  for (const name of names) {
    hosts.add(`${name}:${port}`);
    origins.add(`http://${name}:${port}`);
    // Browsers and HTTP clients leave the default port out of Host and Origin.
    if (port === "80") {
      hosts.add(name);
      origins.add(`http://${name}`);
    }
  }
  if (input.publicOrigin) {
    try {
      const u = new URL(input.publicOrigin);
      hosts.add(u.host.toLowerCase());
      origins.add(u.origin.toLowerCase());
    } catch {
      // An unparsable public origin allows nothing extra.
    }
  }
  for (const h of input.extraHosts ?? []) hosts.add(h.toLowerCase());
  for (const o of input.extraOrigins ?? []) origins.add(o.toLowerCase().replace(/\/$/, ""));
  return { hosts, origins };
}

/**
 * The allow-list of a running Gatehouse: `HOST` and `PORT` from `env`, `GATEHOUSE_PUBLIC_ORIGIN`
 * and the config's `agentEndpoint`. The edge (every request) and `/mcp` build theirs with this,
 * so both answer the same names.
 */
export function allowedPeersFor(
  env: Readonly<Record<string, string | undefined>>,
  publicOrigin: string | undefined,
  agentEndpoint: AgentEndpointConfig | undefined,
): AllowedPeers {
  return allowedPeers({
    host: env.HOST,
    port: env.PORT,
    publicOrigin,
    extraHosts: agentEndpoint?.allowedHosts,
    extraOrigins: agentEndpoint?.allowedOrigins,
  });
}

/** Longest part of a refused `Host` repeated in the refusal. */
const SHOWN_HOST_CHARS = 200;

/**
 * Why a request with this `Host` header value must be refused before anything else happens, or
 * null. `Host` is required (absent: refused) and must be on the list: a page on another site
 * that reached Gatehouse through DNS rebinding sends its own name. The reason names the refused
 * host (its first 200 characters) and the key that would allow it, nothing of the list itself.
 */
export function hostProblem(hostHeader: string | null | undefined, allowed: AllowedPeers): string | null {
  const host = hostHeader?.toLowerCase() ?? "";
  if (allowed.hosts.has(host)) return null;
  const shown = JSON.stringify(host.slice(0, SHOWN_HOST_CHARS));
  return `requests for host ${shown} are not accepted; add it to ${ALLOWED_HOSTS_KEY} in the config if Gatehouse is reached under that name`;
}

/**
 * Why a request to `/mcp` must be refused before anything else happens, or null: its `Host`
 * ({@link hostProblem}), then its `Origin`, which is optional (agents are not browsers) but,
 * when present, must be allowed — a rebinding page carries its own origin.
 */
export function peerProblem(headers: Headers, allowed: AllowedPeers): string | null {
  const host = hostProblem(headers.get("host"), allowed);
  if (host) return host;
  const origin = headers.get("origin");
  if (origin !== null && !allowed.origins.has(origin.toLowerCase())) {
    return `requests from origin ${JSON.stringify(origin)} are not accepted`;
  }
  return null;
}

/**
 * The agent token presented as `Authorization: Bearer <secret>`, or null (none, another scheme,
 * unknown or revoked). `/mcp` is for agents only: a session cookie is never looked at.
 */
export async function bearerAgent(db: Db, headers: Headers): Promise<AgentToken | null> {
  const m = /^Bearer\s+(\S+)$/i.exec(headers.get("authorization")?.trim() ?? "");
  return m?.[1] ? await tokenFromSecret(db, m[1]) : null;
}

/**
 * The agent token among what the edge authenticated, or null: the same answer as
 * {@link bearerAgent} for the same headers, since only a bearer token makes an agent principal.
 */
export function agentOf(principal: Principal | null): AgentToken | null {
  return principal?.kind === "agent" ? principal.token : null;
}
