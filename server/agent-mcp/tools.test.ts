/**
 * Tools over `/mcp`: the enabled catalogue as `tools/list`, `tools/call` through the
 * confirm flow (held until a reviewer decides through the reviewer API), cancellation and
 * `notifications/tools/list_changed`, with the SDK client against the real route module and a
 * real runtime with the demo server.
 */
import {
  type CallToolResult,
  CallToolResultSchema,
  type Progress,
  ToolListChangedNotificationSchema,
} from "@modelcontextprotocol/sdk/types.js";
import { and, eq } from "drizzle-orm";
import { afterEach, describe, expect, it } from "vitest";
import type { AgentToolView, LiveEvent } from "@/lib/api-types";
import { connectMcp, type McpHandler } from "@/test/support/mcp";
import {
  ADD_NOTE,
  callStatus,
  createAgentToken,
  createTestUser,
  enableTool,
  LIST_NOTES,
  request,
  startTestRuntime,
  type TestRuntime,
  waitForCallStatus,
  waitForEvent,
} from "@/test/support/runtime";
import { getToolRow } from "../catalogue/catalogue";
import { logger } from "../log";
import { auditEvents } from "../store/schema";
import { AgentMcpEndpoint } from "./endpoint";
import { CALL_META_KEY, holdSeconds, toMcpTool } from "./tools";

let rt: TestRuntime | undefined;
const cleanups: (() => Promise<void>)[] = [];

afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
  await rt?.stop();
  rt = undefined;
});

async function start(opts: Parameters<typeof startTestRuntime>[0] = {}): Promise<TestRuntime> {
  rt = await startTestRuntime(opts);
  return rt;
}

async function connect(opts: Parameters<typeof connectMcp>[0]) {
  const c = await connectMcp(opts);
  cleanups.push(() => c.close());
  return c;
}

/** An endpoint whose held calls send progress every 20 ms. */
function quickProgress(t: TestRuntime): McpHandler {
  const r = t.runtime;
  const e = new AgentMcpEndpoint(
    { db: r.db, bus: r.bus, broker: r.broker, manager: r.manager, config: r.config, log: logger("test-mcp") },
    { env: {}, progressIntervalMs: 20 },
  );
  cleanups.push(() => e.close());
  return (req) => e.handle(req);
}

function textOf(result: CallToolResult): string {
  return result.content.map((c) => (c.type === "text" ? c.text : "")).join("\n");
}

/** Resolves with the id of the next call that becomes pending. */
function nextPending(t: TestRuntime): Promise<string> {
  return waitForEvent(t.runtime.bus, (e) => e.type === "call" && e.status === "pending").then((e) =>
    e?.type === "call" ? e.id : "",
  );
}

describe("tools/list", () => {
  it("lists only enabled tools under their local names, with readOnlyHint as Gatehouse enforces it", async () => {
    const t = await start();
    const { client } = await connect({ token: await createAgentToken(t.runtime, "bot") });
    expect((await client.listTools()).tools).toEqual([]);

    await enableTool(t.runtime, LIST_NOTES);
    const one = (await client.listTools()).tools;
    expect(one.map((x) => x.name)).toEqual([LIST_NOTES]);
    expect(one[0]).toMatchObject({
      description: "List the notes in the demo notebook.",
      inputSchema: { type: "object", properties: {} },
      annotations: { readOnlyHint: true },
    });

    await enableTool(t.runtime, ADD_NOTE);
    const both = (await client.listTools()).tools;
    expect(both.map((x) => x.name)).toEqual([ADD_NOTE, LIST_NOTES]);
    const add = both.find((x) => x.name === ADD_NOTE);
    // The demo server gives add_note no annotations: Gatehouse holds it for approval.
    expect(add?.annotations?.readOnlyHint).toBe(false);
    expect(add?.inputSchema).toMatchObject({ required: ["text"] });
  });

  it("a server's annotations are filtered: unknown keys dropped, title cleaned, readOnlyHint overridden", () => {
    const tool: AgentToolView = {
      name: "files_write",
      description: "",
      inputSchema: { type: "object", properties: { path: { type: "string" } } },
      annotations: {
        title: "Write\u202E a file",
        readOnlyHint: true,
        destructiveHint: true,
        idempotentHint: "yes",
        openWorldHint: false,
        "x-run-without-approval": true,
      },
      destructive: true,
    };
    expect(toMcpTool(tool)).toEqual({
      name: "files_write",
      description: "write from server files",
      inputSchema: { type: "object", properties: { path: { type: "string" } } },
      annotations: {
        title: "Write a file",
        readOnlyHint: false,
        destructiveHint: true,
        openWorldHint: false,
      },
    });
    expect(toMcpTool({ ...tool, destructive: false, inputSchema: null }).annotations?.readOnlyHint).toBe(
      true,
    );
    expect(toMcpTool({ ...tool, inputSchema: null }).inputSchema).toEqual({ type: "object" });
  });
});

describe("tools/call", () => {
  it("a read-only tool runs at once and answers with its result and the call's id", async () => {
    const t = await start();
    await enableTool(t.runtime, LIST_NOTES);
    const { client } = await connect({ token: await createAgentToken(t.runtime, "bot") });
    const result = (await client.callTool({ name: LIST_NOTES, arguments: {} })) as CallToolResult;
    expect(result.isError).toBeFalsy();
    expect(textOf(result)).toBe("The notebook is empty.");
    expect(result.structuredContent).toEqual({ notes: [] });
    const meta = result._meta?.[CALL_META_KEY] as { id: string; status: string };
    expect(meta.status).toBe("succeeded");
    expect(await callStatus(t.runtime, meta.id)).toBe("succeeded");
    expect((await t.runtime.broker.get(meta.id))?.requester).toEqual({ kind: "agent", name: "bot" });
  });

  it("refusals are isError results that say why (unknown, not enabled, bad arguments), and nothing runs", async () => {
    const t = await start();
    const { client } = await connect({ token: await createAgentToken(t.runtime, "bot") });
    const unknown = (await client.callTool({ name: "demo_drop_tables", arguments: {} })) as CallToolResult;
    expect(unknown.isError).toBe(true);
    expect(textOf(unknown)).toMatch(/tool_not_found.*demo_drop_tables/);

    const disabled = (await client.callTool({ name: ADD_NOTE, arguments: { text: "x" } })) as CallToolResult;
    expect(disabled.isError).toBe(true);
    expect(textOf(disabled)).toMatch(/tool_not_enabled.*not enabled/);

    await enableTool(t.runtime, ADD_NOTE);
    const bad = (await client.callTool({ name: ADD_NOTE, arguments: { text: 42 } })) as CallToolResult;
    expect(bad.isError).toBe(true);
    expect(textOf(bad)).toMatch(/invalid_arguments.*text/);
    expect(await t.runtime.broker.list({ status: "pending", limit: 10 })).toEqual([]);
    expect(t.demoRuns()).toBe(0);
  });

  it("params of the wrong shape are a JSON-RPC error, not a result", async () => {
    const t = await start();
    const { client } = await connect({ token: await createAgentToken(t.runtime, "bot") });
    await expect(
      client.request(
        { method: "tools/call", params: { name: 7, arguments: "x" } } as never,
        CallToolResultSchema,
      ),
    ).rejects.toThrow(/-32602|Invalid/);
  });

  it("a destructive call is held, with progress naming the call, until a reviewer approves it through the API; then the tool's result arrives", async () => {
    const t = await start({ approvals: { waitSeconds: 30 } });
    await enableTool(t.runtime, ADD_NOTE);
    const rita = await createTestUser(t.runtime, "rita", ["reviewer"]);
    const { client } = await connect({
      token: await createAgentToken(t.runtime, "bot"),
      handler: quickProgress(t),
    });

    const progress: Progress[] = [];
    let thirdProgress: () => void = () => undefined;
    const threeSeen = new Promise<void>((resolve) => {
      thirdProgress = resolve;
    });
    const held = client.callTool({ name: ADD_NOTE, arguments: { text: "ship it" } }, undefined, {
      onprogress: (p) => {
        progress.push(p);
        if (progress.length === 3) thirdProgress();
      },
    });
    await threeSeen;
    const id = /call ([0-9a-f-]{36})/.exec(progress[0]?.message ?? "")?.[1] ?? "";
    expect(await callStatus(t.runtime, id)).toBe("pending");
    expect(t.demoRuns()).toBe(0);
    for (const p of progress) expect(p.total).toBe(29);
    for (let i = 1; i < progress.length; i++)
      expect(progress[i]?.progress).toBeGreaterThan(progress[i - 1]?.progress ?? 0);

    const approved = await request("POST", `/api/calls/${id}/approve`, { cookie: rita.cookie });
    expect(approved.status).toBe(200);
    const result = (await held) as CallToolResult;
    expect(result.isError).toBeFalsy();
    expect(textOf(result)).toBe("Added note 1: ship it");
    expect(result._meta?.[CALL_META_KEY]).toEqual({ id, status: "succeeded" });
    expect(t.demoRuns()).toBe(1);
    // The same pending call as REST: the reviewer decided it, the agent requested it.
    expect(await t.runtime.broker.get(id)).toMatchObject({ decidedBy: "rita", requester: { name: "bot" } });
  });

  it("a denial is an isError result naming who denied it and why, and nothing runs", async () => {
    const t = await start({ approvals: { waitSeconds: 30 } });
    await enableTool(t.runtime, ADD_NOTE);
    const rita = await createTestUser(t.runtime, "rita", ["reviewer"]);
    const { client } = await connect({ token: await createAgentToken(t.runtime, "bot") });
    const pending = nextPending(t);
    const held = client.callTool({ name: ADD_NOTE, arguments: { text: "rm -rf" } });
    const id = await pending;
    const denied = await request("POST", `/api/calls/${id}/deny`, {
      cookie: rita.cookie,
      body: { reason: "not on a Friday" },
    });
    expect(denied.status).toBe(200);
    const result = (await held) as CallToolResult;
    expect(result.isError).toBe(true);
    expect(textOf(result)).toBe(`Denied by rita: not on a Friday. Call ${id} was not run.`);
    expect(result._meta?.[CALL_META_KEY]).toEqual({ id, status: "denied" });
    expect(t.demoRuns()).toBe(0);
  });

  it("still pending at approvals.waitSeconds: an isError result names the call id and how to check it later; the call stays pending", async () => {
    const t = await start({ approvals: { waitSeconds: 1 } });
    await enableTool(t.runtime, ADD_NOTE);
    const { client } = await connect({ token: await createAgentToken(t.runtime, "bot") });
    const result = (await client.callTool({
      name: ADD_NOTE,
      arguments: { text: "later" },
    })) as CallToolResult;
    expect(result.isError).toBe(true);
    const meta = result._meta?.[CALL_META_KEY] as { id: string; status: string };
    expect(meta.status).toBe("pending");
    expect(textOf(result)).toContain(`Call ${meta.id} is still waiting for a reviewer's approval after 1 s`);
    expect(textOf(result)).toContain(`GET http://127.0.0.1:3000/api/calls/${meta.id}?wait=60`);
    expect(await callStatus(t.runtime, meta.id)).toBe("pending");
  });

  it("a call is held one second short of a waitSeconds of 10 s or more, so a client timing out at waitSeconds hears the answer first", () => {
    expect(holdSeconds(60)).toBe(59);
    expect(holdSeconds(10)).toBe(9);
    expect(holdSeconds(9)).toBe(9);
    expect(holdSeconds(1)).toBe(1);
    expect(holdSeconds(0)).toBe(0);
  });

  it("cancelling the held request (notifications/cancelled) withdraws the pending call; it can no longer be approved", async () => {
    const t = await start({ approvals: { waitSeconds: 30 } });
    await enableTool(t.runtime, ADD_NOTE);
    const rita = await createTestUser(t.runtime, "rita", ["reviewer"]);
    const { client } = await connect({ token: await createAgentToken(t.runtime, "bot") });
    const pending = nextPending(t);
    const abort = new AbortController();
    const held = client.callTool({ name: ADD_NOTE, arguments: { text: "never mind" } }, undefined, {
      signal: abort.signal,
    });
    const id = await pending;
    abort.abort("changed my mind");
    await expect(held).rejects.toThrow(/changed my mind|abort/i);
    await waitForCallStatus(t.runtime, id, "withdrawn");
    const audit = await t.runtime.db
      .select({ actor: auditEvents.actor })
      .from(auditEvents)
      .where(and(eq(auditEvents.callId, id), eq(auditEvents.action, "call.withdrawn")));
    expect(audit).toEqual([{ actor: "bot" }]);
    const late = await request("POST", `/api/calls/${id}/approve`, { cookie: rita.cookie });
    expect(late.status).toBe(409);
    expect(t.demoRuns()).toBe(0);
    // The session goes on working.
    expect((await client.listTools()).tools.map((x) => x.name)).toEqual([ADD_NOTE]);
  });

  it("ending the session while a call is held is not a cancellation: the call stays pending", async () => {
    const t = await start({ approvals: { waitSeconds: 30 } });
    await enableTool(t.runtime, ADD_NOTE);
    const c = await connectMcp({ token: await createAgentToken(t.runtime, "bot") });
    const pending = nextPending(t);
    const held = c.client.callTool({ name: ADD_NOTE, arguments: { text: "keep me" } });
    const id = await pending;
    await c.transport.terminateSession();
    await c.client.close();
    await expect(held).rejects.toThrow(/closed/i);
    expect(t.runtime.agentMcp.sessionCount()).toBe(0);
    expect(await callStatus(t.runtime, id)).toBe("pending");
  });
});

describe("notifications/tools/list_changed", () => {
  it("reaches a connected session when an owner enables a tool, and again when it is disabled", async () => {
    const t = await start();
    const owner = await createTestUser(t.runtime, "olga", ["owner"]);
    const { client } = await connect({ token: await createAgentToken(t.runtime, "bot") });
    let notified: () => void = () => undefined;
    let count = 0;
    client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
      count++;
      notified();
    });
    const next = () =>
      new Promise<void>((resolve) => {
        notified = resolve;
      });

    const first = next();
    const enabled = await request("PATCH", `/api/catalogue/${ADD_NOTE}`, {
      cookie: owner.cookie,
      body: { status: "enabled", expectedHash: (await getToolRow(t.runtime.db, ADD_NOTE))?.definitionHash },
    });
    expect(enabled.status).toBe(200);
    await first;
    expect((await client.listTools()).tools.map((x) => x.name)).toEqual([ADD_NOTE]);

    const second = next();
    await request("PATCH", `/api/catalogue/${ADD_NOTE}`, {
      cookie: owner.cookie,
      body: { status: "disabled" },
    });
    await second;
    expect((await client.listTools()).tools).toEqual([]);
    expect(count).toBe(2);
  });

  it("a burst of catalogue events becomes one notification", async () => {
    const t = await start();
    const { client } = await connect({ token: await createAgentToken(t.runtime, "bot") });
    const events: LiveEvent[] = [];
    const unsubscribe = t.runtime.bus.subscribe((e) => events.push(e));
    let count = 0;
    const notified = new Promise<void>((resolve) => {
      client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
        count++;
        resolve();
      });
    });
    await enableTool(t.runtime, LIST_NOTES);
    t.runtime.bus.publish({ type: "catalogue", server: "demo" });
    await enableTool(t.runtime, ADD_NOTE);
    t.runtime.bus.publish({ type: "catalogue", server: "demo" });
    await notified;
    // A later, unrelated listing proves nothing else was queued behind the first notification.
    await client.listTools();
    unsubscribe();
    expect(events.filter((e) => e.type === "catalogue")).toHaveLength(2);
    expect(count).toBe(1);
  });
});
