import "server-only";
import { cookies } from "next/headers";
import type { UserView } from "@/lib/api-types";
import { SESSION_COOKIE, sessionUser } from "../auth/sessions";
import { getRuntime } from "../runtime";

/**
 * The signed-in user of a page request (server components), from its session cookie, or null.
 * The pages' counterpart of `route()`'s authentication: the edge reaches the runtime, auth only
 * sees the store.
 */
export async function currentPageUser(): Promise<UserView | null> {
  const sid = (await cookies()).get(SESSION_COOKIE)?.value;
  if (!sid) return null;
  return sessionUser(getRuntime().db, sid);
}
