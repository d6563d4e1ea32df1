import "server-only";
import type { UserView } from "@/lib/api-types";
import { GatehouseError } from "@/lib/errors";
import type { Runtime } from "../runtime";
import { createSession, sessionCookie } from "./sessions";
import { completeSetup, verifyCredentials } from "./users";

/** Whether cookies should be marked Secure: the request came over https. */
export function isSecure(req: Request): boolean {
  return new URL(req.url).protocol === "https:" || req.headers.get("x-forwarded-proto") === "https";
}

/** Checks credentials (throttled per name) and starts a session; returns the Set-Cookie value. */
export async function signIn(
  runtime: Runtime,
  params: { name: string; password: string; secure: boolean },
): Promise<{ user: UserView; cookie: string }> {
  const keys = [`name:${params.name.toLowerCase()}`];
  runtime.throttle.check(keys);
  const user = await verifyCredentials(runtime.db, params.name, params.password);
  if (!user) {
    runtime.throttle.fail(keys);
    throw new GatehouseError("invalid_credentials", "wrong name or password");
  }
  runtime.throttle.succeed(keys);
  const session = createSession(runtime.db, user.id);
  return { user, cookie: sessionCookie(session.id, session.expiresAt, params.secure) };
}

/** Creates the first owner from the one-time setup code and signs them in. */
export async function setupOwner(
  runtime: Runtime,
  params: { code: string; name: string; password: string; secure: boolean },
): Promise<{ user: UserView; cookie: string }> {
  const user = await completeSetup(runtime.db, params);
  const session = createSession(runtime.db, user.id);
  return { user, cookie: sessionCookie(session.id, session.expiresAt, params.secure) };
}
