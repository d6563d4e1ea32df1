import "server-only";
import { randomBytes } from "node:crypto";
import { auth, computeScopeUnion } from "@modelcontextprotocol/client";
import { GatehouseError } from "@/lib/errors";
import type { ServerConfig } from "../config";
import { writeAudit } from "../store/audit";
import { emptyFlow } from "./provider";
import { CALLBACK_PATH, SIGN_IN_TTL_MS, type SignInState } from "./sign-in-state";
import { type Grant, type SavedClient, sha256Hex } from "./store";
import { shortWhy } from "./text";

/**
 * An owner's Connect: discovery (RFC 9728, then RFC 8414 or OpenID configuration), registration
 * when needed, PKCE and the authorization URL (all of it the SDK's `auth()`), and the started
 * sign-in kept sealed until the browser comes back.
 */

/** Who pressed Connect, from which browser and page. */
export interface SignInStart {
  server: string;
  /** The owner's name (audited as the one who connected). */
  actor: string;
  /** The origin of the page Connect was pressed on (already checked against the allow-list). */
  origin: string;
}

/**
 * Starts an owner's sign-in: discovery, registration when needed, the authorization URL. Returns
 * it with the binding that ties the sign-in to this browser (the route sets it in a cookie):
 * minted for this sign-in alone, never one the browser already holds, which a page on another
 * port of the same host could have planted over plain http.
 * The scope asked for is the union of the entry's scopes, the ones granted before and the ones
 * the server's latest `insufficient_scope` named, so a step-up keeps what was granted.
 */
export async function beginSignIn(
  s: SignInState,
  start: SignInStart,
): Promise<{ authorizationUrl: string; binding: string }> {
  const c = s.config(start.server);
  if (c.transport === "stdio" || !s.isOAuth(c)) {
    throw new GatehouseError(
      "not_oauth",
      `server ${c.name} does not sign in with OAuth: set "auth": {"type": "oauth"} on it in gatehouse.json`,
    );
  }
  const serverUrl = c.url ?? "";
  const origin = (s.deps.publicOrigin ?? start.origin).replace(/\/$/, "");
  const redirectUri = `${origin}${CALLBACK_PATH}`;
  const grant = s.grant(c.name);
  const stepUp = s.stepUps.get(c.name);
  const scope =
    computeScopeUnion(
      c.auth && c.auth.scopes.length > 0 ? c.auth.scopes.join(" ") : undefined,
      grant?.scope ?? undefined,
      stepUp?.scope ?? undefined,
    ) ?? null;
  const state = randomBytes(32).toString("base64url");
  const flow = emptyFlow(state);
  flow.client = await reusableClient(s, c.name, grant, stepUp !== undefined);
  const provider = s.provider(c, flow, redirectUri, scope);
  const challenge = s.challenges.get(c.name) ?? stepUp;
  try {
    const result = await auth(provider, {
      serverUrl,
      ...(scope ? { scope } : {}),
      ...(challenge?.resourceMetadataUrl
        ? { resourceMetadataUrl: new URL(challenge.resourceMetadataUrl) }
        : {}),
      fetchFn: s.fetchFor(c),
      forceReauthorization: true,
    });
    if (result !== "REDIRECT" || !flow.authorizationUrl || !flow.codeVerifier) {
      throw new Error("the authorization server gave no authorization URL");
    }
    checkAuthorizationUrl(flow.authorizationUrl);
  } catch (err) {
    throw unavailable(s, c, err);
  }
  const binding = randomBytes(32).toString("base64url");
  await s.store.savePending(
    sha256Hex(state),
    {
      server: c.name,
      bindingHash: sha256Hex(binding),
      startedBy: start.actor,
      expiresAt: new Date(s.now() + SIGN_IN_TTL_MS).toISOString(),
      secrets: {
        codeVerifier: flow.codeVerifier,
        discovery: flow.discovery,
        client: flow.client,
        redirectUri,
        scope,
        resource: serverUrl,
      },
    },
    s.now(),
  );
  const issuer =
    flow.discovery?.authorizationServerMetadata?.issuer ?? flow.discovery?.authorizationServerUrl;
  await writeAudit(s.deps.db, {
    actor: start.actor,
    action: "server.oauth.started",
    subject: c.name,
    detail: JSON.stringify({ issuer: issuer ?? null, scope }),
  });
  return { authorizationUrl: flow.authorizationUrl.href, binding };
}

/**
 * The registration a Connect may use again, or null to register anew: not for a step-up
 * (authorization servers hold a registered client to the scope it registered with), not once its
 * secret has expired (RFC 7591 `client_secret_expires_at`), and not while an earlier sign-in of
 * this server never came back (its authorization server may have refused the client on its own
 * page, where Gatehouse cannot see it: a client it forgot would otherwise be sent for good).
 */
async function reusableClient(
  s: SignInState,
  server: string,
  grant: Grant | null,
  stepUp: boolean,
): Promise<SavedClient | null> {
  const client = grant?.secrets.client;
  if (!client || stepUp || (await s.store.hasPending(server))) return null;
  const expiresAt = client.client_secret_expires_at;
  if (typeof expiresAt === "number" && expiresAt > 0 && expiresAt * 1000 <= s.now()) return null;
  return client;
}

/** A sign-in that could not start, in the owner's words (the guard's refusal said as it is). */
function unavailable(s: SignInState, c: ServerConfig, err: unknown): GatehouseError {
  const why = shortWhy(err);
  s.deps.log.warn(`server ${c.name}: the sign-in could not start: ${why}`);
  return new GatehouseError("sign_in_unavailable", `the sign-in to ${c.name} could not start: ${why}`);
}

/**
 * The browser is sent only to an https authorization endpoint, or plain http on loopback (a
 * development server on this machine, as the SDK allows for token endpoints): the URL comes from
 * metadata the server's side wrote, and a `javascript:` or plain-http remote one is no sign-in page.
 */
export function checkAuthorizationUrl(url: URL): void {
  const host = url.hostname.replace(/^\[|\]$/g, "");
  const loopback = host === "localhost" || host === "::1" || /^127\.\d+\.\d+\.\d+$/.test(host);
  if (url.protocol === "https:" || (url.protocol === "http:" && loopback)) return;
  throw new Error(
    `the authorization endpoint ${url.protocol === "http:" ? "is plain http on a remote host" : `uses ${url.protocol}`}; only https is followed`,
  );
}
