import "server-only";
import { and, eq, gt, lt } from "drizzle-orm";
import type { UserView } from "@/lib/api-types";
import { type Db, first } from "../store/db";
import { sessions, users } from "../store/schema";
import { newSecret, sha256 } from "./crypto";
import { toUserView } from "./users";

/** The session cookie's name over plain http (browsers refuse the `__Host-` prefix without Secure). */
export const SESSION_COOKIE = "gh_session";
/**
 * Its name over https. The `__Host-` prefix makes the browser keep the cookie only when it is
 * Secure, for Path=/ and without Domain, so no other host (a sibling subdomain) and no plain-http
 * page can set or overwrite it.
 */
export const SECURE_SESSION_COOKIE = `__Host-${SESSION_COOKIE}`;

/** The session cookie's name for a request served over https (`secure`) or plain http. */
export function sessionCookieName(secure: boolean): string {
  return secure ? SECURE_SESSION_COOKIE : SESSION_COOKIE;
}

/** Sessions last 12 hours from sign-in. */
export const SESSION_TTL_MS = 12 * 60 * 60 * 1000;

/** Starts a session; returns the cookie value (stored only as its hash). */
export async function createSession(
  db: Db,
  userId: number,
  now = Date.now(),
): Promise<{ id: string; expiresAt: Date }> {
  const id = newSecret();
  const expiresAt = new Date(now + SESSION_TTL_MS);
  await db.delete(sessions).where(lt(sessions.expiresAt, new Date(now).toISOString()));
  await db.insert(sessions).values({ idHash: sha256(id), userId, expiresAt: expiresAt.toISOString() });
  return { id, expiresAt };
}

export async function sessionUser(db: Db, id: string, now = Date.now()): Promise<UserView | null> {
  const row = await first(
    db
      .select({ user: users })
      .from(sessions)
      .innerJoin(users, eq(users.id, sessions.userId))
      .where(and(eq(sessions.idHash, sha256(id)), gt(sessions.expiresAt, new Date(now).toISOString()))),
  );
  return row ? toUserView(row.user) : null;
}

export async function endSession(db: Db, id: string): Promise<void> {
  await db.delete(sessions).where(eq(sessions.idHash, sha256(id)));
}

/**
 * `Set-Cookie` value: HttpOnly, SameSite=Strict, Path=/, no Domain; over https (`secure`) named
 * {@link SECURE_SESSION_COOKIE} and Secure, over http {@link SESSION_COOKIE}. `expiresAt` null
 * clears the cookie of that name.
 */
export function sessionCookie(value: string, expiresAt: Date | null, secure: boolean): string {
  const parts = [`${sessionCookieName(secure)}=${value}`, "Path=/", "HttpOnly", "SameSite=Strict"];
  parts.push(expiresAt ? `Expires=${expiresAt.toUTCString()}` : "Max-Age=0");
  if (secure) parts.push("Secure");
  return parts.join("; ");
}

/**
 * The session id in a `Cookie` header: only the cookie named for the scheme
 * ({@link sessionCookieName}). The other name is ignored: over https a plain `gh_session` may
 * have been planted by a plain-http page or a sibling host, and over http Gatehouse never sets
 * a `__Host-` cookie, so one arriving there is not a session this scheme began.
 */
export function sessionIdFrom(cookieHeader: string | null, secure: boolean): string | null {
  return readCookie(cookieHeader, sessionCookieName(secure)) || null;
}

/** Reads one cookie from a `Cookie` header. */
export function readCookie(header: string | null, name: string): string | null {
  if (!header) return null;
  for (const part of header.split(";")) {
    const eq = part.indexOf("=");
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return null;
}
