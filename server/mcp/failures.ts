import { isIP } from "node:net";
import "server-only";
import {
  InsufficientScopeError,
  OAuthClientFlowError,
  ProtocolError,
  SdkError,
  SdkErrorCode,
  SdkHttpError,
  SseError,
  SUPPORTED_PROTOCOL_VERSIONS,
  UnauthorizedError,
} from "@modelcontextprotocol/client";
import { isSignInRequired } from "./sign-in";

/**
 * What a connection failure means for the next try:
 * - `permanent`: trying again cannot help until something changes (the server's credentials,
 *   its protocol, the address policy): the server goes to `failed` at once, and only the owner's
 *   Reconnect dials again.
 * - `session_lost`: the server forgot our streamable-HTTP session (it restarted): start a new
 *   session at once.
 * - `needs_auth`: the server wants an OAuth sign-in that only an owner can give (none yet, a
 *   refresh the authorization server refused, a token refused after renewal, more scope):
 *   state `needs_auth`, nothing dialled until the owner's Connect or Reconnect.
 * - `transient`: anything else (refused or reset connections, timeouts, 5xx, a process that
 *   died): the usual backoff.
 */
export type FailureKind = "permanent" | "session_lost" | "needs_auth" | "transient";

export interface Failure {
  kind: FailureKind;
  /** Plain-language reason, for `lastError`, the history and the log. */
  reason: string;
}

/**
 * JSON-RPC error code a server that speaks only newer protocol revisions answers `initialize`
 * with (the v2 SDK's `UnsupportedProtocolVersion`, e.g. under `legacy: "reject"`).
 */
export const UNSUPPORTED_PROTOCOL_VERSION_CODE = -32022;

/** The stateless revision Gatehouse speaks besides the 2025 ones (`SUPPORTED_PROTOCOL_VERSIONS`). */
export const MODERN_PROTOCOL_VERSION = "2026-07-28";

/**
 * JSON-RPC error code of the answers Gatehouse synthesises when a server's stream breaks: -32000,
 * the code MCP SDKs have long used for "connection closed" (the v2 SDK says it with a string code
 * of its own, which a JSON-RPC error cannot carry). Not -32001, a timeout, which would report a
 * broken stream as one.
 */
export const STREAM_ENDED_CODE = -32000;

/** Whether `err` is the SDK's own "the connection closed" (the request under way failed with it). */
export function connectionClosed(err: unknown): boolean {
  return err instanceof SdkError && err.code === SdkErrorCode.ConnectionClosed;
}

/** Whether `err` is the SDK's "the era negotiation failed" (the server/discover probe got no usable answer). */
export function negotiationFailed(err: unknown): boolean {
  return err instanceof SdkError && err.code === SdkErrorCode.EraNegotiationFailed;
}

/** Whether `err` is the SDK's request timeout (its deadline fired, or the request was aborted). */
export function requestTimedOut(err: unknown): boolean {
  return err instanceof SdkError && err.code === SdkErrorCode.RequestTimeout;
}

/**
 * Requests that may be sent again on a new session after the old one was lost: they only read.
 * `tools/call` is never among them: a call may have run, and running it twice is the caller's
 * decision, never ours.
 */
export const RETRY_SAFE_METHODS: ReadonlySet<string> = new Set([
  "ping",
  "tools/list",
  "resources/list",
  "resources/templates/list",
  "resources/read",
  "prompts/list",
  "prompts/get",
  "completion/complete",
]);

/**
 * A streamable-HTTP server answered a request carrying our `Mcp-Session-Id` with 404 (the spec's
 * "this session is gone") or a 400 naming the session (what the SDK's example servers and
 * server-everything answer once restarted). `methods` are the JSON-RPC requests that POST
 * carried (none for the GET event stream).
 */
export class SessionLostError extends Error {
  readonly code = "GATEHOUSE_SESSION_LOST";

  constructor(
    readonly methods: readonly string[],
    readonly status: number,
  ) {
    super(`the server no longer knows Gatehouse's session (HTTP ${status}); it has probably restarted`);
  }

  /** Whether every request it refused only reads, so it may be sent again on a new session. */
  get retrySafe(): boolean {
    return this.methods.length > 0 && this.methods.every((m) => RETRY_SAFE_METHODS.has(m));
  }
}

/**
 * The rest of the sentence "server X …" for a request that met a lost session and was not sent
 * again: it says the outcome of a tool call is unknown, never that the call failed.
 */
export function notRetried(err: SessionLostError): string {
  const what = err.methods.includes("tools/call") ? "the call" : "the request";
  return `restarted and no longer knows Gatehouse's session: ${what} was not retried (a tool call is never sent twice), so whether it ran is unknown; Gatehouse is starting a new session`;
}

/** `err` and its causes, outermost first (bounded: a cause chain may loop). */
function chain(err: unknown): unknown[] {
  const out: unknown[] = [];
  for (let e = err; e !== undefined && e !== null && out.length < 8; e = (e as { cause?: unknown }).cause) {
    out.push(e);
    if (!(e instanceof Error)) break;
  }
  return out;
}

/**
 * Whether a request failed because the server could not be reached or its answer never arrived
 * whole (a refused or reset connection, an HTTP error status, a broken stream), rather than
 * because the server answered with an error, the caller gave up, or the SDK refused a result.
 */
export function unreached(err: unknown): boolean {
  return chain(err).some(
    (e) =>
      e instanceof SdkHttpError ||
      e instanceof SseError ||
      connectionClosed(e) ||
      (e instanceof ProtocolError && e.code === STREAM_ENDED_CODE) ||
      (e instanceof TypeError && e.message === "fetch failed"),
  );
}

/** JSON-RPC codes MCP SDKs use for this side's own failures (a closed connection, a timeout). */
const LOCAL_RPC_CODES: ReadonlySet<number> = new Set([STREAM_ENDED_CODE, -32001]);

/** System error codes of a dial that never connected: nothing was sent. */
const NEVER_CONNECTED: ReadonlySet<string> = new Set([
  "ECONNREFUSED",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "GATEHOUSE_REFUSED_ADDRESS",
]);

/**
 * Whether a `tools/call` that failed with `err` may have run on the server: the request went out
 * and no answer came back (the process died or the connection closed or broke under it, the
 * session was lost, the deadline passed). A timed-out call counts: the cancellation Gatehouse
 * sends is a request the server may ignore, and the work may be done, or half done, by then.
 *
 * False when nothing was sent (Gatehouse refused before sending: `server_unavailable` and every
 * other code but `upstream_error` and `upstream_timeout`; a dial refused or never resolved) or
 * when the server did answer: a JSON-RPC error of its own, a result the SDK refused or that was
 * empty (no cause), an HTTP status below 500 (refused at the door), or a refusal the auth layer
 * turned into an error of its own without a status (a 403 `insufficient_scope`, a 401 that asks
 * for a sign-in, no usable token to send: {@link refusedByAuth}). `err` is what the request layer
 * threw: a `GatehouseError` whose `cause` is the transport's or the SDK's error.
 */
export function outcomeUnknown(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  if (code === "upstream_timeout") return true;
  if (code !== "upstream_error") return false;
  const causes = chain(err).slice(1);
  if (causes.length === 0) return false;
  for (const e of causes) {
    if (e instanceof ProtocolError && !LOCAL_RPC_CODES.has(e.code)) return false;
    if (e instanceof SdkError && e.code === SdkErrorCode.InvalidResult) return false;
    if (refusedByAuth(e)) return false;
    const status = httpStatus(e);
    if (status !== null && status < 500) return false;
    const sys = (e as { code?: unknown }).code;
    if (typeof sys === "string" && NEVER_CONNECTED.has(sys)) return false;
  }
  return true;
}

/**
 * Whether `err` is the auth layer's word that the request was refused at the door or never sent:
 * the server's 403 `insufficient_scope` (the SDK's `InsufficientScopeError`, which carries no
 * status), a 401 the SDK could not answer (`UnauthorizedError`), an OAuth flow that failed before
 * a token could be sent (`OAuthClientFlowError`), or no usable grant (`SignInRequiredError`). The
 * server ran nothing in each case.
 */
function refusedByAuth(err: unknown): boolean {
  return (
    err instanceof InsufficientScopeError ||
    err instanceof OAuthClientFlowError ||
    err instanceof UnauthorizedError ||
    isSignInRequired(err)
  );
}

/**
 * A readable message for any thrown value, with the reason at the end of its cause chain: undici
 * reports every network failure as "fetch failed" with the reason (the outbound guard's refusal,
 * ECONNREFUSED, ...) only in `cause`, and the SDK wraps that again (its era probe says "Version
 * negotiation probe failed: fetch failed"); without it lastError would not say what happened.
 */
export function messageOf(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const causes = chain(err).filter((e): e is Error => e instanceof Error);
  const innermost = causes.length > 1 ? (causes.at(-1)?.message ?? "") : "";
  // The guard's own refusals say everything the owner needs ("refused: localhost resolves to …").
  const refusal = causes.find((e) => e.message.startsWith("refused: "));
  if (refusal) return refusal.message;
  return innermost && !err.message.includes(innermost) ? `${err.message}: ${innermost}` : err.message;
}

/** HTTP status of an SDK transport error (streamable HTTP or legacy SSE), if it carries one. */
function httpStatus(err: unknown): number | null {
  if (err instanceof SdkHttpError && typeof err.status === "number") return err.status;
  if (err instanceof SseError && typeof err.code === "number") return err.code;
  return null;
}

/** A protocol version as the server wrote it, if it looks like one (it is shown to the owner). */
function shownVersion(v: unknown): string | null {
  return typeof v === "string" && /^[\w.-]{1,32}$/.test(v) ? v : null;
}

/** The versions a refusing server says it supports (JSON-RPC error data `supported`), sanitised. */
function supportedBy(data: unknown): string[] {
  const list = (data as { supported?: unknown } | null)?.supported;
  if (!Array.isArray(list)) return [];
  return list
    .map(shownVersion)
    .filter((v): v is string => v !== null)
    .slice(0, 8);
}

/** The JSON-RPC error inside an SDK HTTP error's message ("Error POSTing to endpoint: {…}"). */
function embeddedRpcError(message: string): { code?: unknown; message?: unknown; data?: unknown } | null {
  const start = message.indexOf("{");
  if (start === -1) return null;
  try {
    const body = JSON.parse(message.slice(start)) as { error?: unknown };
    return body.error && typeof body.error === "object" ? (body.error as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

const OURS = [MODERN_PROTOCOL_VERSION, ...SUPPORTED_PROTOCOL_VERSIONS].join(", ");

/** The JSON-RPC error a version refusal came as: the SDK's ProtocolError, or the body of a 400. */
function versionRefusal(err: unknown): { code?: unknown; message?: unknown; data?: unknown } | null {
  const message = err instanceof Error ? err.message : "";
  if (err instanceof ProtocolError) return { code: err.code, message: err.message, data: err.data };
  if (httpStatus(err) === 400) return embeddedRpcError(message);
  return null;
}

/**
 * Whether `err` (or a cause) is a server refusing the 2025 handshake while saying it speaks
 * 2026-07-28 (-32022 with `data.supported`): a server Gatehouse can talk to once it probes with
 * `server/discover` (it was upgraded, or it answered the probe too late), never a permanent refusal.
 */
export function speaksModern(err: unknown): boolean {
  return chain(err).some((e) => {
    const rpc = versionRefusal(e);
    return (
      rpc?.code === UNSUPPORTED_PROTOCOL_VERSION_CODE &&
      supportedBy(rpc.data).includes(MODERN_PROTOCOL_VERSION)
    );
  });
}

function unsupportedVersion(err: unknown): string | null {
  const message = err instanceof Error ? err.message : "";
  // The SDK client's own check of the version the server chose in its initialize result.
  const chosen = /protocol version is not supported: (.*)$/.exec(message);
  if (chosen) {
    const v = shownVersion(chosen[1]);
    return `the server answered with MCP protocol version ${v ?? "(unreadable)"}, which Gatehouse does not speak (it speaks ${OURS})`;
  }
  const rpc = versionRefusal(err);
  if (!rpc) return null;
  const text = typeof rpc.message === "string" ? rpc.message : "";
  if (rpc.code !== UNSUPPORTED_PROTOCOL_VERSION_CODE && !/unsupported protocol version/i.test(text))
    return null;
  const theirs = supportedBy(rpc.data);
  const they = theirs.length > 0 ? ` (it speaks ${theirs.join(", ")})` : "";
  return `the server does not support the MCP protocol versions Gatehouse speaks (${OURS})${they}`;
}

/** Whether `err` (or a cause) is a server refusing the protocol versions Gatehouse offered. */
export function refusedVersion(err: unknown): boolean {
  return chain(err).some((e) => unsupportedVersion(e) !== null);
}

/**
 * The one place that decides whether a connection failure is worth retrying, and says why in
 * words an owner can act on. `credentials`: the server has configured headers (a 401 then means
 * they were not accepted, rather than missing). `literalAddress`: false when the server's URL
 * names a host rather than an IP address (default: treated as literal). `oauth`: the connection
 * was dialled with an OAuth grant's tokens. `challenged`: the server's 401 named its
 * protected-resource metadata (it asks for an OAuth sign-in). Unknown errors are transient.
 */
export function classifyFailure(
  err: unknown,
  ctx: { credentials: boolean; literalAddress?: boolean; oauth?: boolean; challenged?: boolean },
): Failure {
  const all = chain(err);
  if (all.some((e) => e instanceof SessionLostError)) {
    return { kind: "session_lost", reason: messageOf(err) };
  }
  const signIn = all.find(isSignInRequired);
  if (signIn) return { kind: "needs_auth", reason: signIn.message };
  const scope = all.find((e): e is InsufficientScopeError => e instanceof InsufficientScopeError);
  if (scope && ctx.oauth) return { kind: "needs_auth", reason: moreScope(scope.requiredScope) };
  if (scope) {
    // No OAuth grant to widen: the credentials in its headers do not allow what it needs.
    return {
      kind: "permanent",
      reason: `the server refused access (HTTP 403 insufficient_scope${scope.requiredScope ? `, asking for ${oneLine(scope.requiredScope)}` : ""}): check the credentials in its headers in gatehouse.json and what they allow`,
    };
  }
  const refused = all.find(
    (e): e is Error => e instanceof Error && (e as { code?: unknown }).code === "GATEHOUSE_REFUSED_ADDRESS",
  );
  // The guard's words already name the address, its kind and the fix ("set allowPrivate"). An IP
  // literal is refused for good; a name only for what it resolves to now (a DNS filter's sinkhole or
  // a split-horizon flap may pass), so it is retried at the backoff's pace.
  if (refused)
    return { kind: ctx.literalAddress === false ? "transient" : "permanent", reason: refused.message };
  for (const e of all) {
    const status = httpStatus(e);
    if (status === 401 && ctx.oauth) {
      return {
        kind: "needs_auth",
        reason:
          "the server refused Gatehouse's token even after renewing it (HTTP 401): an owner must sign in again",
      };
    }
    if (status === 401 && ctx.challenged) {
      return {
        kind: "needs_auth",
        reason:
          "the server asks for an OAuth sign-in (HTTP 401 naming its resource metadata): an owner can press Connect",
      };
    }
    if (status === 401) {
      return {
        kind: "permanent",
        reason: ctx.credentials
          ? "the server did not accept the credentials in its headers (HTTP 401): check them in gatehouse.json"
          : 'the server requires authorization (HTTP 401) and names no OAuth resource metadata: set the credentials it expects in its headers in gatehouse.json, or "auth": {"type": "oauth"} if it signs in with OAuth',
      };
    }
    if (status === 403) {
      return {
        kind: "permanent",
        reason:
          "the server refused access (HTTP 403): check the credentials in its headers in gatehouse.json and what they allow",
      };
    }
    if (speaksModern(e)) {
      return {
        kind: "transient",
        reason: `the server speaks only ${MODERN_PROTOCOL_VERSION} and refused the 2025 handshake; Gatehouse dials it again with server/discover`,
      };
    }
    const version = unsupportedVersion(e);
    if (version) return { kind: "permanent", reason: version };
  }
  for (const e of all) {
    const status = httpStatus(e);
    if (status !== null && status >= 100)
      return { kind: "transient", reason: httpReason(e as Error, status) };
  }
  return { kind: "transient", reason: messageOf(err) };
}

/** Longest scope text of a server's challenge kept in a reason. */
const SCOPE_TEXT_MAX = 200;

/**
 * "the server asks for more scope (…)": the scope is the server's text, kept to RFC 6749 scope
 * characters and cut, so it cannot bring control characters or a page of text into the reason.
 */
export function moreScope(required: string | null | undefined): string {
  const cleaned = (required ?? "")
    .replace(/[^\x21\x23-\x5B\x5D-\x7E]+/g, " ")
    .replace(/\s+/g, " ")
    .trim();
  const shown = cleaned.length > SCOPE_TEXT_MAX ? `${cleaned.slice(0, SCOPE_TEXT_MAX)}…` : cleaned;
  const what = shown ? ` (${shown})` : "";
  return `the server asks for more scope than was granted${what}: an owner must sign in again to grant it`;
}

/** Most characters of a server's error text kept in a reason. */
const SERVER_TEXT_MAX = 200;

/**
 * "the server answered HTTP 503: <its text>": the SDK's own message omits the status and
 * carries the whole body, which the server chose.
 */
function httpReason(err: Error, status: number): string {
  const shown = oneLine(
    err.message
      .replace(/^(Streamable HTTP error|SSE error): /, "")
      .replace(/^(Error POSTing to endpoint|Failed to open SSE stream)(: )?/, ""),
  );
  return `the server answered HTTP ${status}${shown ? `: ${shown}` : ""}`;
}

/**
 * Text a server or an authorization server chose, as a reason may carry it: one line, at most
 * {@link SERVER_TEXT_MAX} characters (an error body can be a page long).
 */
export function oneLine(text: string): string {
  const line = text.replace(/\s+/g, " ").trim();
  return line.length > SERVER_TEXT_MAX ? `${line.slice(0, SERVER_TEXT_MAX)}…` : line;
}

/**
 * Whether an HTTP server's URL names an IP address, or `localhost` (true for stdio servers:
 * nothing is dialled).
 */
function literalHost(url: string | null): boolean {
  if (url === null) return true;
  try {
    const host = new URL(url).hostname.replace(/^\[|\]$/g, "").toLowerCase();
    // `localhost` always means loopback (RFC 6761): as fixed as a literal address.
    return isIP(host) !== 0 || host === "localhost" || host.endsWith(".localhost");
  } catch {
    return true;
  }
}

/** What {@link classifyFailure} needs to know of a server's config. */
export function failureContext(config: { headers: Record<string, string>; url: string | null }): {
  credentials: boolean;
  literalAddress: boolean;
} {
  return { credentials: Object.keys(config.headers).length > 0, literalAddress: literalHost(config.url) };
}
