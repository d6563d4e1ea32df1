/**
 * `/mcp`'s per-token session cap: who makes room (sessions nobody is using, least recently used
 * first), when a new session is refused instead (every one busy), and that the cap holds under
 * concurrent `initialize` requests — with the SDK's own client against the real endpoint.
 */
import { ToolListChangedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import { describe, expect, it } from "vitest";
import { connectMcp, initializeRequest, type McpHandler, routeHandler } from "@/test/support/mcp";
import {
  ADD_NOTE,
  createAgentToken,
  createTestUser,
  enableTool,
  LIST_NOTES,
  waitForEvent,
} from "@/test/support/runtime";
import { MAX_SESSIONS_PER_TOKEN } from "./endpoint";
import { endpointFixtures, expectRefused } from "./endpoint-fixtures";

const { start, endpoint, connect } = endpointFixtures();

/** A client that only POSTs: the server's GET stream is declined (405), as the spec allows. */
function postOnly(handler: McpHandler): McpHandler {
  return (req) =>
    req.method === "GET" ? Promise.resolve(new Response(null, { status: 405 })) : handler(req);
}

/** An SDK client listening on its GET stream: resolves once the endpoint has opened that stream. */
async function listening(token: string, handler: McpHandler = routeHandler) {
  let streamOpened: () => void = () => undefined;
  const opened = new Promise<void>((resolve) => {
    streamOpened = resolve;
  });
  const c = await connect({
    token,
    handler: async (req) => {
      const res = await handler(req);
      if (req.method === "GET" && res.status === 200) streamOpened();
      return res;
    },
  });
  await opened;
  return c;
}

/** Resolves on the next `notifications/tools/list_changed` the client receives. */
function nextListChanged(client: Awaited<ReturnType<typeof connectMcp>>["client"]): Promise<void> {
  return new Promise<void>((resolve) => {
    client.setNotificationHandler(ToolListChangedNotificationSchema, () => resolve());
  });
}

/** A client that initializes, asks one thing and goes away without DELETE, as common clients do. */
async function comeAndGo(token: string, handler: McpHandler = routeHandler): Promise<void> {
  const c = await connectMcp({ token, handler });
  await c.client.listTools();
  await c.client.close();
}

describe("the per-token session cap", () => {
  it("at the cap the least recently used session nobody is using leaves memory, and comes back from the store when used, evicting the next; other tokens are not touched", async () => {
    const t = await start();
    const e = endpoint(t, { maxSessionsPerToken: 2 });
    const handler = postOnly((req) => e.handle(req));
    const token = await createAgentToken(t.runtime, "bot");
    const other = await connect({ token: await createAgentToken(t.runtime, "other-bot"), handler });
    const first = await connect({ token, handler });
    const second = await connect({ token, handler });
    // The first is used again, so the second is now the least recently used.
    await first.client.listTools();
    const third = await connect({ token, handler });
    expect(e.sessionCount("bot")).toBe(2);
    // The second's row stays: its client goes on with the same session, and the first (now the
    // least recently used) makes room for it.
    expect((await second.client.listTools()).tools).toEqual([]);
    expect(second.transport.sessionId).toBeDefined();
    expect(e.sessionCount("bot")).toBe(2);
    await first.client.listTools();
    await third.client.listTools();
    expect(e.sessionCount("bot")).toBe(2);
    expect(e.sessionCount("other-bot")).toBe(1);
    await other.client.listTools();
  });

  it("a listening client and one waiting for approval keep their sessions while 20 short-lived clients come and go without DELETE", async () => {
    const t = await start({ approvals: { waitSeconds: 30 } });
    await enableTool(t.runtime, ADD_NOTE);
    const token = await createAgentToken(t.runtime, "bot");
    const listener = await listening(token);
    const holder = await listening(token);
    const pending = waitForEvent(t.runtime.bus, (ev) => ev.type === "call" && ev.status === "pending");
    const held = holder.client.callTool({ name: ADD_NOTE, arguments: { text: "wait for me" } });
    await pending;

    for (let i = 0; i < 20; i++) await comeAndGo(token);
    expect(t.runtime.agentMcp.sessionCount("bot")).toBe(MAX_SESSIONS_PER_TOKEN);

    // The listener's session answers, and its stream still carries list_changed.
    expect((await listener.client.listTools()).tools.map((x) => x.name)).toEqual([ADD_NOTE]);
    const changed = nextListChanged(listener.client);
    await enableTool(t.runtime, LIST_NOTES);
    t.runtime.bus.publish({ type: "catalogue", server: "demo" });
    await changed;
    // The held call gets its answer on the session that asked.
    const reviewer = await createTestUser(t.runtime, "rita", ["reviewer"]);
    const [call] = await t.runtime.broker.list({ status: "pending", limit: 1 });
    await t.runtime.broker.deny(reviewer.user.name, call?.id ?? "", "not now");
    expect((await held).isError).toBe(true);
    await holder.client.listTools();
  });

  it("when every session of a token is busy, a new initialize is refused with 429 and no live session is cut; once one goes away its place is taken", async () => {
    const t = await start();
    const e = endpoint(t, { maxSessionsPerToken: 2, listChangedDebounceMs: 10 });
    const handler: McpHandler = (req) => e.handle(req);
    const token = await createAgentToken(t.runtime, "bot");
    const first = await listening(token, handler);
    const second = await listening(token, handler);

    const refused = await e.handle(initializeRequest({ authorization: `Bearer ${token}` }));
    expect(await expectRefused(refused, 429)).toMatch(/too many open sessions/);
    expect(e.sessionCount("bot")).toBe(2);
    await first.client.listTools();
    const changed = nextListChanged(second.client);
    await enableTool(t.runtime, LIST_NOTES);
    t.runtime.bus.publish({ type: "catalogue", server: "demo" });
    await changed;

    // The first goes away without DELETE: its stream ends, and its session is the one to go.
    await first.client.close();
    const third = await connect({ token, handler });
    expect(e.sessionCount("bot")).toBe(2);
    await second.client.listTools();
    await third.client.listTools();
  });

  it("sessions holding a call are never evicted: when all of them hold one, a new session is refused with 429", async () => {
    const t = await start({ approvals: { waitSeconds: 30 } });
    await enableTool(t.runtime, ADD_NOTE);
    const e = endpoint(t, { maxSessionsPerToken: 1 });
    const handler = postOnly((req) => e.handle(req));
    const token = await createAgentToken(t.runtime, "bot");
    const holder = await connect({ token, handler });
    const pending = waitForEvent(t.runtime.bus, (ev) => ev.type === "call" && ev.status === "pending");
    const held = holder.client.callTool({ name: ADD_NOTE, arguments: { text: "wait for me" } });
    await pending;
    const res = await e.handle(initializeRequest({ authorization: `Bearer ${token}` }));
    expect(await expectRefused(res, 429)).toMatch(/Too many sessions/);
    expect(e.sessionCount("bot")).toBe(1);
    const reviewer = await createTestUser(t.runtime, "rita", ["reviewer"]);
    const [call] = await t.runtime.broker.list({ status: "pending", limit: 1 });
    await t.runtime.broker.deny(reviewer.user.name, call?.id ?? "", "not now");
    expect((await held).isError).toBe(true);
  });

  it("40 concurrent initializes never leave more than the cap open, and each refused one says why", async () => {
    const t = await start();
    const cap = 4;
    const e = endpoint(t, { maxSessionsPerToken: cap });
    const auth = { authorization: `Bearer ${await createAgentToken(t.runtime, "bot")}` };
    // The token starts at its cap with sessions nobody uses: each may make room for one newcomer.
    for (let i = 0; i < cap; i++) {
      const res = await e.handle(initializeRequest(auth));
      expect(res.status).toBe(200);
      await res.text();
    }

    const answers = await Promise.all(Array.from({ length: 40 }, () => e.handle(initializeRequest(auth))));
    expect(e.sessionCount("bot")).toBe(cap);
    const accepted = answers.filter((r) => r.status === 200);
    expect(accepted).toHaveLength(cap);
    expect(new Set(accepted.map((r) => r.headers.get("mcp-session-id"))).size).toBe(cap);
    for (const r of answers.filter((r) => r.status !== 200)) {
      expect(await expectRefused(r, 429)).toMatch(/too many open sessions/);
    }
    for (const r of accepted) await r.text();
    expect(e.sessionCount("bot")).toBe(cap);
  });
});
