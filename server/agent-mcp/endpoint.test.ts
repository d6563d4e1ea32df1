/**
 * `/mcp` at the door (issue 7): bearer authentication, DNS-rebinding protection and sessions,
 * through the real route module (app/mcp/route.ts) and the SDK's own client, against a real
 * runtime with the demo server.
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import { revokeToken } from "@/server/auth/tokens";
import { connectMcp, initializeRequest, MCP_URL, type McpHandler, routeHandler } from "@/test/support/mcp";
import {
  ADD_NOTE,
  callStatus,
  createAgentToken,
  createTestUser,
  enableTool,
  LIST_NOTES,
  ORIGIN,
  startTestRuntime,
  type TestRuntime,
  waitForEvent,
} from "@/test/support/runtime";
import { logger } from "../log";
import { AgentMcpEndpoint, type AgentMcpOptions } from "./endpoint";
import { allowedPeers, peerProblem } from "./guard";

let rt: TestRuntime | undefined;
const endpoints: AgentMcpEndpoint[] = [];
const cleanups: (() => Promise<void>)[] = [];

afterEach(async () => {
  vi.useRealTimers();
  for (const c of cleanups.splice(0).reverse()) await c();
  for (const e of endpoints.splice(0)) await e.close();
  await rt?.stop();
  rt = undefined;
});

async function start(opts: Parameters<typeof startTestRuntime>[0] = {}): Promise<TestRuntime> {
  rt = await startTestRuntime(opts);
  return rt;
}

/** A second endpoint on the test runtime with test-sized limits (and optionally another config). */
function endpoint(t: TestRuntime, options: AgentMcpOptions, config = t.runtime.config): AgentMcpEndpoint {
  const r = t.runtime;
  const e = new AgentMcpEndpoint(
    { db: r.db, bus: r.bus, broker: r.broker, manager: r.manager, config, log: logger("test-mcp") },
    { env: {}, ...options },
  );
  endpoints.push(e);
  return e;
}

async function connect(opts: Parameters<typeof connectMcp>[0]) {
  const c = await connectMcp(opts);
  cleanups.push(() => c.close());
  return c;
}

type RpcError = { jsonrpc: string; id: null; error: { code: number; message: string } };

async function expectRefused(res: Response, status: number): Promise<string> {
  expect(res.status).toBe(status);
  expect(res.headers.get("content-type")).toContain("application/json");
  const body = (await res.json()) as RpcError;
  expect(body.jsonrpc).toBe("2.0");
  expect(body.id).toBeNull();
  expect(body.error.message.length).toBeGreaterThan(0);
  return body.error.message;
}

describe("authentication", () => {
  it("no token: 401 with WWW-Authenticate and a JSON-RPC error body, and no session is opened", async () => {
    const t = await start();
    const res = await routeHandler(initializeRequest());
    expect(res.headers.get("www-authenticate")).toBe('Bearer realm="gatehouse"');
    expect(await expectRefused(res, 401)).toMatch(/Authorization: Bearer/);
    expect(t.runtime.agentMcp.sessionCount()).toBe(0);
  });

  it("a wrong token: 401 with WWW-Authenticate", async () => {
    const t = await start();
    createAgentToken(t.runtime, "bot");
    const res = await routeHandler(initializeRequest({ authorization: "Bearer gh_not-a-real-token" }));
    expect(res.headers.get("www-authenticate")).toBe('Bearer realm="gatehouse"');
    expect(await expectRefused(res, 401)).toMatch(/not valid/);
  });

  it("a revoked token: 401, also on the session it opened before", async () => {
    const t = await start();
    const token = createAgentToken(t.runtime, "bot");
    const session = await connect({ token });
    const sid = session.transport.sessionId ?? "";
    expect(sid).not.toBe("");
    revokeToken(t.runtime.db, { name: "bot", actor: "test" });
    await expect(session.client.listTools()).rejects.toThrow(/bearer token is not valid/);
    const fresh = await routeHandler(initializeRequest({ authorization: `Bearer ${token}` }));
    expect(fresh.headers.get("www-authenticate")).toBe('Bearer realm="gatehouse"');
    await expectRefused(fresh, 401);
  });

  it("a reviewer's session cookie is not an agent token: 401", async () => {
    const t = await start();
    const rita = await createTestUser(t.runtime, "rita", ["reviewer", "owner"]);
    const res = await routeHandler(initializeRequest({ cookie: rita.cookie }));
    await expectRefused(res, 401);
  });

  it("a valid token opens a session: initialize answers with an Mcp-Session-Id and the server's name", async () => {
    const t = await start();
    const { client, transport } = await connect({ token: createAgentToken(t.runtime, "bot") });
    expect(transport.sessionId).toMatch(/^[0-9a-f-]{36}$/);
    expect(client.getServerVersion()?.name).toBe("gatehouse");
    expect(client.getServerCapabilities()?.tools?.listChanged).toBe(true);
    expect(client.getInstructions()).toMatch(/approve/);
    expect(t.runtime.agentMcp.sessionCount("bot")).toBe(1);
  });
});

describe("DNS-rebinding protection", () => {
  it("a Host that is not Gatehouse's own is refused with 403, before the token is even looked at", async () => {
    const t = await start();
    const token = createAgentToken(t.runtime, "bot");
    for (const host of ["evil.example.com", "evil.example.com:3000", "127.0.0.1:4000", "localhost"]) {
      const res = await routeHandler(initializeRequest({ host, authorization: `Bearer ${token}` }));
      expect(await expectRefused(res, 403)).toMatch(/host/);
    }
    const anonymous = await routeHandler(initializeRequest({ host: "evil.example.com" }));
    expect(anonymous.headers.get("www-authenticate")).toBeNull();
    await expectRefused(anonymous, 403);
    expect(t.runtime.agentMcp.sessionCount()).toBe(0);
  });

  it("an Origin from another site is refused with 403, even with a valid token", async () => {
    const t = await start();
    const token = createAgentToken(t.runtime, "bot");
    for (const origin of [
      "http://evil.example.com",
      "null",
      "http://127.0.0.1:4000",
      "https://127.0.0.1:3000",
    ]) {
      const res = await routeHandler(initializeRequest({ origin, authorization: `Bearer ${token}` }));
      expect(await expectRefused(res, 403)).toMatch(/origin/);
    }
    expect(t.runtime.agentMcp.sessionCount()).toBe(0);
  });

  it("the loopback names on PORT are accepted as Host and Origin, and a missing Origin too", async () => {
    const t = await start();
    const token = createAgentToken(t.runtime, "bot");
    const ok: Record<string, string>[] = [
      { host: "127.0.0.1:3000", origin: ORIGIN },
      { host: "localhost:3000", origin: "http://localhost:3000" },
      { host: "[::1]:3000", origin: "http://[::1]:3000" },
      { host: "LOCALHOST:3000" },
    ];
    for (const headers of ok) {
      const res = await routeHandler(initializeRequest({ ...headers, authorization: `Bearer ${token}` }));
      expect(res.status).toBe(200);
      expect(res.headers.get("mcp-session-id")).toBeTruthy();
      await res.body?.cancel();
    }
  });

  it("the default allow-list follows HOST, PORT, GATEHOUSE_PUBLIC_ORIGIN and agentEndpoint", () => {
    const peers = allowedPeers({
      host: "gatehouse.lan",
      port: "8080",
      publicOrigin: "https://mcp.example.com/",
      extraHosts: ["Tools.Example.org:9000"],
      extraOrigins: ["https://tools.example.org:9000"],
    });
    const problem = (host: string, origin?: string) =>
      peerProblem(new Headers({ host, ...(origin ? { origin } : {}) }), peers);
    expect(problem("127.0.0.1:8080", "http://localhost:8080")).toBeNull();
    expect(problem("gatehouse.lan:8080", "http://gatehouse.lan:8080")).toBeNull();
    expect(problem("mcp.example.com", "https://mcp.example.com")).toBeNull();
    expect(problem("tools.example.org:9000", "https://tools.example.org:9000")).toBeNull();
    expect(problem("127.0.0.1:3000")).toMatch(/host/);
    expect(problem("mcp.example.com", "http://mcp.example.com")).toMatch(/origin/);
    // A wildcard listen address is not a name anyone sends.
    expect(allowedPeers({ host: "0.0.0.0", port: "3000" }).hosts).not.toContain("0.0.0.0:3000");
  });

  it("agentEndpoint.allowedHosts from the config lets a client in under another name", async () => {
    const t = await start();
    const token = createAgentToken(t.runtime, "bot");
    const e = endpoint(
      t,
      {},
      {
        ...t.runtime.config,
        agentEndpoint: { allowedHosts: ["gatehouse.lan:3000"], allowedOrigins: [] },
      },
    );
    const named = initializeRequest({ host: "gatehouse.lan:3000", authorization: `Bearer ${token}` });
    const res = await e.handle(named);
    expect(res.status).toBe(200);
    await res.body?.cancel();
    const other = await e.handle(
      initializeRequest({ host: "other.lan:3000", authorization: `Bearer ${token}` }),
    );
    await expectRefused(other, 403);
  });
});

describe("sessions", () => {
  it("a request without Mcp-Session-Id that is not initialize is refused with 400", async () => {
    const t = await start();
    const token = createAgentToken(t.runtime, "bot");
    const res = await routeHandler(
      new Request(MCP_URL, {
        method: "POST",
        headers: {
          host: "127.0.0.1:3000",
          authorization: `Bearer ${token}`,
          "content-type": "application/json",
          accept: "application/json, text/event-stream",
        },
        body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list", params: {} }),
      }),
    );
    expect(await expectRefused(res, 400)).toMatch(/Mcp-Session-Id/);
    expect(t.runtime.agentMcp.sessionCount()).toBe(0);
  });

  it("a session belongs to its token: another token presenting its id gets 404", async () => {
    const t = await start();
    const mine = await connect({ token: createAgentToken(t.runtime, "bot") });
    const other = createAgentToken(t.runtime, "other-bot");
    const res = await routeHandler(
      new Request(MCP_URL, {
        method: "POST",
        headers: {
          host: "127.0.0.1:3000",
          authorization: `Bearer ${other}`,
          "mcp-session-id": mine.transport.sessionId ?? "",
          "content-type": "application/json",
          accept: "application/json, text/event-stream",
        },
        body: JSON.stringify({ jsonrpc: "2.0", id: 7, method: "tools/list", params: {} }),
      }),
    );
    expect(await expectRefused(res, 404)).toMatch(/Session not found/);
    // The owner's session is unaffected.
    expect((await mine.client.listTools()).tools).toEqual([]);
  });

  it("DELETE ends the session: it is gone from the server and its id answers 404", async () => {
    const t = await start();
    const token = createAgentToken(t.runtime, "bot");
    const c = await connectMcp({ token });
    const sid = c.transport.sessionId ?? "";
    expect(t.runtime.agentMcp.sessionCount("bot")).toBe(1);
    await c.close({ terminate: true });
    expect(t.runtime.agentMcp.sessionCount("bot")).toBe(0);
    const res = await routeHandler(
      new Request(MCP_URL, {
        method: "GET",
        headers: {
          host: "127.0.0.1:3000",
          authorization: `Bearer ${token}`,
          "mcp-session-id": sid,
          accept: "text/event-stream",
        },
      }),
    );
    await expectRefused(res, 404);
  });

  it("at the per-token cap the least recently active idle session is evicted; other tokens are not touched", async () => {
    const t = await start();
    const e = endpoint(t, { maxSessionsPerToken: 2 });
    const handler: McpHandler = (req) => e.handle(req);
    const token = createAgentToken(t.runtime, "bot");
    const otherToken = createAgentToken(t.runtime, "other-bot");
    const other = await connect({ token: otherToken, handler });
    const first = await connect({ token, handler });
    const second = await connect({ token, handler });
    // The first is used again, so the second is now the least recently active.
    await first.client.listTools();
    const third = await connect({ token, handler });
    expect(e.sessionCount("bot")).toBe(2);
    await expect(second.client.listTools()).rejects.toThrow(/404|Session not found/);
    await first.client.listTools();
    await third.client.listTools();
    expect(e.sessionCount("other-bot")).toBe(1);
    await other.client.listTools();
  });

  it("sessions holding a call are never evicted: when all of them hold one, a new session is refused with 429", async () => {
    const t = await start({ approvals: { waitSeconds: 30 } });
    enableTool(t.runtime, ADD_NOTE);
    const e = endpoint(t, { maxSessionsPerToken: 1 });
    const handler: McpHandler = (req) => e.handle(req);
    const token = createAgentToken(t.runtime, "bot");
    const holder = await connect({ token, handler });
    const pending = waitForEvent(t.runtime.bus, (ev) => ev.type === "call" && ev.status === "pending");
    const held = holder.client.callTool({ name: ADD_NOTE, arguments: { text: "wait for me" } });
    await pending;
    const res = await e.handle(initializeRequest({ authorization: `Bearer ${token}` }));
    expect(await expectRefused(res, 429)).toMatch(/Too many sessions/);
    expect(e.sessionCount("bot")).toBe(1);
    const reviewer = await createTestUser(t.runtime, "rita", ["reviewer"]);
    const [call] = t.runtime.broker.list({ status: "pending", limit: 1 });
    t.runtime.broker.deny(reviewer.user.name, call?.id ?? "", "not now");
    expect((await held).isError).toBe(true);
  });

  it("an idle session (no request, no open stream) is closed after the idle timeout", async () => {
    const t = await start();
    const token = createAgentToken(t.runtime, "bot");
    vi.useFakeTimers({ toFake: ["setInterval", "clearInterval", "Date"] });
    const e = endpoint(t, { idleMs: 60_000 });
    const res = await e.handle(initializeRequest({ authorization: `Bearer ${token}` }));
    expect(res.status).toBe(200);
    await res.text();
    expect(e.sessionCount("bot")).toBe(1);
    vi.advanceTimersByTime(59_000);
    expect(e.sessionCount("bot")).toBe(1);
    vi.advanceTimersByTime(31_000);
    expect(e.sessionCount("bot")).toBe(0);
  });

  it("a session whose client keeps its event stream open is not idle", async () => {
    const t = await start();
    const token = createAgentToken(t.runtime, "bot");
    vi.useFakeTimers({ toFake: ["setInterval", "clearInterval", "Date"] });
    const e = endpoint(t, { idleMs: 60_000 });
    // The SDK client opens its GET stream right after initialization.
    let streamOpened: () => void = () => undefined;
    const opened = new Promise<void>((resolve) => {
      streamOpened = resolve;
    });
    const listening = await connect({
      token,
      handler: async (req) => {
        const res = await e.handle(req);
        if (req.method === "GET" && res.status === 200) streamOpened();
        return res;
      },
    });
    await opened;
    vi.advanceTimersByTime(5 * 60_000);
    expect(e.sessionCount("bot")).toBe(1);
    await listening.client.listTools();
  });

  it("revoking a token closes its sessions at the next sweep", async () => {
    const t = await start();
    const token = createAgentToken(t.runtime, "bot");
    vi.useFakeTimers({ toFake: ["setInterval", "clearInterval", "Date"] });
    const e = endpoint(t, { idleMs: 60_000 });
    await connect({ token, handler: (req) => e.handle(req) });
    revokeToken(t.runtime.db, { name: "bot", actor: "test" });
    vi.advanceTimersByTime(30_000);
    expect(e.sessionCount("bot")).toBe(0);
  });

  it("a restart drops every session but not the pending call, which can still be decided", async () => {
    const first = await start({ approvals: { waitSeconds: 60 } });
    enableTool(first.runtime, ADD_NOTE);
    const token = createAgentToken(first.runtime, "bot");
    const c = await connectMcp({ token });
    const sid = c.transport.sessionId ?? "";
    const pending = waitForEvent(first.runtime.bus, (ev) => ev.type === "call" && ev.status === "pending");
    const held = c.client.callTool({ name: ADD_NOTE, arguments: { text: "survive" } });
    const event = await pending;
    const id = event?.type === "call" ? event.id : "";
    await first.stop({ keepDir: true });
    rt = undefined;
    await c.client.close();
    await expect(held).rejects.toThrow(/closed/i);

    const second = await start({ dir: first.dir });
    expect(callStatus(second.runtime, id)).toBe("pending");
    expect(second.runtime.agentMcp.sessionCount()).toBe(0);
    const res = await routeHandler(
      new Request(MCP_URL, {
        method: "GET",
        headers: {
          host: "127.0.0.1:3000",
          authorization: `Bearer ${token}`,
          "mcp-session-id": sid,
          accept: "text/event-stream",
        },
      }),
    );
    await expectRefused(res, 404);
    const reviewer = await createTestUser(second.runtime, "rita", ["reviewer"]);
    second.runtime.broker.deny(reviewer.user.name, id, "after the restart");
    expect(callStatus(second.runtime, id)).toBe("denied");
  });
});

describe("how a request is answered", () => {
  /**
   * A POST on an open session, as a client would send it; `message` is sent as JSON unless it
   * is already a string, and `handler` defaults to the route module.
   */
  async function post(
    token: string,
    sessionId: string,
    message: unknown,
    handler: McpHandler = routeHandler,
  ): Promise<Response> {
    return handler(
      new Request(MCP_URL, {
        method: "POST",
        headers: {
          host: "127.0.0.1:3000",
          authorization: `Bearer ${token}`,
          "mcp-session-id": sessionId,
          "mcp-protocol-version": "2025-06-18",
          "content-type": "application/json",
          accept: "application/json, text/event-stream",
        },
        body: typeof message === "string" ? message : JSON.stringify(message),
      }),
    );
  }

  it("a request without a progress token gets its response as application/json, not an event stream", async () => {
    const t = await start();
    enableTool(t.runtime, LIST_NOTES);
    const token = createAgentToken(t.runtime, "bot");
    const { transport } = await connect({ token });
    const res = await post(token, transport.sessionId ?? "", {
      jsonrpc: "2.0",
      id: 41,
      method: "tools/call",
      params: { name: LIST_NOTES, arguments: {} },
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("application/json");
    expect(res.headers.get("mcp-session-id")).toBe(transport.sessionId);
    const body = (await res.json()) as { id: number; result: { content: { text: string }[] } };
    expect(body.id).toBe(41);
    expect(body.result.content[0]?.text).toBe("The notebook is empty.");
  });

  it("a call held past the JSON window keeps its event stream, open before the decision, with the result after it", async () => {
    const t = await start({ approvals: { waitSeconds: 30 } });
    enableTool(t.runtime, ADD_NOTE);
    const e = endpoint(t, { jsonAnswerWindowMs: 20 });
    const token = createAgentToken(t.runtime, "bot");
    const handler: McpHandler = (req) => e.handle(req);
    const { transport } = await connect({ token, handler });
    const pending = waitForEvent(t.runtime.bus, (ev) => ev.type === "call" && ev.status === "pending");
    const res = await post(
      token,
      transport.sessionId ?? "",
      {
        jsonrpc: "2.0",
        id: 43,
        method: "tools/call",
        params: { name: ADD_NOTE, arguments: { text: "held" } },
      },
      handler,
    );
    // The answer's headers are out while the call still waits for a reviewer.
    expect(res.headers.get("content-type")).toBe("text/event-stream");
    await pending;
    const reviewer = await createTestUser(t.runtime, "rita", ["reviewer"]);
    const [call] = t.runtime.broker.list({ status: "pending", limit: 1 });
    t.runtime.broker.approve(reviewer.user.name, call?.id ?? "");
    expect(await res.text()).toMatch(/^data: \{"result":.*"id":43\}$/m);
  });

  it("a request with a progress token keeps its event stream, so progress can reach the client", async () => {
    const t = await start();
    enableTool(t.runtime, LIST_NOTES);
    const token = createAgentToken(t.runtime, "bot");
    const { transport } = await connect({ token });
    const res = await post(token, transport.sessionId ?? "", {
      jsonrpc: "2.0",
      id: 42,
      method: "tools/call",
      params: { name: LIST_NOTES, arguments: {}, _meta: { progressToken: "p-1" } },
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("text/event-stream");
    expect(await res.text()).toMatch(/^data: \{"result":.*"id":42\}$/m);
  });

  it("a batch keeps its event stream", async () => {
    const t = await start();
    const token = createAgentToken(t.runtime, "bot");
    const { transport } = await connect({ token });
    const res = await post(token, transport.sessionId ?? "", [
      { jsonrpc: "2.0", id: 1, method: "tools/list", params: {} },
      { jsonrpc: "2.0", id: 2, method: "ping" },
    ]);
    expect(res.headers.get("content-type")).toBe("text/event-stream");
    const text = await res.text();
    expect(text).toMatch(/"id":1/);
    expect(text).toMatch(/"id":2/);
  });

  it("a body that is not JSON is refused with a JSON-RPC parse error and leaves the session usable", async () => {
    const t = await start();
    const token = createAgentToken(t.runtime, "bot");
    const c = await connect({ token });
    const res = await post(token, c.transport.sessionId ?? "", "{not json");
    expect(await expectRefused(res, 400)).toMatch(/Parse error/);
    expect((await c.client.listTools()).tools).toEqual([]);
  });
});
