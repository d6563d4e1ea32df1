/**
 * `/mcp` in the 2026-07-28 revision, beside the 2025 sessions: SDK v2's own client (pinned, or
 * negotiating with `auto`) against the real route module and a real runtime with the demo
 * server — connecting without a fallback round trip, tools listed and called through the
 * broker, a held call approved through the reviewer API, cancellation, list changes on a
 * `subscriptions/listen` stream, and the same front door as the 2025 leg.
 */
import type { CallToolResult } from "@modelcontextprotocol/client";
import { afterEach, describe, expect, it } from "vitest";
import { getToolRow } from "@/server/catalogue/catalogue";
import { initializeRequest, type McpHandler, routeHandler } from "@/test/support/mcp";
import {
  connectModern,
  MODERN_REVISION,
  type ModernConnected,
  modernRequest,
} from "@/test/support/mcp-modern";
import {
  ADD_NOTE,
  callStatus,
  createAgentToken,
  createTestUser,
  enableTool,
  LIST_NOTES,
  ORIGIN,
  request,
  waitForCallStatus,
  waitForEvent,
} from "@/test/support/runtime";
import { endpointFixtures } from "./endpoint-fixtures";
import { MAX_LISTEN_STREAMS_PER_TOKEN } from "./modern";
import { CALL_META_KEY } from "./tools";

const { start, connect } = endpointFixtures();

const clients: ModernConnected[] = [];
// Registered after the fixtures' hook, so it runs first: clients close before the runtime stops.
afterEach(async () => {
  for (const c of clients.splice(0)) await c.close();
});

async function connectV2(opts: Parameters<typeof connectModern>[0]): Promise<ModernConnected> {
  const c = await connectModern(opts);
  clients.push(c);
  return c;
}

function textOf(result: CallToolResult): string {
  return result.content.map((c) => (c.type === "text" ? c.text : "")).join("\n");
}

/** Resolves with the id of the next call that becomes pending. */
function nextPending(t: Awaited<ReturnType<typeof start>>): Promise<string> {
  return waitForEvent(t.runtime.bus, (e) => e.type === "call" && e.status === "pending").then((e) =>
    e?.type === "call" ? e.id : "",
  );
}

describe("connecting in 2026-07-28", () => {
  it("a client pinned to 2026-07-28 connects with server/discover alone: no initialize, no session", async () => {
    const t = await start();
    const c = await connectV2({ token: await createAgentToken(t.runtime, "bot") });
    expect(c.client.getProtocolEra()).toBe("modern");
    expect(c.client.getNegotiatedProtocolVersion()).toBe(MODERN_REVISION);
    expect(c.client.getServerVersion()?.name).toBe("gatehouse");
    expect((await c.client.listTools()).tools).toEqual([]);
    expect(c.seen).toEqual([
      { http: "POST", rpc: "server/discover" },
      { http: "POST", rpc: "tools/list" },
    ]);
    expect(t.runtime.agentMcp.sessionCount()).toBe(0);
  });

  it("a client negotiating with auto lands on 2026-07-28 too, without falling back", async () => {
    const t = await start();
    const c = await connectV2({ token: await createAgentToken(t.runtime, "bot"), mode: "auto" });
    expect(c.client.getProtocolEra()).toBe("modern");
    await c.client.listTools();
    expect(c.methods()).toEqual(["server/discover", "tools/list"]);
    expect(t.runtime.agentMcp.sessionCount()).toBe(0);
  });

  it("a 2025 client still gets a session, and both eras are offered the same tools, capabilities and instructions", async () => {
    const t = await start();
    await enableTool(t.runtime, LIST_NOTES);
    await enableTool(t.runtime, ADD_NOTE);
    const token = await createAgentToken(t.runtime, "bot");
    const old = await connect({ token });
    expect(old.transport.sessionId).toMatch(/^[0-9a-f-]{36}$/);
    expect(t.runtime.agentMcp.sessionCount("bot")).toBe(1);
    const modern = await connectV2({ token });
    expect(t.runtime.agentMcp.sessionCount("bot")).toBe(1);

    const [before, now] = [(await old.client.listTools()).tools, (await modern.client.listTools()).tools];
    expect(now.map((x) => x.name)).toEqual([ADD_NOTE, LIST_NOTES]);
    expect(now).toEqual(before);
    expect(modern.client.getServerCapabilities()).toMatchObject(old.client.getServerCapabilities() ?? {});
    expect(modern.client.getInstructions()).toBe(old.client.getInstructions());
  });
});

describe("tools/call in 2026-07-28", () => {
  it("a read-only tool of the demo server runs at once through the broker, for the token's agent", async () => {
    const t = await start();
    await enableTool(t.runtime, LIST_NOTES);
    const { client } = await connectV2({ token: await createAgentToken(t.runtime, "bot") });
    const result = (await client.callTool({ name: LIST_NOTES, arguments: {} })) as CallToolResult;
    expect(result.isError).toBeFalsy();
    expect(textOf(result)).toBe("The notebook is empty.");
    expect(result.structuredContent).toEqual({ notes: [] });
    const meta = result._meta?.[CALL_META_KEY] as { id: string; status: string };
    expect(meta.status).toBe("succeeded");
    expect((await t.runtime.broker.get(meta.id))?.requester).toEqual({ kind: "agent", name: "bot" });
  });

  it("a destructive call is held on an event stream opened before anyone decides, and answers once a reviewer approves", async () => {
    const t = await start({ approvals: { waitSeconds: 30 } });
    await enableTool(t.runtime, ADD_NOTE);
    const rita = await createTestUser(t.runtime, "rita", ["reviewer"]);
    // The route's answer to the tools/call is out (its headers sent) while the call waits.
    let answered: (contentType: string | null) => void = () => undefined;
    const headersOut = new Promise<string | null>((resolve) => {
      answered = resolve;
    });
    const handler: McpHandler = async (req) => {
      const isCall = req.method === "POST" && (await req.clone().text()).includes('"tools/call"');
      const res = await routeHandler(req);
      if (isCall) answered(res.headers.get("content-type"));
      return res;
    };
    const { client } = await connectV2({ token: await createAgentToken(t.runtime, "bot"), handler });
    const pending = nextPending(t);
    const held = client.callTool({ name: ADD_NOTE, arguments: { text: "ship it" } });
    const id = await pending;
    expect(await headersOut).toMatch(/^text\/event-stream/);
    expect(await callStatus(t.runtime, id)).toBe("pending");
    expect(t.demoRuns()).toBe(0);

    const approved = await request("POST", `/api/calls/${id}/approve`, { cookie: rita.cookie });
    expect(approved.status).toBe(200);
    const result = (await held) as CallToolResult;
    expect(result.isError).toBeFalsy();
    expect(textOf(result)).toBe("Added note 1: ship it");
    expect(result._meta?.[CALL_META_KEY]).toEqual({ id, status: "succeeded" });
    expect(t.demoRuns()).toBe(1);
    expect(await t.runtime.broker.get(id)).toMatchObject({ decidedBy: "rita", requester: { name: "bot" } });
  });

  it("cancelling a held request (its stream closed) withdraws the pending call, and the client goes on", async () => {
    const t = await start({ approvals: { waitSeconds: 30 } });
    await enableTool(t.runtime, ADD_NOTE);
    const { client } = await connectV2({ token: await createAgentToken(t.runtime, "bot") });
    const pending = nextPending(t);
    const abort = new AbortController();
    const held = client.callTool(
      { name: ADD_NOTE, arguments: { text: "never mind" } },
      { signal: abort.signal },
    );
    const id = await pending;
    abort.abort("changed my mind");
    await expect(held).rejects.toThrow(/changed my mind|abort/i);
    await waitForCallStatus(t.runtime, id, "withdrawn");
    expect(t.demoRuns()).toBe(0);
    expect((await client.listTools()).tools.map((x) => x.name)).toEqual([ADD_NOTE]);
  });
});

describe("subscriptions/listen", () => {
  it("a listen stream hears tools/list_changed when an owner enables a tool, and again when it is disabled", async () => {
    const t = await start();
    const owner = await createTestUser(t.runtime, "olga", ["owner"]);
    const { client } = await connectV2({ token: await createAgentToken(t.runtime, "bot") });
    let notified: () => void = () => undefined;
    let count = 0;
    client.setNotificationHandler("notifications/tools/list_changed", () => {
      count++;
      notified();
    });
    const next = () =>
      new Promise<void>((resolve) => {
        notified = resolve;
      });
    const subscription = await client.listen({ toolsListChanged: true });
    expect(subscription.honoredFilter).toMatchObject({ toolsListChanged: true });

    const first = next();
    const enabled = await request("PATCH", `/api/catalogue/${ADD_NOTE}`, {
      cookie: owner.cookie,
      body: { status: "enabled", expectedHash: (await getToolRow(t.runtime.db, ADD_NOTE))?.definitionHash },
    });
    expect(enabled.status).toBe(200);
    await first;
    expect((await client.listTools()).tools.map((x) => x.name)).toEqual([ADD_NOTE]);

    const second = next();
    const disabled = await request("PATCH", `/api/catalogue/${ADD_NOTE}`, {
      cookie: owner.cookie,
      body: { status: "disabled" },
    });
    expect(disabled.status).toBe(200);
    await second;
    expect((await client.listTools()).tools).toEqual([]);
    expect(count).toBe(2);
    await subscription.close();
  });

  it("a token past its cap of listen streams keeps the newest: its oldest stream ends, other tokens' stay", async () => {
    const t = await start();
    const { client } = await connectV2({ token: await createAgentToken(t.runtime, "bot") });
    const other = await connectV2({ token: await createAgentToken(t.runtime, "other-bot") });
    const others = await other.client.listen({ toolsListChanged: true });
    const streams = [];
    for (let i = 0; i < MAX_LISTEN_STREAMS_PER_TOKEN; i++)
      streams.push(await client.listen({ toolsListChanged: true }));
    const newest = await client.listen({ toolsListChanged: true });
    expect(await streams[0]?.closed).toBe("remote");
    // The rest are still open: the first to end would settle first.
    const settled = await Promise.race([
      ...streams.slice(1).map((s) => s.closed),
      newest.closed,
      others.closed,
      new Promise<"open">((resolve) => setImmediate(() => resolve("open"))),
    ]);
    expect(settled).toBe("open");
    for (const s of [...streams.slice(1), newest, others]) await s.close();
  });

  it("revoking a token ends its listen streams at once, and its next request is refused", async () => {
    const t = await start();
    const owner = await createTestUser(t.runtime, "olga", ["owner"]);
    const token = await createAgentToken(t.runtime, "bot");
    const { client } = await connectV2({ token });
    const other = await connectV2({ token: await createAgentToken(t.runtime, "other-bot") });
    const subscription = await client.listen({ toolsListChanged: true });
    const others = await other.client.listen({ toolsListChanged: true });

    const revoked = await request("DELETE", "/api/tokens/bot", { cookie: owner.cookie });
    expect(revoked.status).toBe(200);
    expect(await subscription.closed).toBe("remote");
    await expect(client.listTools()).rejects.toThrow(/401|bearer token is not valid/i);
    // Another token's stream stays open and still hears changes.
    const changed = new Promise<void>((resolve) => {
      other.client.setNotificationHandler("notifications/tools/list_changed", () => resolve());
    });
    await enableTool(t.runtime, LIST_NOTES);
    t.runtime.bus.publish({ type: "catalogue", server: "demo" });
    await changed;
    await others.close();
  });
});

describe("the front door, as on the 2025 leg", () => {
  /** Status, WWW-Authenticate and body of a refusal, to compare across eras. */
  async function refusal(res: Response) {
    return {
      status: res.status,
      wwwAuthenticate: res.headers.get("www-authenticate"),
      body: (await res.json()) as unknown,
    };
  }

  it("a wrong Origin, a missing bearer and a revoked one are refused exactly as a 2025 initialize is", async () => {
    const t = await start();
    const token = await createAgentToken(t.runtime, "bot");
    const cases: Record<string, Record<string, string>> = {
      "wrong origin": { origin: "http://evil.example.com", authorization: `Bearer ${token}` },
      "wrong host": { host: "evil.example.com", authorization: `Bearer ${token}` },
      "no bearer": { origin: ORIGIN },
      "unknown bearer": { authorization: "Bearer gh_not-a-real-token" },
    };
    const seen: Record<string, unknown> = {};
    for (const [name, headers] of Object.entries(cases)) {
      const modern = await refusal(await routeHandler(modernRequest("server/discover", {}, headers)));
      const legacy = await refusal(await routeHandler(initializeRequest(headers)));
      expect(modern, name).toEqual(legacy);
      seen[name] = modern.status;
    }
    expect(seen).toEqual({ "wrong origin": 403, "wrong host": 403, "no bearer": 401, "unknown bearer": 401 });

    await request("DELETE", "/api/tokens/bot", {
      cookie: (await createTestUser(t.runtime, "olga", ["owner"])).cookie,
    });
    const revoked = { authorization: `Bearer ${token}` };
    const modern = await refusal(await routeHandler(modernRequest("tools/list", {}, revoked)));
    expect(modern).toEqual(await refusal(await routeHandler(initializeRequest(revoked))));
    expect(modern.status).toBe(401);
  });

  it("a pinned client with a wrong Origin never connects, and nothing reaches the modern leg's tools", async () => {
    const t = await start();
    await enableTool(t.runtime, LIST_NOTES);
    await expect(
      connectModern({
        token: await createAgentToken(t.runtime, "bot"),
        headers: { origin: "http://evil.example.com" },
      }),
    ).rejects.toThrow(/403|not accepted/);
    expect(await t.runtime.broker.list({ limit: 10 })).toEqual([]);
  });
});
