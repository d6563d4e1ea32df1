/**
 * Signing in (PRODUCT.md §1, §8): password hashes, session cookies, the one-time setup code and
 * login throttling, exercised through the real route modules.
 */
import { eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import type { UserView } from "@/lib/api-types";
import { bodyOf, createTestUser, request } from "@/test/support/runtime";
import { openTestDb } from "@/test/support/store";
import { sessions, users } from "../store/schema";
import { LoginThrottle } from "./access";
import { expectError, parseSetCookie, runtimePerTest, STRONG } from "./auth-fixtures";
import { hashPassword, sha256, verifyPassword } from "./crypto";
import { createSession, SESSION_COOKIE, SESSION_TTL_MS } from "./sessions";
import { tryOnce } from "./throttle-fixtures";
import { issueSetupCode } from "./users";

const start = runtimePerTest();

describe("passwords", () => {
  it("a hash verifies the right password and rejects a wrong one", async () => {
    const stored = await hashPassword(STRONG);
    expect(stored.startsWith("scrypt$")).toBe(true);
    expect(stored).not.toContain(STRONG);
    expect(await verifyPassword(STRONG, stored)).toBe(true);
    expect(await verifyPassword("correct horse batterY", stored)).toBe(false);
    expect(await verifyPassword("", stored)).toBe(false);
  });

  it("hashes are salted: the same password hashes differently each time, and both verify", async () => {
    const a = await hashPassword(STRONG);
    const b = await hashPassword(STRONG);
    expect(a).not.toBe(b);
    expect(a.split("$")[4]).not.toBe(b.split("$")[4]);
    expect(await verifyPassword(STRONG, a)).toBe(true);
    expect(await verifyPassword(STRONG, b)).toBe(true);
  });

  it("a malformed stored hash verifies nothing", async () => {
    expect(await verifyPassword(STRONG, "")).toBe(false);
    expect(await verifyPassword(STRONG, "plain$text")).toBe(false);
    expect(await verifyPassword(STRONG, STRONG)).toBe(false);
  });
});

describe("sessions", () => {
  it("signing in sets an HttpOnly, SameSite=Strict session cookie that identifies the user", async () => {
    const rt = await start();
    const alice = await createTestUser(rt.runtime, "alice", ["reviewer"]);
    const res = await request("POST", "/api/session", { body: { name: "alice", password: alice.password } });
    expect(res.status).toBe(200);
    expect((await bodyOf<{ user: UserView }>(res)).user).toMatchObject({
      name: "alice",
      roles: ["reviewer"],
    });
    const cookie = parseSetCookie(res.headers.get("set-cookie"));
    expect(cookie.pair.startsWith(`${SESSION_COOKIE}=`)).toBe(true);
    expect(cookie.attrs).toEqual(expect.arrayContaining(["HttpOnly", "SameSite=Strict", "Path=/"]));
    expect(cookie.attrs.some((a) => a.startsWith("Expires="))).toBe(true);
    // Plain http: no Secure flag (the browser would drop the cookie).
    expect(cookie.attrs).not.toContain("Secure");

    const me = await request("GET", "/api/me", { cookie: cookie.pair });
    expect(me.status).toBe(200);
    expect((await bodyOf<{ user: UserView }>(me)).user.name).toBe("alice");
  });

  it("the session cookie is Secure when the request came over https", async () => {
    const rt = await start();
    const alice = await createTestUser(rt.runtime, "alice", ["reviewer"]);
    const res = await request("POST", "/api/session", {
      body: { name: "alice", password: alice.password },
      headers: { "x-forwarded-proto": "https" },
    });
    expect(res.status).toBe(200);
    expect(parseSetCookie(res.headers.get("set-cookie")).attrs).toContain("Secure");
  });

  it("a wrong password and an unknown name get the same 401 invalid_credentials", async () => {
    const rt = await start();
    await createTestUser(rt.runtime, "alice", ["reviewer"]);
    const wrong = await request("POST", "/api/session", {
      body: { name: "alice", password: "not-the-password" },
    });
    const unknown = await request("POST", "/api/session", {
      body: { name: "mallory", password: "not-the-password" },
    });
    const m1 = await expectError(wrong, 401, "invalid_credentials");
    const m2 = await expectError(unknown, 401, "invalid_credentials");
    expect(m1).toBe(m2);
    // The sign-in page shows it on its own: a sentence.
    expect(m1).toBe("Wrong name or password.");
    expect(wrong.headers.get("set-cookie")).toBeNull();
  });

  it("an expired session is rejected", async () => {
    const rt = await start();
    const alice = await createTestUser(rt.runtime, "alice", ["reviewer"]);
    const old = await createSession(rt.runtime.db, alice.user.id, Date.now() - SESSION_TTL_MS - 1000);
    const res = await request("GET", "/api/me", { cookie: `${SESSION_COOKIE}=${old.id}` });
    await expectError(res, 401, "unauthenticated");
  });

  it("signing out ends the session and clears the cookie", async () => {
    const rt = await start();
    const alice = await createTestUser(rt.runtime, "alice", ["reviewer"]);
    expect((await request("GET", "/api/me", { cookie: alice.cookie })).status).toBe(200);
    const out = await request("DELETE", "/api/session", { cookie: alice.cookie });
    expect(out.status).toBe(204);
    const cleared = parseSetCookie(out.headers.get("set-cookie"));
    expect(cleared.pair).toBe(`${SESSION_COOKIE}=`);
    expect(cleared.attrs).toContain("Max-Age=0");
    const sid = alice.cookie.slice(alice.cookie.indexOf("=") + 1);
    expect(
      await rt.runtime.db
        .select()
        .from(sessions)
        .where(eq(sessions.idHash, sha256(sid))),
    ).toEqual([]);
    await expectError(await request("GET", "/api/me", { cookie: alice.cookie }), 401, "unauthenticated");
  });
});

describe("the one-time setup code", () => {
  it("creates the first owner and signs them in; a second use is refused", async () => {
    const rt = await start();
    const code = await issueSetupCode(rt.runtime.db);
    expect(code).not.toBeNull();
    const body = { code, name: "first", password: STRONG };
    const res = await request("POST", "/api/setup", { body });
    expect(res.status).toBe(201);
    expect((await bodyOf<{ user: UserView }>(res)).user).toMatchObject({ name: "first", roles: ["owner"] });
    const cookie = parseSetCookie(res.headers.get("set-cookie"));
    expect((await request("GET", "/api/me", { cookie: cookie.pair })).status).toBe(200);

    await expectError(
      await request("POST", "/api/setup", { body: { ...body, name: "second" } }),
      409,
      "setup_done",
    );
    // The code itself is spent, not merely blocked by the existing user.
    await rt.runtime.db.delete(users);
    await expectError(
      await request("POST", "/api/setup", { body: { ...body, name: "second" } }),
      403,
      "invalid_setup_code",
    );
    expect(await rt.runtime.db.select().from(users)).toEqual([]);
  });

  it("is refused once a user exists, and no new code is issued", async () => {
    const rt = await start();
    const code = await issueSetupCode(rt.runtime.db);
    await createTestUser(rt.runtime, "cli-owner", ["owner"]);
    await expectError(
      await request("POST", "/api/setup", { body: { code, name: "intruder", password: STRONG } }),
      409,
      "setup_done",
    );
    expect(await issueSetupCode(rt.runtime.db)).toBeNull();
    expect(await rt.runtime.db.select({ name: users.name }).from(users)).toEqual([{ name: "cli-owner" }]);
  });

  it("an invalid code is refused and creates nobody", async () => {
    const rt = await start();
    const code = await issueSetupCode(rt.runtime.db);
    await expectError(
      await request("POST", "/api/setup", { body: { code: `${code}x`, name: "first", password: STRONG } }),
      403,
      "invalid_setup_code",
    );
    expect(await rt.runtime.db.select().from(users)).toEqual([]);
  });

  it("only the newest code works", async () => {
    const rt = await start();
    const older = await issueSetupCode(rt.runtime.db);
    const newer = await issueSetupCode(rt.runtime.db);
    await expectError(
      await request("POST", "/api/setup", { body: { code: older, name: "first", password: STRONG } }),
      403,
      "invalid_setup_code",
    );
    const res = await request("POST", "/api/setup", {
      body: { code: newer, name: "first", password: STRONG },
    });
    expect(res.status).toBe(201);
  });
});

describe("login throttling", () => {
  it("after 10 failures even the right password gets 429 too_many_attempts", async () => {
    const rt = await start();
    const alice = await createTestUser(rt.runtime, "alice", ["reviewer"]);
    for (let i = 0; i < 10; i++) {
      const res = await request("POST", "/api/session", { body: { name: "alice", password: `wrong-${i}` } });
      await expectError(res, 401, "invalid_credentials");
    }
    const right = await request("POST", "/api/session", {
      body: { name: "alice", password: alice.password },
    });
    await expectError(right, 429, "too_many_attempts");
    expect(right.headers.get("set-cookie")).toBeNull();
    // The throttle is per name: another user still signs in.
    const bob = await createTestUser(rt.runtime, "bob", ["reviewer"]);
    expect(
      (await request("POST", "/api/session", { body: { name: "bob", password: bob.password } })).status,
    ).toBe(200);
  });

  it("the throttle forgets expired windows instead of growing without bound", async () => {
    const throttle = new LoginThrottle(await openTestDb(), { perName: { windowMs: 1000, maxKeys: 100 } });
    for (let i = 0; i < 100; i++) await tryOnce(throttle, { name: `user-${i}` }, 0);
    expect((await throttle.size()).names).toBe(100);
    await tryOnce(throttle, { name: "late" }, 5000);
    expect((await throttle.size()).names).toBe(1);
    for (let i = 0; i < 150; i++) await tryOnce(throttle, { name: `burst-${i}` }, 6000);
    expect((await throttle.size()).names).toBeLessThanOrEqual(100);
  });

  it("nine failures do not lock out the right password", async () => {
    const rt = await start();
    const alice = await createTestUser(rt.runtime, "alice", ["reviewer"]);
    for (let i = 0; i < 9; i++) {
      await request("POST", "/api/session", { body: { name: "alice", password: `wrong-${i}` } });
    }
    const right = await request("POST", "/api/session", {
      body: { name: "alice", password: alice.password },
    });
    expect(right.status).toBe(200);
  });
});
