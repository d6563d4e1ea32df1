/**
 * How `/mcp` answers a session's POST: JSON when one response is ready within the window, an
 * event stream for progress, held calls and batches, and a parse error for a body not JSON.
 */
import { describe, expect, it } from "vitest";
import { MCP_URL, type McpHandler, routeHandler } from "@/test/support/mcp";
import {
  ADD_NOTE,
  createAgentToken,
  createTestUser,
  enableTool,
  LIST_NOTES,
  waitForEvent,
} from "@/test/support/runtime";
import { MAX_REQUEST_BODY_BYTES } from "../request";
import { endpointFixtures, expectRefused } from "./endpoint-fixtures";

const { start, endpoint, connect } = endpointFixtures();

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
    await enableTool(t.runtime, LIST_NOTES);
    const token = await createAgentToken(t.runtime, "bot");
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
    await enableTool(t.runtime, ADD_NOTE);
    const e = endpoint(t, { jsonAnswerWindowMs: 20 });
    const token = await createAgentToken(t.runtime, "bot");
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
    const [call] = await t.runtime.broker.list({ status: "pending", limit: 1 });
    await t.runtime.broker.approve(reviewer.user.name, call?.id ?? "");
    expect(await res.text()).toMatch(/^data: \{"result":.*"id":43\}$/m);
  });

  it("a request with a progress token keeps its event stream, so progress can reach the client", async () => {
    const t = await start();
    await enableTool(t.runtime, LIST_NOTES);
    const token = await createAgentToken(t.runtime, "bot");
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
    const token = await createAgentToken(t.runtime, "bot");
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
    const token = await createAgentToken(t.runtime, "bot");
    const c = await connect({ token });
    const res = await post(token, c.transport.sessionId ?? "", "{not json");
    expect(await expectRefused(res, 400)).toMatch(/Parse error/);
    expect((await c.client.listTools()).tools).toEqual([]);
  });

  it("a body over 4 MiB is refused with a JSON-RPC 413 and leaves the session usable", async () => {
    const t = await start();
    const token = await createAgentToken(t.runtime, "bot");
    const c = await connect({ token });
    const message = JSON.stringify({ jsonrpc: "2.0", id: 44, method: "ping", params: {} });
    const padded = `${message}${" ".repeat(MAX_REQUEST_BODY_BYTES + 1 - message.length)}`;
    const res = await post(token, c.transport.sessionId ?? "", padded);
    expect(await expectRefused(res, 413)).toMatch(/Payload Too Large/);
    // Exactly the limit is read and answered.
    const atLimit = await post(token, c.transport.sessionId ?? "", padded.slice(0, -1));
    expect(atLimit.status).toBe(200);
    expect(await atLimit.text()).toMatch(/"id":44/);
    expect((await c.client.listTools()).tools).toEqual([]);
  });
});
