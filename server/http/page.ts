import "server-only";
import { headers } from "next/headers";
import { redirect } from "next/navigation";
import type { UserView } from "@/lib/api-types";
import { signInHref } from "@/lib/return-path";
import type { Viewer } from "@/lib/viewer";
import { sessionIdFrom, sessionUser } from "../auth/sessions";
import { countUsers, listUsers } from "../auth/users";
import { ownAgentTokens } from "../calls/approve";
import type { ApprovalsConfig } from "../config/types";
import { forwardedHttps } from "../request";
import { getRuntime } from "../runtime";
import { PAGE_URL_HEADER } from "./page-url";

/**
 * The path and query of the page being rendered, or null when nobody says.
 *
 * Why a header: a layout is not told its URL (only pages get params and search params), and the
 * console's layout is where a visit without a session is turned away. The production server
 * in front of Next knows the URL and passes it in `PAGE_URL_HEADER`; under `next dev`
 * there is no such server, and sign-in then lands on the home page. The path only ever becomes
 * a `next` that `safeReturnPath` accepts. `_rsc` is the router's cache-busting parameter, not
 * the page's.
 */
async function requestPath(): Promise<string | null> {
  const raw = (await headers()).get(PAGE_URL_HEADER);
  if (!raw?.startsWith("/")) return null;
  const q = raw.indexOf("?");
  if (q === -1) return raw;
  const search = new URLSearchParams(raw.slice(q + 1));
  search.delete("_rsc");
  const query = search.toString();
  return query ? `${raw.slice(0, q)}?${query}` : raw.slice(0, q);
}

/**
 * The signed-in user of a page request (server components), from its session cookie. Without
 * one it does not return: it redirects to sign-in with this page as `next`
 * (`/login?next=/approvals/<id>`), so signing in comes back here. Never call it from the sign-in
 * page itself. The pages' counterpart of `route()`'s authentication: the edge reaches the
 * runtime, auth only sees the store.
 */
export async function currentPageUser(): Promise<UserView> {
  const user = await signedInPageUser();
  if (!user) redirect(signInHref(await requestPath()));
  return user;
}

/**
 * The signed-in user of a page request, or null without a session: for a page anyone may see
 * (the "no such page" page keeps the console's header for a signed-in person).
 */
export async function signedInPageUser(): Promise<UserView | null> {
  const head = await headers();
  // Only the cookie named for this request's scheme counts, as in route(); pages have no URL,
  // and in front of Next the scheme is what X-Forwarded-Proto says.
  const sid = sessionIdFrom(head.get("cookie"), forwardedHttps(head));
  return sid ? await sessionUser(getRuntime().db, sid) : null;
}

/** Whether this Gatehouse has its first owner: the setup link has been used (or no longer applies). */
export async function setupDone(): Promise<boolean> {
  return (await countUsers(getRuntime().db)) > 0;
}

/**
 * `user` with what the approval pages need to say about calls they requested: the agent tokens
 * they created, the config's `approvals.selfApproval` and how many other people may approve
 * (reviewers and owners).
 */
export async function pageViewer(user: UserView): Promise<Viewer> {
  const runtime = getRuntime();
  const otherReviewers = (await listUsers(runtime.db)).filter(
    (other) =>
      other.name !== user.name && other.roles.some((role) => role === "owner" || role === "reviewer"),
  ).length;
  return {
    name: user.name,
    agentTokens: await ownAgentTokens(runtime.db, user.name),
    owner: user.roles.includes("owner"),
    selfApproval: runtime.config.approvals.selfApproval,
    otherReviewers,
  };
}

/** The config's `approvals` section, for the settings page. */
export function approvalSettings(): ApprovalsConfig {
  const { expireAfterSeconds, waitSeconds, selfApproval } = getRuntime().config.approvals;
  return { expireAfterSeconds, waitSeconds, selfApproval };
}
