/**
 * The rows of 2025 sessions (`mcp_sessions`) and who may bring a session back from one: two
 * endpoints on one store stand for two replicas (or one Gatehouse before and after a restart),
 * each with the SDK client or raw requests.
 */
import { LATEST_PROTOCOL_VERSION } from "@modelcontextprotocol/sdk/types.js";
import { Server } from "@modelcontextprotocol/server";
import { eq } from "drizzle-orm";
import { describe, expect, it, vi } from "vitest";
import { revokeToken } from "@/server/auth/tokens";
import { initializeRequest, MCP_URL } from "@/test/support/mcp";
import { createAgentToken, enableTool, LIST_NOTES, type TestRuntime } from "@/test/support/runtime";
import { first } from "../store/db";
import { mcpSessions } from "../store/schema";
import type { AgentMcpEndpoint } from "./endpoint";
import { endpointFixtures, expectRefused } from "./endpoint-fixtures";
import { SessionTransport } from "./sessions";
import { restoreInitialized } from "./stored-sessions";

const { start, endpoint, connect } = endpointFixtures();

let ids = 100;

/** A 2025 request on session `sid` with `token` (each with its own JSON-RPC id). */
function inSession(token: string, sid: string, method: string, params: object = {}): Request {
  return new Request(MCP_URL, {
    method: "POST",
    headers: {
      host: "127.0.0.1:3000",
      authorization: `Bearer ${token}`,
      "mcp-session-id": sid,
      "mcp-protocol-version": LATEST_PROTOCOL_VERSION,
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
    },
    body: JSON.stringify({ jsonrpc: "2.0", id: ids++, method, params }),
  });
}

/** The JSON-RPC answer in a response (JSON, or the first `data:` of an event stream). */
async function answerOf(res: Response): Promise<{ result?: Record<string, unknown>; error?: unknown }> {
  const text = await res.text();
  const data = text.startsWith("{") ? text : (/^data: (.+)$/m.exec(text)?.[1] ?? "null");
  return JSON.parse(data);
}

async function rowOf(t: TestRuntime, sid: string) {
  return first(t.runtime.db.select().from(mcpSessions).where(eq(mcpSessions.id, sid)));
}

/** A runtime with `list_notes` enabled, the token "bot", and two endpoints on its store. */
async function twoReplicas(idleMs = 60 * 60_000): Promise<{
  t: TestRuntime;
  token: string;
  a: AgentMcpEndpoint;
  b: AgentMcpEndpoint;
}> {
  const t = await start();
  await enableTool(t.runtime, LIST_NOTES);
  const token = await createAgentToken(t.runtime, "bot");
  return { t, token, a: endpoint(t, { idleMs }), b: endpoint(t, { idleMs }) };
}

/** Opens a session on `e` with the SDK client; resolves with its id. */
async function openOn(e: AgentMcpEndpoint, token: string): Promise<string> {
  const c = await connect({ token, handler: (req) => e.handle(req) });
  return c.transport.sessionId ?? "";
}

/** Asserts that session `sid` has its row (what each refusal below must not rest on the lack of). */
async function expectStored(t: TestRuntime, sid: string): Promise<void> {
  expect((await rowOf(t, sid))?.id).toBe(sid);
}

describe("2025 sessions in the store", () => {
  it("an accepted initialize writes the session's row: its token, the negotiated revision and the client's params", async () => {
    const { t, token, a } = await twoReplicas();
    const sid = await openOn(a, token);
    const row = await rowOf(t, sid);
    expect(row?.protocolVersion).toBe(LATEST_PROTOCOL_VERSION);
    expect(JSON.parse(row?.client ?? "{}")).toEqual({
      capabilities: {},
      clientInfo: { name: "test-agent", version: "1.0.0" },
    });
    const tokenRow = await first(
      t.runtime.db
        .select()
        .from(mcpSessions)
        .where(eq(mcpSessions.tokenId, row?.tokenId ?? -1)),
    );
    expect(tokenRow?.id).toBe(sid);
  });

  it("a session opened on one endpoint is served by another on the same store, two requests at once too", async () => {
    const { token, a, b } = await twoReplicas();
    const sid = await openOn(a, token);
    // Two requests at once on the replica that does not hold it yet: one session is brought back.
    const [one, two] = await Promise.all([
      b.handle(inSession(token, sid, "tools/list")),
      b.handle(inSession(token, sid, "tools/list")),
    ]);
    expect(one.status).toBe(200);
    expect(two.status).toBe(200);
    expect(one.headers.get("mcp-session-id")).toBe(sid);
    expect((await answerOf(one)).result?.tools).toHaveLength(1);
    expect((await answerOf(two)).result?.tools).toHaveLength(1);
    expect(b.sessionCount("bot")).toBe(1);
  });

  it("a token keeps a bounded number of stored sessions: opening one more deletes the least recently used row", async () => {
    const t = await start();
    const token = await createAgentToken(t.runtime, "bot");
    const e = endpoint(t, { maxStoredSessionsPerToken: 2 });
    const first = await openOn(e, token);
    const second = await openOn(e, token);
    await expectStored(t, first);
    // The first is used again later than the second: the second is the least recently used.
    await t.runtime.db
      .update(mcpSessions)
      .set({ lastActiveAt: new Date(Date.now() + 1000).toISOString() })
      .where(eq(mcpSessions.id, first));
    const third = await openOn(e, token);
    expect(await rowOf(t, second)).toBeUndefined();
    await expectStored(t, first);
    await expectStored(t, third);
    const other = await openOn(e, await createAgentToken(t.runtime, "other-bot"));
    await expectStored(t, other);
    await expectStored(t, first);
  });

  it("another token presenting a stored session's id gets 404, as for an unknown id", async () => {
    const { t, token, a, b } = await twoReplicas();
    const sid = await openOn(a, token);
    const other = await createAgentToken(t.runtime, "other-bot");
    expect(await expectRefused(await b.handle(inSession(other, sid, "tools/list")), 404)).toBe(
      "Session not found",
    );
    expect(await expectRefused(await b.handle(inSession(other, "no-such-id", "tools/list")), 404)).toBe(
      "Session not found",
    );
    expect(b.sessionCount()).toBe(0);
    // Still the owner's.
    expect((await b.handle(inSession(token, sid, "tools/list"))).status).toBe(200);
  });

  it("a revoked token's session is refused everywhere and its row goes", async () => {
    const { t, token, a, b } = await twoReplicas();
    const sid = await openOn(a, token);
    await expectStored(t, sid);
    await revokeToken(t.runtime.db, { name: "bot", actor: "test" });
    await expectRefused(await b.handle(inSession(token, sid, "tools/list")), 401);
    expect(b.sessionCount()).toBe(0);
    await b.endRevokedSessions();
    expect(await rowOf(t, sid)).toBeUndefined();
  });

  it("a row idle past the idle timeout answers 404 and is deleted", async () => {
    const { t, token, a, b } = await twoReplicas(60_000);
    const sid = await openOn(a, token);
    await expectStored(t, sid);
    const long = new Date(Date.now() - 61_000).toISOString();
    await t.runtime.db.update(mcpSessions).set({ lastActiveAt: long }).where(eq(mcpSessions.id, sid));
    await expectRefused(await b.handle(inSession(token, sid, "tools/list")), 404);
    expect(await rowOf(t, sid)).toBeUndefined();
  });

  it("the sweep deletes rows idle past the timeout, whoever opened them", async () => {
    const { t, token, a, b } = await twoReplicas(60_000);
    const sid = await openOn(a, token);
    await expectStored(t, sid);
    const long = new Date(Date.now() - 61_000).toISOString();
    await t.runtime.db.update(mcpSessions).set({ lastActiveAt: long }).where(eq(mcpSessions.id, sid));
    await b.endRevokedSessions();
    expect(await rowOf(t, sid)).toBeUndefined();
  });

  it("a session in use on one replica (its client listening) keeps its row past the idle timeout", async () => {
    const { t, token, a, b } = await twoReplicas(60_000);
    vi.useFakeTimers({ toFake: ["Date"] });
    let streamOpened: () => void = () => undefined;
    const opened = new Promise<void>((resolve) => {
      streamOpened = resolve;
    });
    const c = await connect({
      token,
      handler: async (req) => {
        const res = await a.handle(req);
        if (req.method === "GET" && res.status === 200) streamOpened();
        return res;
      },
    });
    await opened;
    const sid = c.transport.sessionId ?? "";
    vi.advanceTimersByTime(50_000);
    await a.endRevokedSessions();
    vi.advanceTimersByTime(50_000);
    // A replica that does not hold it sweeps: the row was kept fresh by the one that does.
    await b.endRevokedSessions();
    await expectStored(t, sid);
    expect((await b.handle(inSession(token, sid, "tools/list"))).status).toBe(200);
  });

  it("DELETE removes the row: no endpoint serves the session again", async () => {
    const { t, token, a, b } = await twoReplicas();
    const c = await connect({ token, handler: (req) => a.handle(req) });
    const sid = c.transport.sessionId ?? "";
    await expectStored(t, sid);
    await c.transport.terminateSession();
    expect(await rowOf(t, sid)).toBeUndefined();
    await expectRefused(await b.handle(inSession(token, sid, "tools/list")), 404);
  });

  it("shutdown keeps the rows: a session outlives the endpoint that opened it", async () => {
    const { t, token, a, b } = await twoReplicas();
    const sid = await openOn(a, token);
    await a.close();
    expect(await rowOf(t, sid)).toBeDefined();
    expect((await b.handle(inSession(token, sid, "tools/list"))).status).toBe(200);
  });

  it("last use is written to the row at most once a minute, not on every request", async () => {
    const { t, token, a } = await twoReplicas();
    vi.useFakeTimers({ toFake: ["Date"] });
    const sid = await openOn(a, token);
    const opened = (await rowOf(t, sid))?.lastActiveAt;
    vi.advanceTimersByTime(30_000);
    await (await a.handle(inSession(token, sid, "tools/list"))).text();
    expect((await rowOf(t, sid))?.lastActiveAt).toBe(opened);
    vi.advanceTimersByTime(31_000);
    await (await a.handle(inSession(token, sid, "tools/list"))).text();
    await vi.waitFor(async () => expect((await rowOf(t, sid))?.lastActiveAt).not.toBe(opened));
  });
});

describe("restoreInitialized", () => {
  // Relies on how the SDK's transport and Server take an initialize: this fails if an upgrade changes it.
  it("leaves a new Server and transport as an initialize left them: id, revision, client's capabilities and name", async () => {
    const server = new Server({ name: "s", version: "1" }, { capabilities: { tools: {} } });
    server.setRequestHandler("tools/list", () => ({ tools: [] }));
    const transport = new SessionTransport({ sessionIdGenerator: () => "sid-1" });
    await server.connect(transport);
    const client = {
      capabilities: { roots: { listChanged: true } },
      clientInfo: { name: "old", version: "2" },
    };
    await restoreInitialized(
      server,
      transport,
      { id: "sid-1", protocolVersion: "2025-03-26", client },
      MCP_URL,
    );
    expect(transport.sessionId).toBe("sid-1");
    expect(server.getNegotiatedProtocolVersion()).toBe("2025-03-26");
    expect(server.getClientCapabilities()).toEqual(client.capabilities);
    expect(server.getClientVersion()).toEqual(client.clientInfo);
    const req = inSession("unused", "sid-1", "tools/list");
    req.headers.set("mcp-protocol-version", "2025-03-26");
    expect((await answerOf(await transport.handleRequest(req))).result).toEqual({ tools: [] });
    // A second initialize on the restored session is refused, as on the one that opened it.
    expect((await transport.handleRequest(initializeRequest({ "mcp-session-id": "sid-1" }))).status).toBe(
      400,
    );
    await server.close();
  });
});
