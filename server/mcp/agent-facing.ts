import "server-only";
import { InsufficientScopeError, ProtocolError, SdkError, SdkErrorCode } from "@modelcontextprotocol/client";
import type { ServerState } from "@/lib/api-types";
import { GatehouseError } from "@/lib/errors";
import { HIDDEN_CHARACTERS } from "@/lib/hidden-text";
import { escapeControls, redact } from "../log";
import { notRetried, requestTimedOut, SessionLostError, unreached } from "./failures";
import { isSignInRequired } from "./sign-in";

/**
 * What agents (REST `/api/calls` answers, `/mcp` tool results, and the stored outcome of a call
 * they read back) are told when a server cannot serve a request. Only Gatehouse's own words: the
 * server's name and state, never its address, its error text or its stderr, which a hostile or
 * careless server fills with whatever it likes (internal host names, a credential it was sent,
 * text addressed to the agent). Owners read the detail on the Servers page and in the log.
 */

const WHERE = "an owner can see why on the Servers page";

/** `server_unavailable`: the server is not `ready`, said by its state alone. */
export function unavailableForAgents(name: string, state: ServerState): string {
  switch (state) {
    case "connecting":
      return `server ${name} is connecting; try again shortly`;
    case "backoff":
      return `server ${name} is in backoff after a failure and will be retried; ${WHERE}`;
    case "failed":
      return `server ${name} has failed and is not retried until an owner reconnects it; ${WHERE}`;
    case "needs_auth":
      return `server ${name} waits for an owner to sign in to it; ${WHERE}`;
    case "closed":
      return `server ${name} is stopped`;
    case "dark":
      return `server ${name} is disabled`;
    case "ready":
      // Ready but without a live connection: only between a failure and its state change.
      return `server ${name} is not connected; try again shortly`;
  }
}

/** Most characters of a server's JSON-RPC error message passed on to agents. */
export const ERROR_TEXT_MAX_CHARS = 1000;

/** Characters past the cap still redacted, so a secret that straddles the cut is found whole. */
const REDACT_SLACK = 1024;

/**
 * JSON-RPC codes that stand for this side's own failures (a closed connection, a timeout, as
 * MCP SDKs have long coded them, and Gatehouse's synthesised broken-stream answer): not the
 * server's answer.
 */
const LOCAL_CODES = new Set([-32000, -32001]);

/**
 * A server's JSON-RPC error message as agents get it: `MCP error <code>:` prefixes removed (a
 * server on the v1 SDK sends its message with one, one per wrapping), hidden characters dropped, then Gatehouse's secrets
 * redacted (a server may echo the credential it was sent), control characters escaped so the
 * text stays one line, cut to {@link ERROR_TEXT_MAX_CHARS}.
 */
function serverWords(message: string): string {
  let text = message;
  for (;;) {
    const next = text.replace(/^MCP error -?\d+:\s*/, "");
    if (next === text) break;
    text = next;
  }
  const long = text.length > ERROR_TEXT_MAX_CHARS;
  // Bounded before anything else looks at it; hidden characters go before redaction, so a
  // secret split by them is still found whole.
  text = text.slice(0, ERROR_TEXT_MAX_CHARS + REDACT_SLACK).replace(HIDDEN_CHARACTERS, "");
  text = escapeControls(redact(text));
  return long || text.length > ERROR_TEXT_MAX_CHARS ? `${text.slice(0, ERROR_TEXT_MAX_CHARS)}…` : text;
}

/**
 * `upstream_error` for a request that failed. When the server answered with a JSON-RPC error,
 * that answer is the agent's to read (like an error result: what an agent needs to correct its
 * arguments), passed through {@link serverWords}. Every other failure happened on Gatehouse's
 * side of the wire and is said by its kind alone: the connection failed under the request
 * (`connectionFailed`: the supervisor recorded a failure since the request was sent), or the
 * server could not be reached or its answer never arrived whole. Their detail (addresses,
 * system errors, the server's stderr) is for owners.
 */
export function upstreamErrorForAgents(
  name: string,
  err: unknown,
  opts: { connectionFailed: boolean },
): string {
  if (opts.connectionFailed) return `server ${name}: the connection failed during the request; ${WHERE}`;
  if (isSignInRequired(err)) return unavailableForAgents(name, "needs_auth");
  if (err instanceof InsufficientScopeError) {
    return `server ${name} needs a scope for this request that Gatehouse's credentials do not carry; ${WHERE}`;
  }
  if (unreached(err))
    return `server ${name} could not be reached, or its answer did not arrive whole; ${WHERE}`;
  // The SDK refused what the server sent as the answer (a result without its content, say).
  if (err instanceof SdkError && err.code === SdkErrorCode.InvalidResult) {
    return `server ${name} returned a malformed result (not a valid MCP result); ${WHERE}`;
  }
  if (err instanceof ProtocolError && !LOCAL_CODES.has(err.code)) {
    return `server ${name} answered with an error (JSON-RPC code ${err.code}): ${serverWords(err.message)}`;
  }
  return `server ${name}: the request failed; ${WHERE}`;
}

/**
 * The error a request that failed with `err` ends in: a request that met a lost session was not
 * retried (whether a call ran is unknown), a deadline that fired is `upstream_timeout`, anything
 * else `upstream_error` said by {@link upstreamErrorForAgents}. `failure`: the reason the
 * connection failed since the request was sent, if it did.
 */
export function requestErrorForAgents(
  err: unknown,
  ctx: { name: string; timeoutMs: number; failure: string | null },
): GatehouseError {
  const { name } = ctx;
  if (err instanceof SessionLostError) {
    return new GatehouseError("upstream_error", `server ${name} ${notRetried(err)}`, { cause: err });
  }
  if (requestTimedOut(err)) {
    const late = `server ${name} did not answer within ${ctx.timeoutMs} ms`;
    return new GatehouseError("upstream_timeout", late, { cause: err });
  }
  const told = upstreamErrorForAgents(name, err, { connectionFailed: ctx.failure !== null });
  return new GatehouseError("upstream_error", told, { cause: err });
}
