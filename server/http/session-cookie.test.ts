/**
 * The session cookie's name follows the scheme: `__Host-gh_session` (Secure, Path=/, no Domain)
 * when the request came over https, `gh_session` over plain http (browsers refuse `__Host-`
 * without Secure), and only the name that fits the request's scheme is read. Through the real
 * route modules, with https as the proxy in front says it (`X-Forwarded-Proto`).
 */
import { eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { createSession, SECURE_SESSION_COOKIE, SESSION_COOKIE } from "@/server/auth/sessions";
import { issueSetupCode } from "@/server/auth/users";
import { sessions } from "@/server/store/schema";
import { bodyOf, createTestUser, loadRoute, type RouteHandler, request } from "@/test/support/runtime";
import { parseSetCookie, runtimePerTest } from "../auth/auth-fixtures";
import { sha256 } from "../auth/crypto";
import { forwardedHttps } from "../request";

const start = runtimePerTest();
const HTTPS = { "x-forwarded-proto": "https" };

describe("the session cookie's name follows the scheme", () => {
  it("signing in over https sets __Host-gh_session: Secure, Path=/, no Domain", async () => {
    const rt = await start();
    const alice = await createTestUser(rt.runtime, "alice", ["reviewer"]);
    const res = await request("POST", "/api/session", {
      body: { name: "alice", password: alice.password },
      headers: HTTPS,
    });
    expect(res.status).toBe(200);
    const cookie = parseSetCookie(res.headers.get("set-cookie"));
    expect(cookie.pair.startsWith(`${SECURE_SESSION_COOKIE}=`)).toBe(true);
    expect(SECURE_SESSION_COOKIE).toBe("__Host-gh_session");
    expect(cookie.attrs).toEqual(expect.arrayContaining(["Secure", "Path=/", "HttpOnly", "SameSite=Strict"]));
    expect(cookie.attrs.some((a) => /^domain=/i.test(a))).toBe(false);

    const me = await request("GET", "/api/me", { cookie: cookie.pair, headers: HTTPS });
    expect(me.status).toBe(200);
  });

  it("one reading of X-Forwarded-Proto names the cookie for Next's routes, pages and the hot paths alike", async () => {
    const rt = await start();
    const alice = await createTestUser(rt.runtime, "alice", ["reviewer"]);
    // The hop nearest the client said http: the plain name, as pages and /api/calls read it.
    // Next hands its routes an https URL for such a header (any "https" in it): built that way here.
    const mixed = { "x-forwarded-proto": "http, https" };
    const post = (await loadRoute("session/route.ts")).POST as RouteHandler;
    const res = await post(
      new Request("https://127.0.0.1:3000/api/session", {
        method: "POST",
        headers: {
          host: "127.0.0.1:3000",
          origin: "https://127.0.0.1:3000",
          "content-type": "application/json",
          ...mixed,
        },
        body: JSON.stringify({ name: "alice", password: alice.password }),
      }),
      { params: Promise.resolve({}) },
    );
    expect(res.status).toBe(200);
    const cookie = parseSetCookie(res.headers.get("set-cookie"));
    expect(cookie.pair.startsWith(`${SESSION_COOKIE}=`)).toBe(true);
    expect(forwardedHttps(new Headers(mixed))).toBe(false);
  });

  it("signing in over plain http sets gh_session without Secure (browsers refuse __Host- there)", async () => {
    const rt = await start();
    const alice = await createTestUser(rt.runtime, "alice", ["reviewer"]);
    const res = await request("POST", "/api/session", { body: { name: "alice", password: alice.password } });
    expect(res.status).toBe(200);
    const cookie = parseSetCookie(res.headers.get("set-cookie"));
    expect(cookie.pair.startsWith(`${SESSION_COOKIE}=`)).toBe(true);
    expect(cookie.attrs).not.toContain("Secure");
  });

  it("the setup link signs the first owner in under the scheme's name", async () => {
    const rt = await start();
    const code = await issueSetupCode(rt.runtime.db);
    const res = await request("POST", "/api/setup", {
      body: { code, name: "first", password: "correct horse battery" },
      headers: HTTPS,
    });
    expect(res.status).toBe(201);
    expect(parseSetCookie(res.headers.get("set-cookie")).pair.startsWith(`${SECURE_SESSION_COOKIE}=`)).toBe(
      true,
    );
  });

  it("a session cookie under the other scheme's name is ignored", async () => {
    const rt = await start();
    const alice = await createTestUser(rt.runtime, "alice", ["reviewer"]);
    const sid = (await createSession(rt.runtime.db, alice.user.id)).id;
    const asked = async (cookie: string, https: boolean) =>
      (await request("GET", "/api/me", { cookie: `${cookie}=${sid}`, headers: https ? HTTPS : {} })).status;
    // A plain-named cookie over https may have been planted by a plain-http page or a sibling host.
    expect(await asked(SESSION_COOKIE, true)).toBe(401);
    expect(await asked(SECURE_SESSION_COOKIE, false)).toBe(401);
    expect(await asked(SECURE_SESSION_COOKIE, true)).toBe(200);
    expect(await asked(SESSION_COOKIE, false)).toBe(200);
  });

  it("signing out over https ends the session and clears __Host-gh_session", async () => {
    const rt = await start();
    const alice = await createTestUser(rt.runtime, "alice", ["reviewer"]);
    const sid = (await createSession(rt.runtime.db, alice.user.id)).id;
    const res = await request("DELETE", "/api/session", {
      cookie: `${SECURE_SESSION_COOKIE}=${sid}`,
      headers: HTTPS,
    });
    expect(res.status).toBe(204);
    const cleared = parseSetCookie(res.headers.get("set-cookie"));
    expect(cleared.pair).toBe(`${SECURE_SESSION_COOKIE}=`);
    expect(cleared.attrs).toEqual(expect.arrayContaining(["Max-Age=0", "Secure", "Path=/"]));
    expect(
      await rt.runtime.db
        .select()
        .from(sessions)
        .where(eq(sessions.idHash, sha256(sid))),
    ).toEqual([]);
    const me = await request("GET", "/api/me", { cookie: `${SECURE_SESSION_COOKIE}=${sid}`, headers: HTTPS });
    expect((await bodyOf<{ error: { code: string } }>(me)).error.code).toBe("unauthenticated");
  });
});
