import "server-only";
import type { UserView } from "@/lib/api-types";
import { GatehouseError } from "@/lib/errors";
import { forwardedHttps } from "../request";
import type { Db } from "../store/db";
import type { LoginThrottle } from "./access";
import { createSession, sessionCookie } from "./sessions";
import { completeSetup, verifyCredentials } from "./users";

/** Whether cookies should be marked Secure: the request came over https. */
export function isSecure(req: Request): boolean {
  return new URL(req.url).protocol === "https:" || forwardedHttps(req.headers);
}

/** Checks credentials (throttled per name) and starts a session; returns the Set-Cookie value. */
export async function signIn(
  db: Db,
  throttle: LoginThrottle,
  params: { name: string; password: string; secure: boolean },
): Promise<{ user: UserView; cookie: string }> {
  const keys = [`name:${params.name.toLowerCase()}`];
  throttle.check(keys);
  const user = await verifyCredentials(db, params.name, params.password);
  if (!user) {
    throttle.fail(keys);
    throw new GatehouseError("invalid_credentials", "wrong name or password");
  }
  throttle.succeed(keys);
  const session = createSession(db, user.id);
  return { user, cookie: sessionCookie(session.id, session.expiresAt, params.secure) };
}

/** Creates the first owner from the one-time setup code and signs them in. */
export async function setupOwner(
  db: Db,
  params: { code: string; name: string; password: string; secure: boolean },
): Promise<{ user: UserView; cookie: string }> {
  const user = await completeSetup(db, params);
  const session = createSession(db, user.id);
  return { user, cookie: sessionCookie(session.id, session.expiresAt, params.secure) };
}
