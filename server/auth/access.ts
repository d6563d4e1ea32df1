import "server-only";
import type { UserView } from "@/lib/api-types";
import { GatehouseError } from "@/lib/errors";
import type { Db } from "../store/db";
import { sessionIdFrom, sessionUser } from "./sessions";
import { type AgentToken, tokenFromSecret } from "./tokens";

// The sign-in throttle lives in ./throttle; its names stay importable from here.
export {
  addressBucket,
  LoginThrottle,
  PER_ADDRESS,
  PER_NAME,
  type SignInAttempt,
  type ThrottleLimits,
  TooManyAttempts,
} from "./throttle";

/** Who may use a route. `reviewer` is also satisfied by an owner (owners may do everything). */
export type Access = "public" | "owner" | "reviewer" | "agent";

export type Principal =
  | { kind: "user"; user: UserView; via: "cookie" }
  | { kind: "agent"; token: AgentToken; via: "bearer" };

/** The requester's display name, as recorded on calls and audit rows. */
export function principalName(p: Principal): string {
  return p.kind === "user" ? p.user.name : p.token.name;
}

/**
 * Identifies the requester: a `Bearer` token (agents) or the session cookie (people). A request
 * that presents a bearer token is judged by that token alone, never by a cookie beside it.
 * `secure`: the request was served over https (`isSecure` in ./signin; from headers alone,
 * `forwardedHttps`), which names the one session cookie read (`sessionIdFrom` in ./sessions).
 */
export async function authenticate(db: Db, headers: Headers, secure: boolean): Promise<Principal | null> {
  const authz = headers.get("authorization")?.trim() ?? "";
  // Only the Bearer scheme is ours: a proxy's Basic credentials must not hide the session cookie.
  const bearer = /^Bearer\s+(\S+)$/i.exec(authz);
  if (bearer || /^Bearer\b/i.test(authz)) {
    const token = bearer?.[1] ? await tokenFromSecret(db, bearer[1]) : null;
    return token ? { kind: "agent", token, via: "bearer" } : null;
  }
  const sid = sessionIdFrom(headers.get("cookie"), secure);
  if (!sid) return null;
  const user = await sessionUser(db, sid);
  return user ? { kind: "user", user, via: "cookie" } : null;
}

export function allows(p: Principal, access: readonly Access[]): boolean {
  return access.some((a) => {
    switch (a) {
      case "public":
        return true;
      case "agent":
        return p.kind === "agent";
      case "owner":
        return p.kind === "user" && p.user.roles.includes("owner");
      case "reviewer":
        return p.kind === "user" && (p.user.roles.includes("reviewer") || p.user.roles.includes("owner"));
    }
    return false;
  });
}

const SAFE_METHODS = new Set(["GET", "HEAD", "OPTIONS"]);

/**
 * The Origin check for state-changing requests. Browsers always send `Origin` on cross-site and
 * same-site POSTs, so a cookie-borne or anonymous state change without a matching Origin is
 * refused. A bearer request carries no ambient credential, so a missing Origin is accepted
 * there (agents are not browsers), but a present one must still match.
 *
 * The origins accepted are the request's own (`scheme://Host`) and `publicOrigin`; `route()`
 * has refused a Host off the allow-list before this runs, so both are on that list. The
 * config's `agentEndpoint.allowedOrigins` are deliberately not accepted here: they let other
 * pages reach `/mcp`, whose bearer tokens are never ambient, not act with a person's cookie
 * (a page on another port of the same name is same-site and would carry it).
 *
 * @param publicOrigin `GATEHOUSE_PUBLIC_ORIGIN` when Gatehouse sits behind a proxy; otherwise
 *   the request's own `Host` decides.
 */
export function checkOrigin(
  method: string,
  headers: Headers,
  requestUrl: string,
  viaBearer: boolean,
  publicOrigin?: string,
): void {
  if (SAFE_METHODS.has(method.toUpperCase())) return;
  const origin = headers.get("origin");
  if (origin === null) {
    if (viaBearer) return;
    throw new GatehouseError(
      "bad_origin",
      "state-changing requests from a browser must carry an Origin header",
    );
  }
  const expected = new Set<string>();
  if (publicOrigin) expected.add(publicOrigin.replace(/\/$/, ""));
  const host = headers.get("host");
  const proto = new URL(requestUrl).protocol;
  if (host) expected.add(`${proto}//${host}`);
  if (!expected.has(origin)) {
    throw new GatehouseError("bad_origin", `requests from origin ${JSON.stringify(origin)} are not accepted`);
  }
}
