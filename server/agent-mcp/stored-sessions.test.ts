/**
 * 2025 sessions kept in the store (`mcp_sessions`): the SDK v1 client (@modelcontextprotocol/sdk,
 * as mcp-remote, LangChain's MCP adapters and the AI SDK use it) never opens a new session once
 * its own is refused, so its session must outlive a restart of Gatehouse and be served by any
 * replica on the same store.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { afterEach, describe, expect, it } from "vitest";
import { gatehouseListener } from "@/server/http/front-door";
import { fetchVia, MCP_URL } from "@/test/support/mcp";
import {
  ADD_NOTE,
  createAgentToken,
  createTestUser,
  enableTool,
  LIST_NOTES,
  request,
  startTestRuntime,
  type TestRuntime,
  waitForEvent,
} from "@/test/support/runtime";
import { testDialect } from "@/test/support/store";
import { CALL_META_KEY } from "./tools";

const live: TestRuntime[] = [];
const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
  for (const r of live.splice(0)) await r.stop();
});

async function start(opts: Parameters<typeof startTestRuntime>[0]): Promise<TestRuntime> {
  const rt = await startTestRuntime(opts);
  live.push(rt);
  return rt;
}

/** Stops `rt` keeping its store (directory and database) for the next runtime, which removes it. */
async function stopKeeping(rt: TestRuntime): Promise<void> {
  live.splice(live.indexOf(rt), 1);
  await rt.stop({ keepDir: true });
}

/** What a client sent: each POST's JSON-RPC methods, and the Mcp-Session-Id of each request. */
interface Sent {
  methods: string[];
  sessionIds: (string | null)[];
}

/** `fetch` that notes what it sends, then sends it with `send`. */
function recording(send: typeof fetch): { fetch: typeof fetch; sent: Sent } {
  const sent: Sent = { methods: [], sessionIds: [] };
  const recorder: typeof fetch = async (input, init) => {
    const headers = new Headers(init?.headers);
    sent.sessionIds.push(headers.get("mcp-session-id"));
    if (init?.method === "POST" && typeof init.body === "string") {
      const body = JSON.parse(init.body) as { method?: string } | { method?: string }[];
      for (const m of Array.isArray(body) ? body : [body]) if (m.method) sent.methods.push(m.method);
    }
    return send(input, init);
  };
  return { fetch: recorder, sent };
}

/** An SDK v1 client on `url` with the agent's token, closed after the test. */
async function v1Client(url: string, token: string, send: typeof fetch) {
  const rec = recording(send);
  const client = new Client({ name: "sdk-v1-agent", version: "1.0.0" }, { capabilities: {} });
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    fetch: rec.fetch,
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
  await client.connect(transport);
  cleanups.push(() => client.close());
  return { client, transport, sent: rec.sent };
}

/**
 * A real HTTP server on a free port answering `/mcp` as server/main.ts does (the front door),
 * with whichever runtime is running at the time; closed after the test.
 */
async function listen(): Promise<{ port: number; serve(rt: TestRuntime | undefined): void }> {
  let current: TestRuntime | undefined;
  const server = http.createServer((req, res) => {
    if (!current) {
      // Between two runtimes: what a load balancer answers while no replica is up.
      res.statusCode = 502;
      res.end();
      return;
    }
    const host = `127.0.0.1:${port}`;
    const notFound = (_: unknown, r: http.ServerResponse) => {
      r.statusCode = 404;
      r.end();
    };
    // Gatehouse's own Host allow-list (the process's PORT) plus this port, from the config.
    gatehouseListener(current.runtime, notFound, host)(req, res);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  cleanups.unshift(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  );
  return {
    port,
    serve(rt) {
      current = rt;
    },
  };
}

function textOf(result: CallToolResult): string {
  return result.content.map((c) => (c.type === "text" ? c.text : "")).join("\n");
}

describe("a 2025 session kept in the store", () => {
  it("an SDK v1 client keeps its session when Gatehouse restarts", async () => {
    const door = await listen();
    const opts = {
      approvals: { waitSeconds: 30 },
      config: { agentEndpoint: { allowedHosts: [`127.0.0.1:${door.port}`], allowedOrigins: [] } },
    };
    const first = await start(opts);
    door.serve(first);
    await enableTool(first.runtime, LIST_NOTES);
    await enableTool(first.runtime, ADD_NOTE);
    const token = await createAgentToken(first.runtime, "bot");
    const c = await v1Client(`http://127.0.0.1:${door.port}/mcp`, token, fetch);
    const sid = c.transport.sessionId;
    expect(sid).toBeTruthy();
    expect((await c.client.listTools()).tools.map((t) => t.name)).toEqual([ADD_NOTE, LIST_NOTES]);

    door.serve(undefined);
    await stopKeeping(first);
    const second = await start({ ...opts, dir: first.dir, databaseUrl: first.databaseUrl });
    door.serve(second);
    expect(second.runtime.agentMcp.sessionCount()).toBe(0);

    // The same client object, never reconnecting: a call, then a held call decided at the new Gatehouse.
    const listed = (await c.client.callTool({ name: LIST_NOTES, arguments: {} })) as CallToolResult;
    expect(listed.isError).toBeFalsy();
    expect(textOf(listed)).toBe("The notebook is empty.");
    const rita = await createTestUser(second.runtime, "rita", ["reviewer"]);
    const pending = waitForEvent(second.runtime.bus, (e) => e.type === "call" && e.status === "pending");
    const held = c.client.callTool({ name: ADD_NOTE, arguments: { text: "after the restart" } });
    const event = await pending;
    const id = event?.type === "call" ? event.id : "";
    expect((await request("POST", `/api/calls/${id}/approve`, { cookie: rita.cookie })).status).toBe(200);
    const added = (await held) as CallToolResult;
    expect(textOf(added)).toBe("Added note 1: after the restart");
    expect(added._meta?.[CALL_META_KEY]).toEqual({ id, status: "succeeded" });

    expect(c.transport.sessionId).toBe(sid);
    expect(c.sent.methods.filter((m) => m === "initialize")).toHaveLength(1);
    expect(c.sent.sessionIds.slice(1).every((s) => s === sid)).toBe(true);
    expect(second.runtime.agentMcp.sessionCount("bot")).toBe(1);
  });

  // Two runtimes at once on one store: only PostgreSQL allows it (SQLite's store file is held by
  // one process at a time, so there the restart above is the same case).
  it.runIf(testDialect === "postgres")(
    "a session opened on one runtime is served by another on the same store",
    async () => {
      const a = await start({});
      const b = await start({ databaseUrl: a.databaseUrl });
      await enableTool(a.runtime, LIST_NOTES);
      const token = await createAgentToken(a.runtime, "bot");
      // A load balancer that sends each request to the replica chosen by the test.
      let target = a;
      const c = await v1Client(
        MCP_URL,
        token,
        fetchVia((req) => target.runtime.agentMcp.handle(req)),
      );
      const sid = c.transport.sessionId;
      expect((await c.client.listTools()).tools.map((t) => t.name)).toEqual([LIST_NOTES]);

      target = b;
      const listed = (await c.client.callTool({ name: LIST_NOTES, arguments: {} })) as CallToolResult;
      expect(textOf(listed)).toBe("The notebook is empty.");
      expect(b.runtime.agentMcp.sessionCount("bot")).toBe(1);
      target = a;
      expect((await c.client.listTools()).tools.map((t) => t.name)).toEqual([LIST_NOTES]);

      expect(c.transport.sessionId).toBe(sid);
      expect(c.sent.methods.filter((m) => m === "initialize")).toHaveLength(1);
      expect(c.sent.sessionIds.slice(1).every((s) => s === sid)).toBe(true);
    },
  );
});
