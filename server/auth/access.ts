import "server-only";
import type { UserView } from "@/lib/api-types";
import { GatehouseError } from "@/lib/errors";
import type { Db } from "../store/db";
import { readCookie, SESSION_COOKIE, sessionUser } from "./sessions";
import { tokenFromSecret } from "./tokens";

/** Who may use a route. `reviewer` is also satisfied by an owner (owners may do everything). */
export type Access = "public" | "owner" | "reviewer" | "agent";

export type Principal =
  | { kind: "user"; user: UserView; via: "cookie" }
  | { kind: "agent"; token: { id: number; name: string }; via: "bearer" };

/** The requester's display name, as recorded on calls and audit rows. */
export function principalName(p: Principal): string {
  return p.kind === "user" ? p.user.name : p.token.name;
}

/**
 * Identifies the requester: a `Bearer` token (agents) or the session cookie (people). A request
 * that presents a bearer token is judged by that token alone, never by a cookie beside it.
 */
export function authenticate(db: Db, headers: Headers): Principal | null {
  const authz = headers.get("authorization")?.trim() ?? "";
  // Only the Bearer scheme is ours: a proxy's Basic credentials must not hide the session cookie.
  const bearer = /^Bearer\s+(\S+)$/i.exec(authz);
  if (bearer || /^Bearer\b/i.test(authz)) {
    const token = bearer?.[1] ? tokenFromSecret(db, bearer[1]) : null;
    return token ? { kind: "agent", token, via: "bearer" } : null;
  }
  const sid = readCookie(headers.get("cookie"), SESSION_COOKIE);
  if (!sid) return null;
  const user = sessionUser(db, sid);
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

/** Fixed-window count of failed sign-ins per key (the account name). */
export class LoginThrottle {
  private readonly failures = new Map<string, { count: number; since: number }>();

  /**
   * @param max failures allowed per key in `windowMs` (default 10 in 15 minutes).
   * @param maxKeys most keys tracked at once (default 10,000); expired ones are pruned first.
   */
  constructor(
    private readonly max = 10,
    private readonly windowMs = 15 * 60 * 1000,
    private readonly maxKeys = 10_000,
  ) {}

  check(keys: string[], now = Date.now()): void {
    for (const key of keys) {
      const f = this.failures.get(key);
      if (f && now - f.since < this.windowMs && f.count >= this.max) {
        throw new GatehouseError(
          "too_many_attempts",
          "too many failed sign-ins: wait 15 minutes and try again",
        );
      }
    }
  }

  fail(keys: string[], now = Date.now()): void {
    // Sign-in attempts with made-up names must not grow the map without bound.
    if (this.failures.size >= this.maxKeys) this.prune(now);
    for (const key of keys) {
      const f = this.failures.get(key);
      if (!f || now - f.since >= this.windowMs) this.failures.set(key, { count: 1, since: now });
      else f.count += 1;
    }
  }

  succeed(keys: string[]): void {
    for (const key of keys) this.failures.delete(key);
  }

  /** Number of keys currently tracked (for tests). */
  get size(): number {
    return this.failures.size;
  }

  private prune(now: number): void {
    for (const [key, f] of this.failures) if (now - f.since >= this.windowMs) this.failures.delete(key);
    // Still full: drop the oldest windows first; they are the closest to expiring anyway.
    if (this.failures.size >= this.maxKeys) {
      const oldest = [...this.failures].sort((a, b) => a[1].since - b[1].since);
      for (const [key] of oldest.slice(0, Math.ceil(this.maxKeys / 10))) this.failures.delete(key);
    }
  }
}
