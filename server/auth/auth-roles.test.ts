/**
 * Every API route's role (PRODUCT.md §1): a table of who may call each route file under app/api,
 * checked against the files on disk and then, route by route, as each kind of caller, through
 * the real route modules and the one route wrapper.
 */
import { eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import type { CallView } from "@/lib/api-types";
import {
  ADD_NOTE,
  bodyOf,
  createAgentToken,
  createTestUser,
  enableTool,
  loadRoute,
  request,
  routeFiles,
  sessionCookieFor,
} from "@/test/support/runtime";
import { listEnabledTools } from "../catalogue/catalogue";
import { first } from "../store/db";
import { tools } from "../store/schema";
import type { Access } from "./access";
import { expectError, runtimePerTest } from "./auth-fixtures";

const start = runtimePerTest();

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
  "/api/me/password": { POST: ["owner", "reviewer"] },
  "/api/servers": { GET: ["owner"] },
  "/api/health": { GET: ["owner"] },
  "/api/servers/[name]/prompts": { GET: ["owner"] },
  "/api/servers/[name]/reconnect": { POST: ["owner"] },
  "/api/servers/[name]/switch": { POST: ["owner"] },
  "/api/servers/[name]/oauth": { POST: ["owner"], DELETE: ["owner"] },
  "/api/servers/[name]/resources": { GET: ["owner"] },
  "/api/servers/[name]/resources/read": { GET: ["owner"] },
  "/api/session": { POST: ["public"], DELETE: ["owner", "reviewer"] },
  "/api/setup": { POST: ["public"] },
  "/api/tokens": { GET: ["owner"], POST: ["owner"] },
  "/api/tokens/[name]": { DELETE: ["owner"], PATCH: ["owner"] },
  "/api/tools": { GET: ["agent", "owner"] },
  "/api/users": { GET: ["owner"], POST: ["owner"] },
  "/api/users/[name]": { PATCH: ["owner"], DELETE: ["owner"] },
  "/api/users/[name]/sessions": { DELETE: ["owner"] },
  "/api/notifications": { GET: ["owner"] },
  "/api/rules": { GET: ["owner", "reviewer"] },
  "/api/grants": { GET: ["owner", "reviewer"] },
  "/api/grants/[id]": { DELETE: ["owner", "reviewer"] },
  "/api/resource-reads": { GET: ["owner", "reviewer"] },
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
      const agent = await createAgentToken(rt.runtime, "robot");
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
              ? { cookie: await sessionCookieFor(rt.runtime, reviewer.user.id) }
              : who === "owner"
                ? { cookie: await sessionCookieFor(rt.runtime, owner.user.id) }
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
    const row = await first(rt.runtime.db.select().from(tools).where(eq(tools.localName, ADD_NOTE)));
    expect(row?.status).toBe("proposed");
    expect(await listEnabledTools(rt.runtime.db)).toEqual([]);

    const owner = await createTestUser(rt.runtime, "olga", ["owner"]);
    const ok = await request("PATCH", `/api/catalogue/${ADD_NOTE}`, {
      cookie: owner.cookie,
      body: { status: "enabled", expectedHash: row?.definitionHash },
    });
    expect(ok.status).toBe(200);
    expect((await listEnabledTools(rt.runtime.db)).map((x) => x.name)).toEqual([ADD_NOTE]);
  });

  it("an agent token cannot approve", async () => {
    const rt = await start();
    await enableTool(rt.runtime, ADD_NOTE);
    const agent = await createAgentToken(rt.runtime, "robot");
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
