import "server-only";
import type { ServerView } from "@/lib/api-types";
import { GatehouseError } from "@/lib/errors";
import { hostProblem } from "../agent-mcp/guard";
import { principalName } from "../auth/access";
import { readCookie } from "../auth/sessions";
import { isSecure } from "../auth/signin";
import { logger } from "../log";
import { CALLBACK_PATH, CLIENT_METADATA_PATH, type Revocation } from "../oauth";
import { clientMetadataFor } from "../oauth/provider";
import { getRuntime } from "../runtime";
import { serverView } from "../servers/status";
import { edgePeers } from "./peers";
import { json, type RouteContext, who } from "./route";

const log = logger("http");

/**
 * The cookie that binds a started sign-in to the browser that pressed Connect: HttpOnly,
 * SameSite=Lax (the authorization server's redirect back is a cross-site navigation, on which a
 * Strict cookie, like the session's, is not sent), ten minutes. Path=/, so a second Connect reads
 * it and keeps it (two sign-ins side by side both come back). Over https it has the `__Host-`
 * prefix, as the session cookie does: neither a plain-http page nor a sibling subdomain can set
 * one. Every sign-in gets a binding of its own, never one the browser already holds (over plain
 * http a page on another port of the same host can plant a cookie): the value lists the new
 * binding first and the browser's earlier well-formed ones after it (at most
 * {@link MAX_BINDINGS}), so sign-ins started side by side all come back.
 */
const MAX_BINDINGS = 4;
const BINDING = /^[A-Za-z0-9_-]{43}$/;

/** The well-formed bindings a sign-in cookie's value lists (`.`-separated). */
function bindingsOf(value: string | null): string[] {
  return (value ?? "")
    .split(".")
    .filter((b) => BINDING.test(b))
    .slice(0, MAX_BINDINGS);
}

function bindingCookieName(secure: boolean): string {
  return secure ? "__Host-gh_oauth" : "gh_oauth";
}

function bindingCookie(value: string, secure: boolean, maxAgeSeconds: number): string {
  const parts = [
    `${bindingCookieName(secure)}=${value}`,
    "Path=/",
    "HttpOnly",
    "SameSite=Lax",
    `Max-Age=${maxAgeSeconds}`,
  ];
  if (secure) parts.push("Secure");
  return parts.join("; ");
}

/**
 * `POST /api/servers/:name/oauth` (owners): starts a sign-in and answers the authorization URL
 * the browser is to open; the binding cookie goes with it, the new sign-in's binding first.
 */
export async function startSignIn(ctx: RouteContext<undefined, undefined>): Promise<Response> {
  const { runtime, req, params } = ctx;
  const origin = req.headers.get("origin");
  if (origin === null) throw new GatehouseError("bad_origin", "a sign-in is started from the console page");
  // The authorization server sends the browser back to the public origin, and the binding cookie
  // is the host's it was set on: pressed elsewhere, the sign-in could never be finished.
  const publicOrigin = runtime.publicOrigin?.replace(/\/$/, "");
  if (publicOrigin && origin !== publicOrigin) {
    throw new GatehouseError(
      "bad_request",
      `open Gatehouse at ${publicOrigin} to sign in: the authorization server sends the browser back there (GATEHOUSE_PUBLIC_ORIGIN)`,
    );
  }
  const secure = isSecure(req);
  const held = bindingsOf(readCookie(req.headers.get("cookie"), bindingCookieName(secure)));
  const { authorizationUrl, binding } = await runtime.signIns.begin({
    server: params.name ?? "",
    actor: principalName(who(ctx)),
    origin,
  });
  const value = [binding, ...held.filter((b) => b !== binding)].slice(0, MAX_BINDINGS).join(".");
  return json({ authorizationUrl }, 200, { "Set-Cookie": bindingCookie(value, secure, 600) });
}

/**
 * `DELETE /api/servers/:name/oauth` (owners): Disconnect, with how the revocation went and, when
 * the access token was not revoked, until when it stays valid at the authorization server.
 */
export async function endGrant(
  ctx: RouteContext<undefined, undefined>,
): Promise<{ server: ServerView; revocation: Revocation; accessExpiresAt: string | null }> {
  const { runtime, params } = ctx;
  const name = params.name ?? "";
  const { revocation, accessExpiresAt } = await runtime.signIns.disconnect(name, principalName(who(ctx)));
  return {
    server: await serverView(runtime.manager, runtime.db, name, runtime.signIns),
    revocation,
    accessExpiresAt,
  };
}

/**
 * `GET /oauth/callback`: where the authorization server sends the browser back. Answers a small
 * page that moves on to `/servers?signin=<server>&outcome=<outcome>`: a page of Gatehouse's own
 * starts that navigation, so the browser sends the (SameSite=Strict) session cookie with it,
 * which it would not on a redirect that continues the authorization server's cross-site one.
 * Nothing of the authorization server's text (its `error_description`, say) reaches the page.
 */
export async function finishSignIn(req: Request): Promise<Response> {
  const runtime = getRuntime();
  const badHost = hostProblem(req.headers.get("host"), edgePeers(runtime));
  if (badHost) return new Response(badHost, { status: 403, headers: { "Content-Type": "text/plain" } });
  const secure = isSecure(req);
  const bindings = bindingsOf(readCookie(req.headers.get("cookie"), bindingCookieName(secure)));
  let result: { server: string | null; outcome: string };
  try {
    result = await runtime.signIns.finish(new URL(req.url).searchParams, bindings);
  } catch (err) {
    log.error("the sign-in callback failed", { error: err instanceof Error ? err.message : String(err) });
    result = { server: null, outcome: "failed" };
  }
  const query = new URLSearchParams({
    ...(result.server ? { signin: result.server } : {}),
    outcome: result.outcome,
  });
  const target = `/servers?${query.toString()}`;
  const body = `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" content="0;url=${target.replace(/&/g, "&amp;")}"><title>Signing in…</title></head><body><p><a href="${target.replace(/&/g, "&amp;")}">Back to the Servers page</a></p></body></html>`;
  return new Response(body, {
    status: 200,
    headers: {
      "Content-Type": "text/html; charset=utf-8",
      "Cache-Control": "no-store",
      "Referrer-Policy": "no-referrer",
    },
  });
}

/**
 * `GET /oauth/client-metadata.json`: Gatehouse's client ID metadata document, whose URL is its
 * `client_id` at authorization servers that support them; served only when the public origin is
 * https (the document's URL must be), else 404.
 */
export function clientMetadataDocument(): Response {
  const origin = getRuntime().publicOrigin?.replace(/\/$/, "");
  if (!origin?.startsWith("https://")) {
    return json(
      {
        error: { code: "not_found", message: "served only when GATEHOUSE_PUBLIC_ORIGIN is an https origin" },
      },
      404,
    );
  }
  return json(
    {
      client_id: `${origin}${CLIENT_METADATA_PATH}`,
      ...clientMetadataFor(`${origin}${CALLBACK_PATH}`, null),
    },
    200,
    { "Cache-Control": "public, max-age=300" },
  );
}
