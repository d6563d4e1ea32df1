/**
 * People can be managed (PRODUCT.md §1): an owner resets a password, signs a person out
 * everywhere and removes a person; a person changes their own password. Through the real route
 * modules on a real runtime, with real sessions, throttle and store.
 */
import { and, eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import type { CallView, GrantListView, UserView } from "@/lib/api-types";
import {
  ADD_NOTE,
  bodyOf,
  createAgentToken,
  createTestUser,
  enableTool,
  request,
  sessionCookieFor,
  type TestRuntime,
} from "@/test/support/runtime";
import { first } from "../store/db";
import { auditEvents, calls, notificationDeliveries, users } from "../store/schema";
import { expectError, parseSetCookie, runtimePerTest, STRONG } from "./auth-fixtures";
import { updatePerson } from "./user-admin";

const start = runtimePerTest();

const NEW_PASSWORD = "a brand new passphrase";

/** Signs in through the route; resolves with the response and, on success, its cookie pair. */
async function signIn(name: string, password: string): Promise<{ status: number; cookie: string }> {
  const res = await request("POST", "/api/session", { body: { name, password } });
  const cookie = res.status === 200 ? parseSetCookie(res.headers.get("set-cookie")).pair : "";
  return { status: res.status, cookie };
}

/** Who a cookie signs in now: the status of `GET /api/me`. */
async function meStatus(cookie: string): Promise<number> {
  return (await request("GET", "/api/me", { cookie })).status;
}

function auditOf(rt: TestRuntime, action: string, subject: string) {
  return rt.runtime.db
    .select()
    .from(auditEvents)
    .where(and(eq(auditEvents.action, action), eq(auditEvents.subject, subject)))
    .orderBy(auditEvents.id);
}

/** Every audit detail and the body of `res`, to check no password leaked into them. */
async function everythingWritten(rt: TestRuntime, bodyText: string): Promise<string> {
  const audit = await rt.runtime.db.select().from(auditEvents);
  return `${bodyText}\n${JSON.stringify(audit)}`;
}

describe("an owner resets a password", () => {
  it("a reset ends every session of that person: their old cookies get 401, and only the new password signs in", async () => {
    const rt = await start();
    const olga = await createTestUser(rt.runtime, "olga", ["owner"]);
    const bob = await createTestUser(rt.runtime, "bob", ["reviewer"]);
    const other = await sessionCookieFor(rt.runtime, bob.user.id);
    expect(await meStatus(bob.cookie)).toBe(200);

    const res = await request("PATCH", "/api/users/bob", {
      cookie: olga.cookie,
      body: { password: NEW_PASSWORD },
    });
    expect(res.status).toBe(200);
    const text = await res.text();
    const body = JSON.parse(text) as { user: UserView; sessionsEnded: number };
    expect(body.user).toMatchObject({ name: "bob", roles: ["reviewer"] });
    expect(body.sessionsEnded).toBe(2);
    // Resetting someone else leaves the owner signed in.
    expect(res.headers.get("set-cookie")).toBeNull();
    expect(await meStatus(olga.cookie)).toBe(200);

    expect(await meStatus(bob.cookie)).toBe(401);
    expect(await meStatus(other)).toBe(401);
    expect((await signIn("bob", bob.password)).status).toBe(401);
    const fresh = await signIn("bob", NEW_PASSWORD);
    expect(fresh.status).toBe(200);
    expect(await meStatus(fresh.cookie)).toBe(200);

    expect(await auditOf(rt, "user.password", "bob")).toEqual([
      expect.objectContaining({ actor: "olga", detail: "reset; 2 sessions ended" }),
    ]);
    expect(await everythingWritten(rt, text)).not.toContain(NEW_PASSWORD);
  });

  it("a reset lifts the sign-in lockout of that name", async () => {
    const rt = await start();
    const olga = await createTestUser(rt.runtime, "olga", ["owner"]);
    const bob = await createTestUser(rt.runtime, "bob", ["reviewer"]);
    for (let i = 0; i < 10; i++) expect((await signIn("bob", `wrong guess ${i}`)).status).toBe(401);
    // Locked: even the right password is refused now.
    await expectError(
      await request("POST", "/api/session", { body: { name: "bob", password: bob.password } }),
      429,
      "too_many_attempts",
    );

    expect(
      (await request("PATCH", "/api/users/bob", { cookie: olga.cookie, body: { password: NEW_PASSWORD } }))
        .status,
    ).toBe(200);
    expect((await signIn("bob", NEW_PASSWORD)).status).toBe(200);
  });

  it("a reset follows the rules of a new password, and a refused one changes nothing", async () => {
    const rt = await start();
    const olga = await createTestUser(rt.runtime, "olga", ["owner"]);
    const bob = await createTestUser(rt.runtime, "bob", ["reviewer"]);
    const refused = [
      [`${STRONG}\n`, "body.password: Passwords cannot contain control characters such as a newline."],
      ["short", "body.password: Use at least 10 characters."],
    ] as const;
    for (const [password, message] of refused) {
      const res = await request("PATCH", "/api/users/bob", { cookie: olga.cookie, body: { password } });
      expect(await expectError(res, 400, "invalid_body")).toBe(message);
    }
    // A role change refused in the same change (the last owner, here from the CLI) resets nothing either.
    await expect(
      updatePerson(rt.runtime.db, null, {
        name: "olga",
        roles: ["reviewer"],
        password: NEW_PASSWORD,
        actor: "cli",
      }),
    ).rejects.toMatchObject({ code: "conflict" });
    expect(await meStatus(bob.cookie)).toBe(200);
    expect(await meStatus(olga.cookie)).toBe(200);
    expect((await signIn("olga", olga.password)).status).toBe(200);
    expect(await auditOf(rt, "user.password", "bob")).toEqual([]);
  });

  it("an owner cannot reset their own password without the current one", async () => {
    const rt = await start();
    const olga = await createTestUser(rt.runtime, "olga", ["owner"]);
    await createTestUser(rt.runtime, "oscar", ["owner"]);
    const res = await request("PATCH", "/api/users/olga", {
      cookie: olga.cookie,
      body: { password: NEW_PASSWORD },
    });
    await expectError(res, 403, "forbidden");
    // Nothing changed: still signed in, the old password still works, the new one does not.
    expect(await meStatus(olga.cookie)).toBe(200);
    expect((await signIn("olga", NEW_PASSWORD)).status).toBe(401);
    expect((await signIn("olga", olga.password)).status).toBe(200);
  });

  it("an unknown name is 404 and a reviewer may not reset anyone", async () => {
    const rt = await start();
    const olga = await createTestUser(rt.runtime, "olga", ["owner"]);
    const rita = await createTestUser(rt.runtime, "rita", ["reviewer"]);
    await expectError(
      await request("PATCH", "/api/users/nobody", { cookie: olga.cookie, body: { password: NEW_PASSWORD } }),
      404,
      "not_found",
    );
    await expectError(
      await request("PATCH", "/api/users/olga", { cookie: rita.cookie, body: { password: NEW_PASSWORD } }),
      403,
      "forbidden",
    );
    expect((await signIn("olga", olga.password)).status).toBe(200);
  });
});

describe("an owner signs a person out everywhere", () => {
  it("DELETE /api/users/:name/sessions ends every session of that person and changes nothing else", async () => {
    const rt = await start();
    const olga = await createTestUser(rt.runtime, "olga", ["owner"]);
    const bob = await createTestUser(rt.runtime, "bob", ["reviewer"], "bob-password-123");
    const other = await sessionCookieFor(rt.runtime, bob.user.id);

    const res = await request("DELETE", "/api/users/bob/sessions", { cookie: olga.cookie });
    expect(res.status).toBe(200);
    expect(await bodyOf(res)).toEqual({ ended: 2 });
    expect(res.headers.get("set-cookie")).toBeNull();
    expect(await meStatus(bob.cookie)).toBe(401);
    expect(await meStatus(other)).toBe(401);
    expect(await meStatus(olga.cookie)).toBe(200);
    // Same person, same password, same roles.
    const back = await signIn("bob", "bob-password-123");
    expect(back.status).toBe(200);
    const me = await bodyOf<{ user: UserView }>(await request("GET", "/api/me", { cookie: back.cookie }));
    expect(me.user).toMatchObject({ name: "bob", roles: ["reviewer"], email: null });
    expect(await auditOf(rt, "user.sessions_ended", "bob")).toEqual([
      expect.objectContaining({ actor: "olga", detail: "2 sessions ended" }),
    ]);

    await expectError(
      await request("DELETE", "/api/users/nobody/sessions", { cookie: olga.cookie }),
      404,
      "not_found",
    );
  });

  it("signing yourself out everywhere clears this browser's cookie too", async () => {
    const rt = await start();
    const olga = await createTestUser(rt.runtime, "olga", ["owner"]);
    const res = await request("DELETE", "/api/users/olga/sessions", { cookie: olga.cookie });
    expect(res.status).toBe(200);
    expect(parseSetCookie(res.headers.get("set-cookie")).attrs).toContain("Max-Age=0");
    expect(await meStatus(olga.cookie)).toBe(401);
  });
});

describe("an owner removes a person", () => {
  it("the last owner cannot be removed, not even by themselves", async () => {
    const rt = await start();
    const olga = await createTestUser(rt.runtime, "olga", ["owner", "reviewer"]);
    const message = await expectError(
      await request("DELETE", "/api/users/olga", { cookie: olga.cookie }),
      409,
      "conflict",
    );
    expect(message).toBe("olga is the last owner: give someone else the owner role first");
    expect(await meStatus(olga.cookie)).toBe(200);
    expect(await first(rt.runtime.db.select().from(users).where(eq(users.name, "olga")))).toBeDefined();
    expect(await auditOf(rt, "user.remove", "olga")).toEqual([]);
  });

  it("removing a person ends their sessions, the grants they made and their pending calls; history keeps their name", async () => {
    const rt = await start();
    await enableTool(rt.runtime, ADD_NOTE);
    const olga = await createTestUser(rt.runtime, "olga", ["owner"]);
    const otto = await createTestUser(rt.runtime, "otto", ["owner"]);
    const rita = await createTestUser(rt.runtime, "rita", ["reviewer"]);
    const agent = await createAgentToken(rt.runtime, "build-bot");

    // rita approves an agent's call with a grant; otto asks for a call nobody decides yet.
    const asked = await bodyOf<CallView>(
      await request("POST", "/api/calls", {
        bearer: agent,
        body: { tool: ADD_NOTE, arguments: { text: "a" } },
      }),
    );
    const approved = await request("POST", `/api/calls/${asked.id}/approve`, {
      cookie: rita.cookie,
      body: { grant: { scope: "tool", minutes: 60 } },
    });
    expect(approved.status, `${JSON.stringify(asked)} ${await approved.clone().text()}`).toBe(200);
    const pending = await bodyOf<CallView>(
      await request("POST", "/api/calls", {
        cookie: otto.cookie,
        body: { tool: ADD_NOTE, arguments: { text: "b" } },
      }),
    );
    expect(pending.status).toBe("pending");
    // Mail still queued to rita is given up with her.
    await rt.runtime.db.insert(notificationDeliveries).values({
      deliveryId: "d-1",
      channel: "email",
      target: "rita",
      event: "call.pending",
      payload: "{}",
      status: "queued",
      nextAttemptAt: new Date(Date.now() + 3_600_000).toISOString(),
    });

    const removed = await request("DELETE", "/api/users/rita", { cookie: olga.cookie });
    expect(removed.status).toBe(200);
    expect(await bodyOf(removed)).toMatchObject({
      user: { name: "rita" },
      sessionsEnded: 1,
      grantsEnded: 1,
      callsWithdrawn: 0,
    });
    expect(await meStatus(rita.cookie)).toBe(401);
    expect((await signIn("rita", rita.password)).status).toBe(401);
    const grants = await bodyOf<GrantListView>(await request("GET", "/api/grants", { cookie: olga.cookie }));
    expect(grants.grants).toEqual([
      expect.objectContaining({ createdBy: "rita", state: "ended", endReason: "rita was removed" }),
    ]);
    const delivery = await first(rt.runtime.db.select().from(notificationDeliveries));
    expect(delivery).toMatchObject({ status: "failed", lastError: "the recipient was removed" });

    // History still names her: the call she approved and her own audit rows.
    const story = await bodyOf<CallView>(
      await request("GET", `/api/calls/${asked.id}`, { cookie: olga.cookie }),
    );
    expect(story.decidedBy).toBe("rita");
    expect(await auditOf(rt, "call.approved", ADD_NOTE)).toEqual([
      expect.objectContaining({ actor: "rita" }),
    ]);
    expect(await auditOf(rt, "user.remove", "rita")).toEqual([
      expect.objectContaining({
        actor: "olga",
        detail: "reviewer; 1 session ended, 1 grant ended, 0 calls withdrawn",
      }),
    ]);

    // Another owner goes: their pending call is withdrawn, marked and audited.
    const gone = await bodyOf<{ callsWithdrawn: number }>(
      await request("DELETE", "/api/users/otto", { cookie: olga.cookie }),
    );
    expect(gone.callsWithdrawn).toBe(1);
    const row = await first(rt.runtime.db.select().from(calls).where(eq(calls.id, pending.id)));
    expect(row).toMatchObject({ status: "withdrawn", requesterName: "otto", errorCode: "withdrawn" });
    expect(await auditOf(rt, "call.withdrawn", ADD_NOTE)).toEqual([
      expect.objectContaining({ actor: "olga", callId: pending.id, detail: "otto was removed" }),
    ]);
  });

  it("a later user given the same name does not bring back the removed person's grants", async () => {
    const rt = await start();
    await enableTool(rt.runtime, ADD_NOTE);
    const olga = await createTestUser(rt.runtime, "olga", ["owner"]);
    const rita = await createTestUser(rt.runtime, "rita", ["reviewer"]);
    const agent = await createAgentToken(rt.runtime, "build-bot");
    const asked = await bodyOf<CallView>(
      await request("POST", "/api/calls", {
        bearer: agent,
        body: { tool: ADD_NOTE, arguments: { text: "a" } },
      }),
    );
    await request("POST", `/api/calls/${asked.id}/approve`, {
      cookie: rita.cookie,
      body: { grant: { scope: "tool", minutes: 60 } },
    });
    expect((await request("DELETE", "/api/users/rita", { cookie: olga.cookie })).status).toBe(200);
    await createTestUser(rt.runtime, "rita", ["reviewer"]);

    const next = await bodyOf<CallView>(
      await request("POST", "/api/calls", {
        bearer: agent,
        body: { tool: ADD_NOTE, arguments: { text: "c" } },
      }),
    );
    expect(next.status).toBe("pending");
  });

  it("removing yourself, when another owner remains, signs you out", async () => {
    const rt = await start();
    const olga = await createTestUser(rt.runtime, "olga", ["owner"]);
    const otto = await createTestUser(rt.runtime, "otto", ["owner"]);
    const res = await request("DELETE", "/api/users/olga", { cookie: olga.cookie });
    expect(res.status).toBe(200);
    expect(parseSetCookie(res.headers.get("set-cookie")).attrs).toContain("Max-Age=0");
    expect(await meStatus(olga.cookie)).toBe(401);
    expect(await meStatus(otto.cookie)).toBe(200);
    await expectError(await request("DELETE", "/api/users/olga", { cookie: otto.cookie }), 404, "not_found");
  });
});

describe("a person changes their own password", () => {
  it("needs the current password: a wrong one is refused and changes nothing", async () => {
    const rt = await start();
    const bob = await createTestUser(rt.runtime, "bob", ["reviewer"]);
    const res = await request("POST", "/api/me/password", {
      cookie: bob.cookie,
      body: { current: "not my password", password: NEW_PASSWORD },
    });
    expect(await expectError(res, 401, "invalid_credentials")).toBe("The current password is not right.");
    expect(await meStatus(bob.cookie)).toBe(200);
    expect((await signIn("bob", bob.password)).status).toBe(200);
    expect((await signIn("bob", NEW_PASSWORD)).status).toBe(401);
    await expectError(
      await request("POST", "/api/me/password", { cookie: bob.cookie, body: { password: NEW_PASSWORD } }),
      400,
      "invalid_body",
    );
  });

  it("ends the person's other sessions and keeps this one", async () => {
    const rt = await start();
    const bob = await createTestUser(rt.runtime, "bob", ["reviewer"]);
    const elsewhere = await sessionCookieFor(rt.runtime, bob.user.id);
    const res = await request("POST", "/api/me/password", {
      cookie: bob.cookie,
      body: { current: bob.password, password: NEW_PASSWORD },
    });
    expect(res.status).toBe(200);
    const text = await res.text();
    expect(JSON.parse(text)).toMatchObject({ user: { name: "bob" }, sessionsEnded: 1 });
    expect(res.headers.get("set-cookie")).toBeNull();
    expect(await meStatus(bob.cookie)).toBe(200);
    expect(await meStatus(elsewhere)).toBe(401);
    expect((await signIn("bob", bob.password)).status).toBe(401);
    expect((await signIn("bob", NEW_PASSWORD)).status).toBe(200);
    expect(await auditOf(rt, "user.password", "bob")).toEqual([
      expect.objectContaining({ actor: "bob", detail: "changed; 1 other session ended" }),
    ]);
    expect(await everythingWritten(rt, text)).not.toContain(NEW_PASSWORD);
    expect(await everythingWritten(rt, text)).not.toContain(bob.password);
  });

  it("a wrong current password counts against the sign-in throttle", async () => {
    const rt = await start();
    const bob = await createTestUser(rt.runtime, "bob", ["reviewer"]);
    for (let i = 0; i < 10; i++) {
      const res = await request("POST", "/api/me/password", {
        cookie: bob.cookie,
        body: { current: `guess number ${i}`, password: NEW_PASSWORD },
      });
      expect(res.status).toBe(401);
    }
    const locked = await request("POST", "/api/me/password", {
      cookie: bob.cookie,
      body: { current: bob.password, password: NEW_PASSWORD },
    });
    await expectError(locked, 429, "too_many_attempts");
    expect(Number(locked.headers.get("retry-after"))).toBeGreaterThan(0);
    expect((await signIn("bob", NEW_PASSWORD)).status).toBe(429);
  });

  it("a new password follows the rules of a new one and must differ from the current", async () => {
    const rt = await start();
    const bob = await createTestUser(rt.runtime, "bob", ["reviewer"]);
    const nl = await request("POST", "/api/me/password", {
      cookie: bob.cookie,
      body: { current: bob.password, password: `${STRONG}\n` },
    });
    expect(await expectError(nl, 400, "invalid_body")).toBe(
      "body.password: Passwords cannot contain control characters such as a newline.",
    );
    const same = await request("POST", "/api/me/password", {
      cookie: bob.cookie,
      body: { current: bob.password, password: bob.password },
    });
    expect(await expectError(same, 400, "bad_request")).toBe(
      "The new password is the same as the current one.",
    );
    expect((await signIn("bob", bob.password)).status).toBe(200);
  });
});
