/**
 * A 2026-07-28 client across a restart of Gatehouse: the modern leg keeps nothing between
 * requests, so the same client, never reconnecting, goes on against a new runtime on the same
 * store (stopped and started in this process, as endpoint-sessions.test.ts does for sessions).
 */
import type { CallToolResult } from "@modelcontextprotocol/client";
import { afterEach, describe, expect, it } from "vitest";
import { connectModern, type ModernConnected, modernRequest } from "@/test/support/mcp-modern";
import {
  ADD_NOTE,
  callStatus,
  createAgentToken,
  createTestUser,
  enableTool,
  LIST_NOTES,
  request,
  type TestRuntime,
  waitForEvent,
} from "@/test/support/runtime";
import { endpointFixtures } from "./endpoint-fixtures";
import { CALL_META_KEY } from "./tools";

const { start, forget, endpoint } = endpointFixtures();

const clients: ModernConnected[] = [];
afterEach(async () => {
  for (const c of clients.splice(0)) await c.close();
});

function nextPending(t: TestRuntime): Promise<string> {
  return waitForEvent(t.runtime.bus, (e) => e.type === "call" && e.status === "pending").then((e) =>
    e?.type === "call" ? e.id : "",
  );
}

function textOf(result: CallToolResult): string {
  return result.content.map((c) => (c.type === "text" ? c.text : "")).join("\n");
}

/** Stops `first` keeping its directory, and starts another runtime on the same store. */
async function restart(first: TestRuntime): Promise<TestRuntime> {
  await first.stop({ keepDir: true });
  forget();
  return start({ dir: first.dir, approvals: { waitSeconds: 30 } });
}

describe("a restart between two requests of one 2026-07-28 client", () => {
  it("leaves the client working without reconnecting: list, then a call, then a held call approved after the restart", async () => {
    const first = await start({ approvals: { waitSeconds: 30 } });
    await enableTool(first.runtime, LIST_NOTES);
    await enableTool(first.runtime, ADD_NOTE);
    const token = await createAgentToken(first.runtime, "bot");
    const c = await connectModern({ token });
    clients.push(c);
    expect((await c.client.listTools()).tools.map((x) => x.name)).toEqual([ADD_NOTE, LIST_NOTES]);
    const before = await c.client.listen({ toolsListChanged: true });

    const second = await restart(first);
    // A shutdown ends listen streams the way the spec marks as graceful: the client may listen again.
    expect(await before.closed).toBe("graceful");

    const listed = (await c.client.callTool({ name: LIST_NOTES, arguments: {} })) as CallToolResult;
    expect(textOf(listed)).toBe("The notebook is empty.");
    expect(listed._meta?.[CALL_META_KEY]).toMatchObject({ status: "succeeded" });

    const rita = await createTestUser(second.runtime, "rita", ["reviewer"]);
    const pending = nextPending(second);
    const held = c.client.callTool({ name: ADD_NOTE, arguments: { text: "after the restart" } });
    const id = await pending;
    const approved = await request("POST", `/api/calls/${id}/approve`, { cookie: rita.cookie });
    expect(approved.status).toBe(200);
    const result = (await held) as CallToolResult;
    expect(result.isError).toBeFalsy();
    expect(textOf(result)).toBe("Added note 1: after the restart");
    expect(result._meta?.[CALL_META_KEY]).toEqual({ id, status: "succeeded" });

    // The list changes reach a stream opened at the new Gatehouse.
    const changed = new Promise<void>((resolve) => {
      c.client.setNotificationHandler("notifications/tools/list_changed", () => resolve());
    });
    const after = await c.client.listen({ toolsListChanged: true });
    const owner = await createTestUser(second.runtime, "olga", ["owner"]);
    await request("PATCH", `/api/catalogue/${ADD_NOTE}`, {
      cookie: owner.cookie,
      body: { status: "disabled" },
    });
    await changed;
    await after.close();

    // One discovery at the start, and never a 2025 handshake.
    expect(c.methods()).toEqual([
      "server/discover",
      "tools/list",
      "subscriptions/listen",
      "tools/call",
      "tools/call",
      "subscriptions/listen",
      // The client's way of closing the stream it opened (subscription.close()).
      "notifications/cancelled",
    ]);
    expect(second.runtime.agentMcp.sessionCount()).toBe(0);
  });

  it("a call held when Gatehouse stops is answered as still pending, not withdrawn, and can be decided at the next Gatehouse", async () => {
    const first = await start({ approvals: { waitSeconds: 30 } });
    await enableTool(first.runtime, ADD_NOTE);
    const c = await connectModern({ token: await createAgentToken(first.runtime, "bot") });
    clients.push(c);
    const pending = nextPending(first);
    const held = c.client.callTool({ name: ADD_NOTE, arguments: { text: "survive" } });
    const id = await pending;

    const second = await restart(first);
    const result = (await held) as CallToolResult;
    expect(result.isError).toBe(true);
    expect(result._meta?.[CALL_META_KEY]).toEqual({ id, status: "pending" });
    expect(textOf(result)).toContain(`GET http://127.0.0.1:3000/api/calls/${id}?wait=60`);
    expect(await callStatus(second.runtime, id)).toBe("pending");

    const rita = await createTestUser(second.runtime, "rita", ["reviewer"]);
    const denied = await request("POST", `/api/calls/${id}/deny`, {
      cookie: rita.cookie,
      body: { reason: "after the restart" },
    });
    expect(denied.status).toBe(200);
    expect((await c.client.listTools()).tools.map((x) => x.name)).toEqual([ADD_NOTE]);
  });

  it("a 2026-07-28 request under way as Gatehouse stops is refused with 503, and starts no call", async () => {
    const t = await start({ approvals: { waitSeconds: 30 } });
    await enableTool(t.runtime, ADD_NOTE);
    const e = endpoint(t, {});
    const token = await createAgentToken(t.runtime, "bot");
    const call = (text: string) =>
      modernRequest(
        "tools/call",
        { name: ADD_NOTE, arguments: { text } },
        { authorization: `Bearer ${token}`, "mcp-name": ADD_NOTE },
      );
    // A call already held, so that stopping has an exchange to answer and takes a moment.
    const held = nextPending(t);
    const heldAnswer = e.handle(call("first"));
    await held;
    // Past the endpoint's own "stopping" check (it reads the body next), then Gatehouse stops.
    const lateAnswer = e.handle(call("too late"));
    const closing = e.close();
    const late = await lateAnswer;
    await closing;
    expect(late.status).toBe(503);
    expect(((await late.json()) as { error: { message: string } }).error.message).toMatch(/stopping/);
    // Only the first call exists: the late one was never asked for.
    expect((await t.runtime.broker.list({ limit: 10 })).map((c) => c.arguments)).toEqual([{ text: "first" }]);
    await (await heldAnswer).text();
  });
});
