import "server-only";
import { cookies } from "next/headers";
import type { UserView } from "@/lib/api-types";
import { getRuntime } from "../runtime";
import { SESSION_COOKIE, sessionUser } from "./sessions";

/** The signed-in user of a page request, or null. */
export async function currentPageUser(): Promise<UserView | null> {
  const sid = (await cookies()).get(SESSION_COOKIE)?.value;
  if (!sid) return null;
  return sessionUser(getRuntime().db, sid);
}
