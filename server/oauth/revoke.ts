import "server-only";
import type { FetchLike, OAuthClientInformationMixed } from "@modelcontextprotocol/client";
import { assertSecureTokenEndpoint } from "@modelcontextprotocol/client";
import { messageOf } from "../mcp/failures";

/** How revoking a grant's tokens at its authorization server went. */
export type Revocation = "revoked" | "not_offered" | "failed";

/**
 * Revokes `tokens` at `endpoint` (RFC 7009), the refresh token first (revoking it ends its
 * access tokens at most servers), each with its `token_type_hint`; the client authenticates as
 * it does at the token endpoint: HTTP Basic with a secret, else its `client_id` in the body.
 * `not_offered` without an endpoint. Any answer but 200, or no answer, is `failed` with the
 * reason (never a token's value) in `problem`.
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
      await res.body?.cancel().catch(() => undefined);
      if (res.status !== 200) {
        return {
          revocation: "failed",
          problem: `the revocation endpoint answered HTTP ${res.status} for the ${hint.replace("_", " ")}`,
        };
      }
    } catch (err) {
      return {
        revocation: "failed",
        problem: `the revocation endpoint could not be reached: ${messageOf(err)}`,
      };
    }
  }
  return { revocation: "revoked", problem: null };
}
