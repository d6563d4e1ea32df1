/**
 * `/mcp` sessions: who owns them, idleness, revocation, DELETE and restarts, through the real
 * route module and the SDK's own client (the per-token cap is in endpoint-cap.test.ts).
 */
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { describe, expect, it, vi } from "vitest";
import { revokeToken } from "@/server/auth/tokens";
import { connectMcp, initializeRequest, MCP_URL, routeHandler } from "@/test/support/mcp";
import {
  ADD_NOTE,
  callStatus,
  createAgentToken,
  createTestUser,
  enableTool,
  waitForEvent,
} from "@/test/support/runtime";
import { endpointFixtures, expectRefused } from "./endpoint-fixtures";
import { CALL_META_KEY } from "./tools";

const { start, forget, endpoint, connect } = endpointFixtures();

/**
 * Moves the faked clock on by `ms` (the endpoint's sweep runs on its interval), then lets a sweep
 * that ran read the tokens from the store: it closes sessions once that read is answered.
 */
async function sweepAfter(ms: number): Promise<void> {
  await vi.advanceTimersByTimeAsync(ms);
  await new Promise((resolve) => setImmediate(resolve));
}

describe("sessions", () => {
  it("a request without Mcp-Session-Id that is not initialize is refused with 400", async () => {
    const t = await start();
    const token = await createAgentToken(t.runtime, "bot");
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
    const mine = await connect({ token: await createAgentToken(t.runtime, "bot") });
    const other = await createAgentToken(t.runtime, "other-bot");
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
    const token = await createAgentToken(t.runtime, "bot");
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

  it("an idle session (no request, no open stream) is closed after the idle timeout", async () => {
    const t = await start();
    const token = await createAgentToken(t.runtime, "bot");
    vi.useFakeTimers({ toFake: ["setInterval", "clearInterval", "Date"] });
    const e = endpoint(t, { idleMs: 60_000 });
    const res = await e.handle(initializeRequest({ authorization: `Bearer ${token}` }));
    expect(res.status).toBe(200);
    await res.text();
    expect(e.sessionCount("bot")).toBe(1);
    await sweepAfter(59_000);
    expect(e.sessionCount("bot")).toBe(1);
    await sweepAfter(31_000);
    await vi.waitFor(() => expect(e.sessionCount("bot")).toBe(0));
  });

  it("a session whose client keeps its event stream open is not idle", async () => {
    const t = await start();
    const token = await createAgentToken(t.runtime, "bot");
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
    await sweepAfter(5 * 60_000);
    expect(e.sessionCount("bot")).toBe(1);
    await listening.client.listTools();
  });

  it("revoking a token closes its sessions at the next sweep", async () => {
    const t = await start();
    const token = await createAgentToken(t.runtime, "bot");
    vi.useFakeTimers({ toFake: ["setInterval", "clearInterval", "Date"] });
    const e = endpoint(t, { idleMs: 60_000 });
    await connect({ token, handler: (req) => e.handle(req) });
    await revokeToken(t.runtime.db, { name: "bot", actor: "test" });
    await sweepAfter(30_000);
    await vi.waitFor(() => expect(e.sessionCount("bot")).toBe(0));
  });

  it("a restart keeps the sessions (in the store) and the pending call, which can still be decided", async () => {
    const first = await start({ approvals: { waitSeconds: 60 } });
    await enableTool(first.runtime, ADD_NOTE);
    const token = await createAgentToken(first.runtime, "bot");
    const c = await connectMcp({ token });
    const sid = c.transport.sessionId ?? "";
    const pending = waitForEvent(first.runtime.bus, (ev) => ev.type === "call" && ev.status === "pending");
    const held = c.client.callTool({ name: ADD_NOTE, arguments: { text: "survive" } });
    const event = await pending;
    const id = event?.type === "call" ? event.id : "";
    await first.stop({ keepDir: true });
    forget();
    // Answered before the stream closed (see the test below); the session itself outlives the restart.
    expect((await held)._meta?.[CALL_META_KEY]).toEqual({ id, status: "pending" });
    await c.client.close();

    const second = await start({ dir: first.dir });
    expect(await callStatus(second.runtime, id)).toBe("pending");
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
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("text/event-stream");
    expect(second.runtime.agentMcp.sessionCount("bot")).toBe(1);
    await res.body?.cancel();
    const reviewer = await createTestUser(second.runtime, "rita", ["reviewer"]);
    await second.runtime.broker.deny(reviewer.user.name, id, "after the restart");
    expect(await callStatus(second.runtime, id)).toBe("denied");
  });

  it("a call held on a 2025 session when Gatehouse stops is answered before its stream closes: still pending, with its id and where to follow it", async () => {
    const first = await start({ approvals: { waitSeconds: 60 } });
    await enableTool(first.runtime, ADD_NOTE);
    const token = await createAgentToken(first.runtime, "bot");
    // The SDK v1 client (@modelcontextprotocol/sdk), as mcp-remote, LangChain and AI SDK use it.
    const c = await connect({ token });
    const pending = waitForEvent(first.runtime.bus, (ev) => ev.type === "call" && ev.status === "pending");
    const held = c.client.callTool({ name: ADD_NOTE, arguments: { text: "survive" } });
    const event = await pending;
    const id = event?.type === "call" ? event.id : "";
    await first.stop({ keepDir: true });
    forget();
    const result = (await held) as CallToolResult;
    expect(result.isError).toBe(true);
    expect(result._meta?.[CALL_META_KEY]).toEqual({ id, status: "pending" });
    const text = result.content.map((b) => (b.type === "text" ? b.text : "")).join("\n");
    expect(text).toContain(`Call ${id} is still waiting`);
    expect(text).toContain(`GET http://127.0.0.1:3000/api/calls/${id}?wait=60`);

    const second = await start({ dir: first.dir });
    expect(await callStatus(second.runtime, id)).toBe("pending");
  });

  it("the answer to a held call says how long the call was actually held, not the configured wait", async () => {
    const t = await start({ approvals: { waitSeconds: 60 } });
    await enableTool(t.runtime, ADD_NOTE);
    const c = await connect({ token: await createAgentToken(t.runtime, "bot") });
    const pending = waitForEvent(t.runtime.bus, (ev) => ev.type === "call" && ev.status === "pending");
    const asked = Date.now();
    const held = c.client.callTool({ name: ADD_NOTE, arguments: { text: "how long" } });
    await pending;
    await t.stop();
    forget();
    const result = (await held) as CallToolResult;
    const elapsed = (Date.now() - asked) / 1000;
    const text = result.content.map((b) => (b.type === "text" ? b.text : "")).join("\n");
    const said = Number(/ after (\d+) s\./.exec(text)?.[1]);
    expect(text).not.toContain("after 59 s");
    expect(said).toBeLessThanOrEqual(Math.ceil(elapsed));
  });
});
