/**
 * Authentication and authorisation (PRODUCT.md §1, §8): passwords, sessions, agent tokens,
 * the setup code, login throttling, the Origin check and every API route's role, exercised
 * through the real route modules and the one route wrapper.
 */
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { eq } from "drizzle-orm";
import { afterEach, describe, expect, it } from "vitest";
import type { CallView, TokenView, UserView } from "@/lib/api-types";
import { type ErrorCode, errorStatus, GatehouseError } from "@/lib/errors";
import {
  ADD_NOTE,
  bodyOf,
  createAgentToken,
  createTestUser,
  enableTool,
  LIST_NOTES,
  loadRoute,
  ORIGIN,
  request,
  routeFiles,
  sessionCookieFor,
  startTestRuntime,
  type TestRuntime,
} from "@/test/support/runtime";
import { listEnabledTools } from "../catalogue/catalogue";
import { MAX_REQUEST_BODY_BYTES } from "../http/node-bridge";
import { route } from "../http/route";
import { agentTokens, calls, sessions, tools, users } from "../store/schema";
import { type Access, LoginThrottle } from "./access";
import { hashPassword, sha256, verifyPassword } from "./crypto";
import { createSession, SESSION_COOKIE, SESSION_TTL_MS } from "./sessions";
import { issueSetupCode } from "./users";

type ErrorBody = { error: { code: string; message: string } };

let t: TestRuntime | undefined;

afterEach(async () => {
  await t?.stop();
  t = undefined;
});

async function start(): Promise<TestRuntime> {
  t = await startTestRuntime();
  return t;
}

async function expectError(res: Response, status: number, code: string): Promise<string> {
  expect(res.status).toBe(status);
  const body = await bodyOf<ErrorBody>(res);
  expect(Object.keys(body)).toEqual(["error"]);
  expect(body.error.code).toBe(code);
  expect(typeof body.error.message).toBe("string");
  expect(body.error.message.length).toBeGreaterThan(0);
  return body.error.message;
}

/** `name=value` of a Set-Cookie header, and its attributes. */
function parseSetCookie(header: string | null): { pair: string; value: string; attrs: string[] } {
  expect(header).not.toBeNull();
  const [pair = "", ...attrs] = (header ?? "").split(";").map((s) => s.trim());
  return { pair, value: pair.slice(pair.indexOf("=") + 1), attrs };
}

const STRONG = "correct horse battery";

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
    expect(wrong.headers.get("set-cookie")).toBeNull();
  });

  it("an expired session is rejected", async () => {
    const rt = await start();
    const alice = await createTestUser(rt.runtime, "alice", ["reviewer"]);
    const old = createSession(rt.runtime.db, alice.user.id, Date.now() - SESSION_TTL_MS - 1000);
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
      rt.runtime.db
        .select()
        .from(sessions)
        .where(eq(sessions.idHash, sha256(sid)))
        .all(),
    ).toEqual([]);
    await expectError(await request("GET", "/api/me", { cookie: alice.cookie }), 401, "unauthenticated");
  });
});

/** Every byte of the SQLite store (main file, WAL and shared memory) as latin1 text. */
function storeBytes(rt: TestRuntime): string {
  const base = path.basename(rt.dbFile);
  return readdirSync(rt.dir)
    .filter((f) => f.startsWith(base))
    .map((f) => readFileSync(path.join(rt.dir, f)).toString("latin1"))
    .join("\n");
}

describe("agent tokens", () => {
  it("a created token works at once, and the store never contains its secret", async () => {
    const rt = await start();
    const owner = await createTestUser(rt.runtime, "olga", ["owner"]);
    const res = await request("POST", "/api/tokens", { cookie: owner.cookie, body: { name: "robot" } });
    expect(res.status).toBe(201);
    const { secret, token } = await bodyOf<{ secret: string; token: TokenView }>(res);
    expect(token.name).toBe("robot");
    expect(secret.length).toBeGreaterThan(40);

    const tools = await request("GET", "/api/tools", { bearer: secret });
    expect(tools.status).toBe(200);

    const row = rt.runtime.db.select().from(agentTokens).where(eq(agentTokens.name, "robot")).get();
    expect(row?.tokenHash).toBe(sha256(secret));
    expect(storeBytes(rt)).not.toContain(secret);
    // Nor the password or the session cookie of the owner.
    expect(storeBytes(rt)).not.toContain(owner.password);
    expect(storeBytes(rt)).not.toContain(owner.cookie.slice(owner.cookie.indexOf("=") + 1));

    const listed = await request("GET", "/api/tokens", { cookie: owner.cookie });
    const text = await listed.text();
    expect(text).toContain("robot");
    expect(text).not.toContain(secret);
    expect(text).not.toContain(sha256(secret));
  });

  it("a revoked token is rejected", async () => {
    const rt = await start();
    const owner = await createTestUser(rt.runtime, "olga", ["owner"]);
    const secret = createAgentToken(rt.runtime, "robot");
    expect((await request("GET", "/api/tools", { bearer: secret })).status).toBe(200);
    const res = await request("DELETE", "/api/tokens/robot", { cookie: owner.cookie });
    expect(res.status).toBe(200);
    expect((await bodyOf<{ token: TokenView }>(res)).token.revokedAt).not.toBeNull();
    const after = await request("GET", "/api/tools", { bearer: secret });
    await expectError(after, 401, "unauthenticated");
    expect(after.headers.get("www-authenticate")).toContain("Bearer");
  });

  it("an unknown bearer token is rejected even with a valid session cookie beside it", async () => {
    const rt = await start();
    const owner = await createTestUser(rt.runtime, "olga", ["owner"]);
    const res = await request("GET", "/api/tools", { bearer: "gh_not-a-token", cookie: owner.cookie });
    await expectError(res, 401, "unauthenticated");
  });
});

describe("credentials of other schemes", () => {
  it("a proxy's Basic Authorization header does not hide the session cookie", async () => {
    const rt = await start();
    const owner = await createTestUser(rt.runtime, "olga", ["owner"]);
    const res = await request("GET", "/api/servers", {
      cookie: owner.cookie,
      headers: { Authorization: "Basic b2xnYTpwcm94eS1wYXNz" },
    });
    expect(res.status).toBe(200);
  });

  it("a malformed Bearer header is refused, not treated as a session", async () => {
    const rt = await start();
    const owner = await createTestUser(rt.runtime, "olga", ["owner"]);
    const res = await request("GET", "/api/servers", {
      cookie: owner.cookie,
      headers: { Authorization: "Bearer" },
    });
    await expectError(res, 401, "unauthenticated");
  });
});

describe("the one-time setup code", () => {
  it("creates the first owner and signs them in; a second use is refused", async () => {
    const rt = await start();
    const code = issueSetupCode(rt.runtime.db);
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
    rt.runtime.db.delete(users).run();
    await expectError(
      await request("POST", "/api/setup", { body: { ...body, name: "second" } }),
      403,
      "invalid_setup_code",
    );
    expect(rt.runtime.db.select().from(users).all()).toEqual([]);
  });

  it("is refused once a user exists, and no new code is issued", async () => {
    const rt = await start();
    const code = issueSetupCode(rt.runtime.db);
    await createTestUser(rt.runtime, "cli-owner", ["owner"]);
    await expectError(
      await request("POST", "/api/setup", { body: { code, name: "intruder", password: STRONG } }),
      409,
      "setup_done",
    );
    expect(issueSetupCode(rt.runtime.db)).toBeNull();
    expect(rt.runtime.db.select({ name: users.name }).from(users).all()).toEqual([{ name: "cli-owner" }]);
  });

  it("an invalid code is refused and creates nobody", async () => {
    const rt = await start();
    const code = issueSetupCode(rt.runtime.db);
    await expectError(
      await request("POST", "/api/setup", { body: { code: `${code}x`, name: "first", password: STRONG } }),
      403,
      "invalid_setup_code",
    );
    expect(rt.runtime.db.select().from(users).all()).toEqual([]);
  });

  it("only the newest code works", async () => {
    const rt = await start();
    const older = issueSetupCode(rt.runtime.db);
    const newer = issueSetupCode(rt.runtime.db);
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

  it("the throttle forgets expired windows instead of growing without bound", () => {
    const throttle = new LoginThrottle(10, 1000, 100);
    for (let i = 0; i < 100; i++) throttle.fail([`name:user-${i}`], 0);
    expect(throttle.size).toBe(100);
    throttle.fail(["name:late"], 5000);
    expect(throttle.size).toBe(1);
    for (let i = 0; i < 500; i++) throttle.fail([`name:burst-${i}`], 6000);
    expect(throttle.size).toBeLessThanOrEqual(100);
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

// ---------------------------------------------------------------------------------------------
// Roles of every route

/**
 * Who may call each route, as PRODUCT.md §1 says. Keys are URL patterns of the route files under
 * app/api; every exported method needs an entry. A new route file without a row fails below.
 */
const ROUTE_ACCESS: Record<string, Record<string, readonly Access[]>> = {
  "/api/calls": { GET: ["agent", "reviewer"], POST: ["agent", "owner"] },
  "/api/calls/[id]": { GET: ["agent", "reviewer"] },
  "/api/calls/[id]/approve": { POST: ["reviewer"] },
  "/api/calls/[id]/deny": { POST: ["reviewer"] },
  "/api/calls/[id]/story": { GET: ["reviewer"] },
  "/api/catalogue": { GET: ["owner"] },
  "/api/catalogue/[name]": { PATCH: ["owner"] },
  "/api/catalogue/[name]/history": { GET: ["owner"] },
  "/api/catalogue/bulk": { POST: ["owner"] },
  "/api/changes": { GET: ["owner"] },
  "/api/changes/read": { POST: ["owner"] },
  "/api/events": { GET: ["owner", "reviewer"] },
  "/api/me": { GET: ["owner", "reviewer"] },
  "/api/servers": { GET: ["owner"] },
  "/api/servers/[name]/prompts": { GET: ["owner"] },
  "/api/servers/[name]/reconnect": { POST: ["owner"] },
  "/api/servers/[name]/resources": { GET: ["owner"] },
  "/api/servers/[name]/resources/read": { GET: ["owner"] },
  "/api/session": { POST: ["public"], DELETE: ["owner", "reviewer"] },
  "/api/setup": { POST: ["public"] },
  "/api/tokens": { GET: ["owner"], POST: ["owner"] },
  "/api/tokens/[name]": { DELETE: ["owner"] },
  "/api/tools": { GET: ["agent", "owner"] },
  "/api/users": { GET: ["owner"], POST: ["owner"] },
};

const HTTP_METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"];

type Who = "anonymous" | "agent" | "reviewer" | "owner";

/** Whether the table lets `who` through (owners satisfy `reviewer`, as the wrapper does). */
function mayCall(access: readonly Access[], who: Who): boolean {
  if (access.includes("public")) return true;
  switch (who) {
    case "anonymous":
      return false;
    case "agent":
      return access.includes("agent");
    case "reviewer":
      return access.includes("reviewer");
    case "owner":
      return access.includes("owner") || access.includes("reviewer");
  }
}

/** A concrete URL for a pattern: dynamic segments get names that match nothing. */
function concrete(pattern: string): string {
  return pattern.replace(/\[(\w+)\]/g, (_, p: string) => `no-such-${p}`);
}

const routeCases = Object.entries(ROUTE_ACCESS).flatMap(([pattern, methods]) =>
  Object.entries(methods).map(([method, access]) => ({ pattern, method, access })),
);

describe("roles: every API route checks its role", () => {
  it("the table covers every route file under app/api and every method it exports", async () => {
    const onDisk = routeFiles();
    expect(onDisk.length).toBeGreaterThan(0);
    expect(onDisk.map((r) => r.pattern).sort()).toEqual(Object.keys(ROUTE_ACCESS).sort());
    for (const r of onDisk) {
      const mod = await loadRoute(r.file);
      const exported = Object.keys(mod).filter((k) => HTTP_METHODS.includes(k));
      expect(exported.sort(), r.file).toEqual(Object.keys(ROUTE_ACCESS[r.pattern] ?? {}).sort());
    }
  });

  for (const { pattern, method, access } of routeCases)
    it(`${method} ${pattern}`, async () => {
      const rt = await start();
      const agent = createAgentToken(rt.runtime, "robot");
      const reviewer = await createTestUser(rt.runtime, "rita", ["reviewer"]);
      const owner = await createTestUser(rt.runtime, "olga", ["owner"]);
      const url = concrete(pattern);
      const hasBody = method !== "GET" && method !== "HEAD";

      const call = async (who: Who): Promise<Response> => {
        const controller = new AbortController();
        const auth =
          who === "agent"
            ? { bearer: agent }
            : who === "reviewer"
              ? { cookie: sessionCookieFor(rt.runtime, reviewer.user.id) }
              : who === "owner"
                ? { cookie: sessionCookieFor(rt.runtime, owner.user.id) }
                : {};
        // Allowed requests carry an invalid body or name nothing that exists, so they stop at
        // validation or "not found" without changing anything; streams are closed at once.
        const res = await request(method, url, {
          ...auth,
          body: hasBody ? {} : undefined,
          signal: controller.signal,
        });
        controller.abort();
        return res;
      };

      for (const who of ["anonymous", "agent", "reviewer", "owner"] as const) {
        const res = await call(who);
        const text = res.headers.get("content-type")?.includes("json") ? await res.text() : "";
        if (!res.bodyUsed) await res.body?.cancel();
        const label = `${method} ${url} as ${who}: ${res.status} ${text}`;
        if (mayCall(access, who)) {
          expect([401, 403], label).not.toContain(res.status);
          expect(res.status, label).toBeLessThan(500);
        } else if (who === "anonymous") {
          expect(res.status, label).toBe(401);
          expect(JSON.parse(text).error.code, label).toBe("unauthenticated");
        } else {
          expect(res.status, label).toBe(403);
          expect(JSON.parse(text).error.code, label).toBe("forbidden");
        }
      }
    });

  it("a reviewer cannot enable tools", async () => {
    const rt = await start();
    const reviewer = await createTestUser(rt.runtime, "rita", ["reviewer"]);
    const res = await request("PATCH", `/api/catalogue/${ADD_NOTE}`, {
      cookie: reviewer.cookie,
      body: { status: "enabled" },
    });
    await expectError(res, 403, "forbidden");
    const row = rt.runtime.db.select().from(tools).where(eq(tools.localName, ADD_NOTE)).get();
    expect(row?.status).toBe("proposed");
    expect(listEnabledTools(rt.runtime.db)).toEqual([]);

    const owner = await createTestUser(rt.runtime, "olga", ["owner"]);
    const ok = await request("PATCH", `/api/catalogue/${ADD_NOTE}`, {
      cookie: owner.cookie,
      body: { status: "enabled" },
    });
    expect(ok.status).toBe(200);
    expect(listEnabledTools(rt.runtime.db).map((x) => x.name)).toEqual([ADD_NOTE]);
  });

  it("an agent token cannot approve", async () => {
    const rt = await start();
    enableTool(rt.runtime, ADD_NOTE);
    const agent = createAgentToken(rt.runtime, "robot");
    const posted = await request("POST", "/api/calls", {
      bearer: agent,
      body: { tool: ADD_NOTE, arguments: { text: "x" } },
    });
    expect(posted.status).toBe(202);
    const call = await bodyOf<CallView>(posted);
    await expectError(
      await request("POST", `/api/calls/${call.id}/approve`, { bearer: agent }),
      403,
      "forbidden",
    );
    await expectError(
      await request("POST", `/api/calls/${call.id}/deny`, { bearer: agent, body: { reason: "mine" } }),
      403,
      "forbidden",
    );
    const after = await bodyOf<CallView>(await request("GET", `/api/calls/${call.id}`, { bearer: agent }));
    expect(after.status).toBe("pending");
    expect(rt.demoRuns()).toBe(0);
  });
});

describe("the Origin check", () => {
  async function tokenCount(rt: TestRuntime): Promise<number> {
    return rt.runtime.db.select().from(agentTokens).all().length;
  }

  it("a state-changing cookie request without Origin is refused with 403 bad_origin", async () => {
    const rt = await start();
    const owner = await createTestUser(rt.runtime, "olga", ["owner"]);
    const res = await request("POST", "/api/tokens", {
      cookie: owner.cookie,
      origin: null,
      body: { name: "robot" },
    });
    await expectError(res, 403, "bad_origin");
    expect(await tokenCount(rt)).toBe(0);
  });

  it("a state-changing cookie request from a foreign Origin is refused with 403 bad_origin", async () => {
    const rt = await start();
    const owner = await createTestUser(rt.runtime, "olga", ["owner"]);
    for (const origin of ["http://evil.example", "http://127.0.0.1:3001", "https://127.0.0.1:3000", "null"]) {
      const res = await request("POST", "/api/tokens", {
        cookie: owner.cookie,
        origin,
        body: { name: "robot" },
      });
      await expectError(res, 403, "bad_origin");
    }
    expect(await tokenCount(rt)).toBe(0);
  });

  it("a state-changing cookie request from the matching Origin passes", async () => {
    const rt = await start();
    const owner = await createTestUser(rt.runtime, "olga", ["owner"]);
    const res = await request("POST", "/api/tokens", {
      cookie: owner.cookie,
      origin: ORIGIN,
      body: { name: "robot" },
    });
    expect(res.status).toBe(201);
    expect(await tokenCount(rt)).toBe(1);
  });

  it("an anonymous sign-in without Origin is refused (no login CSRF)", async () => {
    const rt = await start();
    const alice = await createTestUser(rt.runtime, "alice", ["reviewer"]);
    const res = await request("POST", "/api/session", {
      origin: null,
      body: { name: "alice", password: alice.password },
    });
    await expectError(res, 403, "bad_origin");
    expect(res.headers.get("set-cookie")).toBeNull();
  });

  it("a bearer request without Origin passes", async () => {
    const rt = await start();
    enableTool(rt.runtime, LIST_NOTES);
    const agent = createAgentToken(rt.runtime, "robot");
    const res = await request("POST", "/api/calls", {
      bearer: agent,
      origin: null,
      body: { tool: LIST_NOTES },
    });
    expect(res.status).toBe(200);
    expect((await bodyOf<CallView>(res)).status).toBe("succeeded");
  });

  it("a bearer request from a foreign Origin is refused with 403 bad_origin", async () => {
    const rt = await start();
    enableTool(rt.runtime, LIST_NOTES);
    const agent = createAgentToken(rt.runtime, "robot");
    const res = await request("POST", "/api/calls", {
      bearer: agent,
      origin: "http://evil.example",
      body: { tool: LIST_NOTES },
    });
    await expectError(res, 403, "bad_origin");
  });

  it("a read (GET) with a cookie needs no Origin", async () => {
    const rt = await start();
    const owner = await createTestUser(rt.runtime, "olga", ["owner"]);
    expect((await request("GET", "/api/tokens", { cookie: owner.cookie, origin: null })).status).toBe(200);
  });
});

describe("API errors", () => {
  it("a body that fails validation is 400 invalid_body naming the field", async () => {
    const rt = await start();
    const owner = await createTestUser(rt.runtime, "olga", ["owner"]);
    const message = await expectError(
      await request("POST", "/api/tokens", { cookie: owner.cookie, body: { name: "no spaces allowed" } }),
      400,
      "invalid_body",
    );
    expect(message).toContain("body.name");
    await expectError(
      await request("POST", "/api/tokens", { cookie: owner.cookie, body: "{not json" }),
      400,
      "invalid_body",
    );
  });

  it("a conflict is 409 already_exists", async () => {
    const rt = await start();
    const owner = await createTestUser(rt.runtime, "olga", ["owner"]);
    expect(
      (await request("POST", "/api/tokens", { cookie: owner.cookie, body: { name: "robot" } })).status,
    ).toBe(201);
    await expectError(
      await request("POST", "/api/tokens", { cookie: owner.cookie, body: { name: "robot" } }),
      409,
      "already_exists",
    );
  });

  it("every error code is answered with its status in the {error: {code, message}} shape", async () => {
    await start();
    for (const code of Object.keys(errorStatus) as ErrorCode[]) {
      const handler = route({ access: ["public"] }, () => {
        throw new GatehouseError(code, `failed with ${code}`);
      });
      const res = await handler(new Request(`${ORIGIN}/api/x`), { params: Promise.resolve({}) });
      expect(res.status, code).toBe(errorStatus[code]);
      expect(await res.json()).toEqual({ error: { code, message: `failed with ${code}` } });
    }
  });

  it("an unknown exception becomes 500 internal error without leaking its message", async () => {
    await start();
    const secret = "SQLITE_CORRUPT at /srv/private/gatehouse.db token=gh_abc123";
    const handler = route({ access: ["public"] }, () => {
      throw new Error(secret);
    });
    const res = await handler(new Request(`${ORIGIN}/api/x`), { params: Promise.resolve({}) });
    expect(res.status).toBe(500);
    const text = await res.text();
    expect(JSON.parse(text)).toEqual({ error: { code: "internal", message: "internal error" } });
    expect(text).not.toContain("SQLITE");
    expect(text).not.toContain("gh_abc123");
  });
});

describe("request body limit", () => {
  it("a JSON body over 4 MiB is refused with 413 payload_too_large and stores nothing", async () => {
    const rt = await start();
    enableTool(rt.runtime, ADD_NOTE);
    const agent = createAgentToken(rt.runtime, "robot");
    const callCount = () => rt.runtime.db.select({ id: calls.id }).from(calls).all().length;
    // JSON allows any amount of whitespace, so padding keeps the body a valid call at any size:
    // only its size can be the reason for a refusal.
    const call = JSON.stringify({ tool: ADD_NOTE, arguments: { text: "padded" } });
    const padded = (bytes: number) => call + " ".repeat(bytes - call.length);
    expect(MAX_REQUEST_BODY_BYTES).toBe(4 * 1024 * 1024);

    await expectError(
      await request("POST", "/api/calls", { bearer: agent, body: padded(MAX_REQUEST_BODY_BYTES + 1) }),
      413,
      "payload_too_large",
    );
    expect(callCount()).toBe(0);

    // The same call at exactly the limit is accepted and stored.
    const accepted = await request("POST", "/api/calls", {
      bearer: agent,
      body: padded(MAX_REQUEST_BODY_BYTES),
    });
    expect(accepted.status).toBe(202);
    expect((await bodyOf<CallView>(accepted)).status).toBe("pending");
    expect(callCount()).toBe(1);
    expect(rt.demoRuns()).toBe(0);
  });
});
