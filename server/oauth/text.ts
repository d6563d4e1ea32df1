import "server-only";
import { OAuthErrorCode } from "@modelcontextprotocol/client";
import { redact } from "../log";
import { messageOf, oneLine } from "../mcp/failures";
import type { GrantSecrets } from "./store";

/**
 * Small pure helpers of the sign-in modules: how an error, a scope, an expiry and a grant's
 * secrets are read and said. Nothing here holds state or talks to the outside.
 */

export const URL_CHANGED = "the server's URL changed since the sign-in: an owner must sign in again";

/** Error codes with which an authorization server says a grant or client is no longer good. */
export const REFUSED_GRANT = new Set<string>([
  OAuthErrorCode.InvalidGrant,
  OAuthErrorCode.InvalidClient,
  OAuthErrorCode.UnauthorizedClient,
]);

/**
 * An error in the owner's words, as the log, the audit and an API error carry it: an
 * authorization server's error text is its own (its `error_description`, a whole error body), so
 * it is cut to one short line, with Gatehouse's secrets redacted.
 */
export function shortWhy(err: unknown): string {
  return oneLine(redact(messageOf(err)));
}

export function splitScope(scope: string | null | undefined): string[] {
  return (scope ?? "").split(" ").filter((s) => s.length > 0);
}

/** When a token given now (`now`, ms) with `expires_in` seconds expires; null when it names none. */
export function expiryOf(expiresIn: number | undefined, now: number): string | null {
  return typeof expiresIn === "number" && Number.isFinite(expiresIn) && expiresIn > 0
    ? new Date(now + expiresIn * 1000).toISOString()
    : null;
}

/** The values of a grant that must never reach a log line. */
export function secretValues(secrets: GrantSecrets): string[] {
  const out: string[] = [];
  if (secrets.tokens?.access_token) out.push(secrets.tokens.access_token);
  if (secrets.tokens?.refresh_token) out.push(secrets.tokens.refresh_token);
  if (secrets.tokens?.id_token) out.push(secrets.tokens.id_token);
  if (secrets.client?.client_secret) out.push(secrets.client.client_secret);
  // RFC 7592's management token, when the registration answer carried one (the SDK keeps it).
  const management = (secrets.client as { registration_access_token?: unknown } | undefined)
    ?.registration_access_token;
  if (typeof management === "string") out.push(management);
  return out;
}

/** RFC 8414's `revocation_endpoint` of the metadata found at sign-in (a string, else none). */
export function revocationEndpoint(secrets: GrantSecrets): string | undefined {
  const metadata = secrets.discovery?.authorizationServerMetadata as
    | { revocation_endpoint?: unknown }
    | undefined;
  return typeof metadata?.revocation_endpoint === "string" ? metadata.revocation_endpoint : undefined;
}

/** Whether `err` (or one of its causes) is the outbound guard's refusal of an address or redirect. */
export function isRefusedAddress(err: unknown): boolean {
  for (let e: unknown = err, i = 0; e instanceof Error && i < 8; e = e.cause, i++) {
    const code = (e as { code?: unknown }).code;
    if (code === "GATEHOUSE_REFUSED_ADDRESS" || code === "GATEHOUSE_REDIRECT_REFUSED") return true;
  }
  return false;
}
