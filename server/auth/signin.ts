import "server-only";
import type { UserView } from "@/lib/api-types";
import { GatehouseError } from "@/lib/errors";
import { forwardedHttps } from "../request";
import { type Db, transaction } from "../store/db";
import type { LoginThrottle } from "./access";
import { createSession, sessionCookie, sessionIdFrom } from "./sessions";
import { completeSetup, passwordHashOf, verifyCredentials } from "./users";

/**
 * Whether the request came over https, which names the session cookie and marks it Secure. With
 * `X-Forwarded-Proto` present, its first value decides ({@link forwardedHttps}), exactly as for
 * pages and the hot paths (Next's own reading of the header differs: any "https" in it); without
 * it, the request URL's scheme.
 */
export function isSecure(req: Request): boolean {
  if (req.headers.has("x-forwarded-proto")) return forwardedHttps(req.headers);
  return new URL(req.url).protocol === "https:";
}

/** The cookie value of the session `req` carries, under the name its scheme uses; null when none. */
export function requestSessionId(req: Request): string | null {
  return sessionIdFrom(req.headers.get("cookie"), isSecure(req));
}

/** The `Set-Cookie` value that clears this browser's session cookie (its session already ended). */
export function signedOutCookie(req: Request): string {
  return sessionCookie("", null, isSecure(req));
}

/**
 * Checks credentials and starts a session; returns the Set-Cookie value. The attempt is counted
 * against the name and the client's `address` (null: by name only) before the password check
 * starts, so concurrent guesses cannot outrun the throttle: a refused one throws
 * `TooManyAttempts` (server/auth/access.ts) and never reaches the check. A sign-in whose stored
 * password hash changed while the password was being checked (an owner reset it, or removed the
 * person) is refused: the session would otherwise outlive the reset. `verify` is the check
 * (default `verifyCredentials`; tests count its calls).
 */
export async function signIn(
  db: Db,
  throttle: LoginThrottle,
  params: { name: string; password: string; secure: boolean; address: string | null },
  verify: typeof verifyCredentials = verifyCredentials,
): Promise<{ user: UserView; cookie: string }> {
  const attempt = await throttle.begin({ name: params.name, address: params.address });
  let checked: string | null = null;
  let user: UserView | null = null;
  try {
    // Inside the try: a store that fails to answer settles the attempt as failed too.
    checked = await passwordHashOf(db, params.name);
    user = await verify(db, params.name, params.password);
  } finally {
    // A check that threw counts as a failure: it must not hand its place back.
    if (user) await attempt.succeeded();
    else await attempt.failed();
  }
  if (!user) throw new GatehouseError("invalid_credentials", "Wrong name or password.");
  const id = user.id;
  // The password reset, or the person removed, while it was checked: that password no longer opens anything.
  const session = await transaction(db, async (tx) =>
    checked !== null && (await passwordHashOf(tx, params.name)) === checked
      ? await createSession(tx, id)
      : null,
  );
  if (!session) throw new GatehouseError("invalid_credentials", "Wrong name or password.");
  return { user, cookie: sessionCookie(session.id, session.expiresAt, params.secure) };
}

/** Creates the first owner from the one-time setup code and signs them in. */
export async function setupOwner(
  db: Db,
  params: { code: string; name: string; password: string; secure: boolean },
): Promise<{ user: UserView; cookie: string }> {
  const user = await completeSetup(db, params);
  const session = await createSession(db, user.id);
  return { user, cookie: sessionCookie(session.id, session.expiresAt, params.secure) };
}
