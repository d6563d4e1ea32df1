/**
 * The principal the hot path hands over: `/api/calls` (through `route()`) and `/mcp` take the
 * edge's answer instead of authenticating the same headers again, and Next's own path, which
 * hands nothing, still authenticates.
 */
import { afterEach, describe, expect, it } from "vitest";
import { initializeRequest } from "@/test/support/mcp";
import {
  createAgentToken,
  createTestUser,
  enableTool,
  LIST_NOTES,
  ORIGIN,
  startTestRuntime,
  type TestRuntime,
} from "@/test/support/runtime";
import type { Principal } from "../auth/access";
import { tokenFromSecret } from "../auth/tokens";
import { MAX_REQUEST_BODY_BYTES } from "../request";
import * as callsApi from "./calls-api";
import * as mcpApi from "./mcp-api";

let rt: TestRuntime | undefined;
afterEach(async () => {
  await rt?.stop();
  rt = undefined;
});

const params = Promise.resolve({});

/** A POST /api/calls as an agent sends it, with or without its bearer token. */
function callRequest(bearer?: string): Request {
  return new Request(`${ORIGIN}/api/calls`, {
    method: "POST",
    headers: {
      host: "127.0.0.1:3000",
      "content-type": "application/json",
      ...(bearer ? { authorization: `Bearer ${bearer}` } : {}),
    },
    body: JSON.stringify({ tool: LIST_NOTES, arguments: {} }),
  });
}

/** What the hot path's authentication finds for a new token called `name`. */
async function agentPrincipal(t: TestRuntime, name: string): Promise<Principal> {
  const token = await tokenFromSecret(t.runtime.db, await createAgentToken(t.runtime, name));
  if (!token) throw new Error(`no token ${name}`);
  return { kind: "agent", token, via: "bearer" };
}

describe("route() with a principal from the edge", () => {
  it("acts as the handed principal without looking at the headers again", async () => {
    rt = await startTestRuntime();
    await enableTool(rt.runtime, LIST_NOTES);
    const bot = await agentPrincipal(rt, "bot");
    // No credentials on the request itself: only the handed principal can let it through.
    const res = await callsApi.POST(callRequest(), { params, principal: bot });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { requester: unknown; status: string };
    expect(body.requester).toEqual({ kind: "agent", name: "bot" });
    expect(body.status).toBe("succeeded");
  });

  it("a handed null is nobody, whatever the headers carry: 401", async () => {
    rt = await startTestRuntime();
    const secret = await createAgentToken(rt.runtime, "bot");
    const res = await callsApi.POST(callRequest(secret), { params, principal: null });
    expect(res.status).toBe(401);
  });

  it("Next's path hands nothing, so route() authenticates the request itself", async () => {
    rt = await startTestRuntime();
    await enableTool(rt.runtime, LIST_NOTES);
    const secret = await createAgentToken(rt.runtime, "bot");
    expect((await callsApi.POST(callRequest(), { params })).status).toBe(401);
    expect((await callsApi.POST(callRequest(secret), { params })).status).toBe(200);
  });
});

describe("route() with a body from the edge", () => {
  it("takes the handed body and never reads the Request's: one without a body is called as the handed one says", async () => {
    rt = await startTestRuntime();
    await enableTool(rt.runtime, LIST_NOTES);
    const bot = await agentPrincipal(rt, "bot");
    const bare = new Request(`${ORIGIN}/api/calls`, {
      method: "POST",
      headers: { host: "127.0.0.1:3000", "content-type": "application/json" },
    });
    const body = Buffer.from(JSON.stringify({ tool: LIST_NOTES, arguments: {} }));
    const res = await callsApi.POST(bare, { params, principal: bot, body });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { tool: string }).tool).toBe(LIST_NOTES);
    // The handed body is what counts: an unknown tool in it is refused, whatever the Request says.
    const wrong = Buffer.from(JSON.stringify({ tool: "nope", arguments: {} }));
    expect((await callsApi.POST(callRequest(), { params, principal: bot, body: wrong })).status).toBe(404);
  });

  it("a handed body that is not JSON, or over the limit, is refused as one read from the Request would be", async () => {
    rt = await startTestRuntime();
    const bot = await agentPrincipal(rt, "bot");
    const bare = () =>
      new Request(`${ORIGIN}/api/calls`, { method: "POST", headers: { host: "127.0.0.1:3000" } });
    const notJson = await callsApi.POST(bare(), { params, principal: bot, body: Buffer.from("{nope") });
    expect(notJson.status).toBe(400);
    const huge = Buffer.alloc(MAX_REQUEST_BODY_BYTES + 1, 32);
    const tooLarge = await callsApi.POST(bare(), { params, principal: bot, body: huge });
    expect(tooLarge.status).toBe(413);
  });
});

describe("/mcp with a principal from the edge", () => {
  it("an agent handed over opens a session without its token being read again", async () => {
    rt = await startTestRuntime();
    const res = await mcpApi.POST(initializeRequest(), {
      params,
      principal: await agentPrincipal(rt, "bot"),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("mcp-session-id")).toBeTruthy();
    await res.body?.cancel();
    expect(rt.runtime.agentMcp.sessionCount("bot")).toBe(1);
  });

  it("a person handed over is not an agent: 401, as a session cookie is", async () => {
    rt = await startTestRuntime();
    const rita = await createTestUser(rt.runtime, "rita", ["reviewer", "owner"]);
    const person: Principal = { kind: "user", user: rita.user, via: "cookie" };
    const res = await mcpApi.POST(initializeRequest(), { params, principal: person });
    expect(res.status).toBe(401);
    expect(res.headers.get("www-authenticate")).toBe('Bearer realm="gatehouse"');
    expect(rt.runtime.agentMcp.sessionCount()).toBe(0);
  });

  it("the Host check still comes first: a foreign Host is 403 even for a handed agent", async () => {
    rt = await startTestRuntime();
    const res = await mcpApi.POST(initializeRequest({ host: "evil.example.com" }), {
      params,
      principal: await agentPrincipal(rt, "bot"),
    });
    expect(res.status).toBe(403);
  });
});
