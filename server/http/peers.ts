import "server-only";
import type { ErrorBody } from "@/lib/errors";
import { type AllowedPeers, allowedPeersFor, hostProblem } from "../agent-mcp/guard";
import { rpcError } from "../agent-mcp/rpc";
import type { Runtime } from "../runtime";

/**
 * The `Host` check every request passes before anything else runs (DNS-rebinding protection):
 * the production server's front door (server/http/front-door.ts) for pages, the API and `/mcp`,
 * and `route()` for the API under `next dev`, where no front door stands. The allow-list is the
 * one `/mcp` uses (server/agent-mcp/guard.ts).
 */

/** The code of a refused Host on the JSON API (as `bad_origin` is for Origin). */
export const HOST_REFUSED_CODE = "bad_host" as const;

/**
 * Why a refused Host gets 403 and not 421 Misdirected Request: `/mcp` has answered 403 from the
 * start (as the MCP SDK's own DNS-rebinding check does), and clients take 403 as final, while
 * 421 tells a browser to retry on another connection, which here only repeats the refusal.
 */
export const HOST_REFUSED_STATUS = 403;

const peersOf = new WeakMap<object, AllowedPeers>();

/**
 * The allow-list of a running Gatehouse (`HOST`/`PORT` from `env`, default `process.env`, the
 * public origin and the config's `agentEndpoint`): built once per runtime.
 */
export function edgePeers(
  runtime: Pick<Runtime, "config" | "publicOrigin">,
  env: Readonly<Record<string, string | undefined>> = process.env,
): AllowedPeers {
  let peers = peersOf.get(runtime);
  if (!peers) {
    peers = allowedPeersFor(env, runtime.publicOrigin, runtime.config.agentEndpoint);
    peersOf.set(runtime, peers);
  }
  return peers;
}

/** Whether `pathname` is the JSON API's (`/api`, `/api/...`). */
function isApi(pathname: string): boolean {
  return pathname === "/api" || pathname.startsWith("/api/");
}

/** Whether `pathname` is the agents' MCP endpoint's (`/mcp`, `/mcp/...`). */
function isMcp(pathname: string): boolean {
  return pathname === "/mcp" || pathname.startsWith("/mcp/");
}

/**
 * The refusal of a request whose Host is off the list, in the format its path speaks: the
 * JSON-RPC error `/mcp` itself gives, `{"error": {code, message}}` on the API, a line of plain
 * text for a page (plain text, so nothing of the refused name can become markup). `problem` is
 * {@link hostProblem}'s reason: the refused host and the key that would allow it, no more.
 */
export function hostRefusal(pathname: string, problem: string): Response {
  const headers = { "Cache-Control": "no-store" };
  if (isMcp(pathname)) return rpcError(HOST_REFUSED_STATUS, -32000, `Forbidden: ${problem}`, headers);
  if (isApi(pathname)) {
    const body: ErrorBody = { error: { code: HOST_REFUSED_CODE, message: problem } };
    return Response.json(body, { status: HOST_REFUSED_STATUS, headers });
  }
  return new Response(`Gatehouse: ${problem}.\n`, {
    status: HOST_REFUSED_STATUS,
    headers: { ...headers, "Content-Type": "text/plain; charset=utf-8" },
  });
}

/** {@link hostProblem} for a `Host` header value: the refusal to send, or null to go on. */
export function refuseHost(
  pathname: string,
  host: string | null | undefined,
  peers: AllowedPeers,
): Response | null {
  const problem = hostProblem(host, peers);
  return problem === null ? null : hostRefusal(pathname, problem);
}
