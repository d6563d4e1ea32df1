import "server-only";
import type { AuthProvider } from "@modelcontextprotocol/client";
import type { ServerConfig } from "../config";

/**
 * What a server's 401 or 403 said about signing in (`WWW-Authenticate: Bearer …`): where its
 * protected-resource metadata is (RFC 9728) and the scope it asks for. Both are the server's
 * words: a URL to be dialled through the guard, and text to be shown only after cleaning.
 */
export interface AuthChallenge {
  resourceMetadataUrl: string | null;
  scope: string | null;
}

/**
 * The credentials a supervisor dials an OAuth server with, kept outside this room (the OAuth
 * grants live in the store, which `server/mcp` never touches): the runtime hands one in.
 */
export interface SignInSource {
  /**
   * How to dial `config`'s server: `null` when it signs in with no OAuth (stdio, a static header,
   * nothing), `{ needsSignIn }` with the reason when an owner must sign in first (nothing is
   * dialled), else the bearer source the transport asks before every request and on a 401.
   */
  credentialsFor(config: ServerConfig): { provider: AuthProvider } | { needsSignIn: string } | null;
  /** The server answered 401 naming its resource metadata: it asks for an OAuth sign-in. */
  challenged(server: string, challenge: AuthChallenge): void;
  /** A request met 403 `insufficient_scope`: the grant lacks a scope the server wants. */
  needsScope(server: string, challenge: AuthChallenge): void;
}

/**
 * No usable grant: nobody signed in yet, the refresh token was refused, the grant belongs to
 * another URL. The message is the reason an owner reads next to `needs_auth`.
 */
export class SignInRequiredError extends Error {
  readonly code = "GATEHOUSE_SIGN_IN_REQUIRED";
}

/** Whether `err` is {@link SignInRequiredError} (told by its code: it may come from another bundle's copy). */
export function isSignInRequired(err: unknown): err is SignInRequiredError {
  return err instanceof Error && (err as { code?: unknown }).code === "GATEHOUSE_SIGN_IN_REQUIRED";
}

/**
 * The challenge of a 401/403 `WWW-Authenticate` header, or null when it is no Bearer challenge.
 * Parsed here rather than by the SDK's helper, which reads only `resource_metadata` and `scope`
 * of a header it assumes is Bearer.
 */
export function readChallenge(header: string | null): (AuthChallenge & { error: string | null }) | null {
  if (header === null || !/^\s*bearer\b/i.test(header)) return null;
  const params = new Map<string, string>();
  for (const m of header.matchAll(/([A-Za-z_][\w-]*)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,]+))/g)) {
    const key = (m[1] ?? "").toLowerCase();
    if (!params.has(key)) params.set(key, (m[2] ?? m[3] ?? "").replace(/\\(.)/g, "$1"));
  }
  return {
    resourceMetadataUrl: params.get("resource_metadata") ?? null,
    scope: params.get("scope") ?? null,
    error: params.get("error") ?? null,
  };
}
