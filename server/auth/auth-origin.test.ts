/**
 * The Origin check (PRODUCT.md §8): state-changing requests from a foreign or missing Origin are
 * refused, cookie and bearer alike, except a bearer request that sends none; reads need none.
 */
import { describe, expect, it } from "vitest";
import type { CallView } from "@/lib/api-types";
import {
  bodyOf,
  createAgentToken,
  createTestUser,
  enableTool,
  LIST_NOTES,
  ORIGIN,
  request,
  type TestRuntime,
} from "@/test/support/runtime";
import { agentTokens } from "../store/schema";
import { expectError, runtimePerTest } from "./auth-fixtures";

const start = runtimePerTest();

describe("the Origin check", () => {
  async function tokenCount(rt: TestRuntime): Promise<number> {
    return (await rt.runtime.db.select().from(agentTokens)).length;
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
    await enableTool(rt.runtime, LIST_NOTES);
    const agent = await createAgentToken(rt.runtime, "robot");
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
    await enableTool(rt.runtime, LIST_NOTES);
    const agent = await createAgentToken(rt.runtime, "robot");
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
