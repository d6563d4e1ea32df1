import "server-only";
import type { FetchLike, OAuthClientInformationMixed } from "@modelcontextprotocol/client";
import { assertSecureTokenEndpoint } from "@modelcontextprotocol/client";
import { messageOf } from "../mcp/failures";
import { OAuthAnswerTooLargeError } from "./fetch";

/**
 * How revoking a grant's tokens at its authorization server went. `refresh_only`: the refresh
 * token was revoked, and the authorization server answered `unsupported_token_type` for the
 * access token (RFC 7009 §2.2.1; a structured JWT one, say), which stays valid until it expires.
 */
export type Revocation = "revoked" | "refresh_only" | "not_offered" | "failed";

/**
 * Revokes `tokens` at `endpoint` (RFC 7009), the refresh token first (revoking it ends its
 * access tokens at most servers), each with its `token_type_hint`; the client authenticates as
 * it does at the token endpoint: HTTP Basic with a secret, else its `client_id` in the body.
 * `not_offered` without an endpoint. `refresh_only` when the refresh token was revoked and the
 * access token's answer was `400 unsupported_token_type`. Any other answer but 200, or no
 * answer, is `failed` with the reason (never a token's value) in `problem`.
 */
export async function revokeTokens(opts: {
  endpoint: string | undefined;
  tokens: { access_token?: string; refresh_token?: string | undefined };
  client: OAuthClientInformationMixed | null;
  fetch: FetchLike;
}): Promise<{ revocation: Revocation; problem: string | null }> {
  if (!opts.endpoint) return { revocation: "not_offered", problem: null };
  let url: URL;
  try {
    // The same rule as the token endpoint's: no credential over plain http to a remote host.
    url = assertSecureTokenEndpoint(opts.endpoint);
  } catch (err) {
    return { revocation: "failed", problem: err instanceof Error ? err.message : String(err) };
  }
  const tries: [string, string][] = [];
  if (opts.tokens.refresh_token) tries.push([opts.tokens.refresh_token, "refresh_token"]);
  if (opts.tokens.access_token) tries.push([opts.tokens.access_token, "access_token"]);
  let refreshRevoked = false;
  for (const [token, hint] of tries) {
    const body = new URLSearchParams({ token, token_type_hint: hint });
    const headers = new Headers({ "Content-Type": "application/x-www-form-urlencoded" });
    const client = opts.client;
    if (client?.client_secret) {
      const basic = `${encodeURIComponent(client.client_id)}:${encodeURIComponent(client.client_secret)}`;
      headers.set("Authorization", `Basic ${Buffer.from(basic).toString("base64")}`);
    } else if (client) {
      body.set("client_id", client.client_id);
    }
    try {
      const res = await opts.fetch(url, { method: "POST", headers, body });
      // Read (through the fetch's cap) only for the error code an unrevokable token is told by.
      const code = res.status === 400 ? errorCode(await res.text()) : null;
      if (res.status !== 400) await res.body?.cancel().catch(() => undefined);
      if (hint === "refresh_token" && res.status === 200) refreshRevoked = true;
      if (hint === "access_token" && refreshRevoked && code === "unsupported_token_type") {
        return { revocation: "refresh_only", problem: null };
      }
      if (res.status !== 200) {
        return {
          revocation: "failed",
          problem: `the revocation endpoint answered HTTP ${res.status} for the ${hint.replace("_", " ")}`,
        };
      }
    } catch (err) {
      if (err instanceof OAuthAnswerTooLargeError) return { revocation: "failed", problem: err.message };
      return {
        revocation: "failed",
        problem: `the revocation endpoint could not be reached: ${messageOf(err)}`,
      };
    }
  }
  return { revocation: "revoked", problem: null };
}

/** The `error` of an RFC 6749 error body, or null. */
function errorCode(text: string): string | null {
  try {
    const error = (JSON.parse(text) as { error?: unknown } | null)?.error;
    return typeof error === "string" ? error : null;
  } catch {
    return null;
  }
}
