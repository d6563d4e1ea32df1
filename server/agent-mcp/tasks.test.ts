/**
 * Held calls as tasks on `/mcp` in 2026-07-28: a real runtime with the demo server, SDK v2's
 * client pinned to 2026-07-28 with `@modelcontextprotocol/ext-tasks`' session on it
 * (task-fixtures.ts), reviewers deciding through the real approve and deny routes, and a
 * restart of Gatehouse between a task's creation and its approval.
 */
import type { TaskView, ToolExecution } from "@modelcontextprotocol/ext-tasks/client";
import { type JsonValue, type TaskId, taskId } from "@modelcontextprotocol/ext-tasks/core";
import { afterEach, describe, expect, it } from "vitest";
import { fetchVia, MCP_URL, routeHandler } from "@/test/support/mcp";
import { connectModern, type ModernConnected } from "@/test/support/mcp-modern";
import {
  ADD_NOTE,
  callStatus,
  createAgentToken,
  createTestUser,
  enableTool,
  LIST_NOTES,
  request,
  type TestRuntime,
  waitForCallStatus,
  waitForEvent,
} from "@/test/support/runtime";
import { endpointFixtures } from "./endpoint-fixtures";
import { connectTaskClient, plainEnvelope, type TaskClient } from "./task-fixtures";
import { CALL_NOT_RUN_CODE, TASK_POLL_INTERVAL_MS, TASKS_EXTENSION } from "./tasks";
import { CALL_META_KEY } from "./tools";

const { start, forget } = endpointFixtures();

const closing: { close(): Promise<void> }[] = [];
// Registered after the fixtures' hook, so it runs first: clients close before the runtime stops.
afterEach(async () => {
  for (const c of closing.splice(0).reverse()) await c.close();
});

async function taskClient(token: string): Promise<TaskClient> {
  const c = await connectTaskClient({ url: MCP_URL, token, fetch: fetchVia(routeHandler) });
  closing.push(c);
  return c;
}

async function plainClient(token: string): Promise<ModernConnected> {
  const c = await connectModern({ token });
  closing.push(c);
  return c;
}

type Execution = ToolExecution<unknown>;

/**
 * Calls `tool` through the task session; a task's execution is detached at once, so the
 * session's own polling never runs beside the test's `tasks/get`s.
 */
async function callAsTask(c: TaskClient, tool: string, args: Record<string, JsonValue>): Promise<TaskId> {
  const execution: Execution = await c.session.callTool(tool, args);
  expect(execution.kind).toBe("task");
  if (execution.kind !== "task") throw new Error("no task");
  await execution.detach();
  return execution.handle.taskId;
}

function textOf(result: unknown): string {
  const { content } = result as { content: { type: string; text?: string }[] };
  return content.map((c) => c.text ?? "").join("\n");
}

async function errorOf(p: Promise<unknown>): Promise<{ code: number; message: string }> {
  return p.then(
    () => {
      throw new Error("expected a JSON-RPC error");
    },
    (err: unknown) => {
      const { code, message } = err as { code: number; message: string };
      return { code, message };
    },
  );
}

function nextPending(t: TestRuntime): Promise<string> {
  return waitForEvent(t.runtime.bus, (e) => e.type === "call" && e.status === "pending").then((e) =>
    e?.type === "call" ? e.id : "",
  );
}

describe("held calls as tasks, for 2026-07-28 clients that declare the tasks extension", () => {
  it("server/discover offers the tasks extension", async () => {
    const t = await start();
    const c = await taskClient(await createAgentToken(t.runtime, "bot"));
    expect(c.client.getServerCapabilities()?.extensions).toEqual({ [TASKS_EXTENSION]: {} });
    expect(c.session.capabilities).toMatchObject({ execution: true, cancellation: true });
  });

  it("a held call is a task at once: working while it waits, completed with the demo tool's result once a reviewer approves", async () => {
    const t = await start({ approvals: { waitSeconds: 30, expireAfterSeconds: 600 } });
    await enableTool(t.runtime, ADD_NOTE);
    const rita = await createTestUser(t.runtime, "rita", ["reviewer"]);
    const c = await taskClient(await createAgentToken(t.runtime, "bot"));

    const id = await callAsTask(c, ADD_NOTE, { text: "ship it" });
    // The task is the stored call, there before the answer came.
    expect(await callStatus(t.runtime, id)).toBe("pending");
    expect((await t.runtime.broker.get(id))?.requester).toEqual({ kind: "agent", name: "bot" });
    expect(t.demoRuns()).toBe(0);

    const task = c.session.task(id);
    const working: TaskView = await task.snapshot();
    const call = await t.runtime.broker.get(id);
    expect(working).toMatchObject({
      taskId: id,
      status: "working",
      statusMessage: `waiting for a reviewer's approval; it expires at ${call?.expiresAt}`,
      createdAt: call?.createdAt,
      lastUpdatedAt: call?.createdAt,
      retentionMs: Date.parse(call?.expiresAt ?? "") - Date.parse(call?.createdAt ?? ""),
      suggestedPollIntervalMs: TASK_POLL_INTERVAL_MS,
    });
    expect(working.raw._meta).toMatchObject({ [CALL_META_KEY]: { id, status: "pending" } });

    const approved = await request("POST", `/api/calls/${id}/approve`, { cookie: rita.cookie });
    expect(approved.status).toBe(200);
    await waitForCallStatus(t.runtime, id, "succeeded");
    const done = await task.snapshot();
    expect(done).toMatchObject({ taskId: id, status: "completed", retentionMs: null });
    const outcome = await task.result();
    expect(outcome.status).toBe("completed");
    if (outcome.status !== "completed") return;
    expect(textOf(outcome.result)).toBe("Added note 1: ship it");
    expect((outcome.result as { _meta?: unknown })._meta).toMatchObject({
      [CALL_META_KEY]: { id, status: "succeeded" },
    });
    expect(t.demoRuns()).toBe(1);
    // No request was held: the call and every tasks/get answered at once.
    // (ext-tasks reads the tool's declaration with tools/list before it calls it.)
    expect(c.sent).toEqual([
      "server/discover",
      "tools/list",
      "tools/call",
      "tasks/get",
      "tasks/get",
      "tasks/get",
    ]);
  });

  it("the session's own polling settles with the tool's result after the approval", async () => {
    const t = await start({ approvals: { waitSeconds: 30 } });
    await enableTool(t.runtime, ADD_NOTE);
    const rita = await createTestUser(t.runtime, "rita", ["reviewer"]);
    const c = await taskClient(await createAgentToken(t.runtime, "bot"));
    const execution: Execution = await c.session.callTool(ADD_NOTE, { text: "polled" });
    if (execution.kind !== "task") throw new Error("no task");
    const settled = execution.settle();
    const approved = await request("POST", `/api/calls/${execution.handle.taskId}/approve`, {
      cookie: rita.cookie,
    });
    expect(approved.status).toBe(200);
    const { outcome } = await settled;
    expect(outcome.status).toBe("completed");
    if (outcome.status === "completed") expect(textOf(outcome.result)).toBe("Added note 1: polled");
  });

  it("a denial fails the task with a JSON-RPC error naming the reviewer and the reason", async () => {
    const t = await start({ approvals: { waitSeconds: 30 } });
    await enableTool(t.runtime, ADD_NOTE);
    const rita = await createTestUser(t.runtime, "rita", ["reviewer"]);
    const c = await taskClient(await createAgentToken(t.runtime, "bot"));
    const id = await callAsTask(c, ADD_NOTE, { text: "drop everything" });

    const denied = await request("POST", `/api/calls/${id}/deny`, {
      cookie: rita.cookie,
      body: { reason: "not today" },
    });
    expect(denied.status).toBe(200);
    const task = await c.session.task(id).snapshot();
    const message = `Denied by rita: not today. Call ${id} was not run.`;
    expect(task).toMatchObject({ status: "failed", statusMessage: message });
    expect(task.raw.error).toEqual({
      code: CALL_NOT_RUN_CODE,
      message,
      data: { callId: id, status: "denied", decidedBy: "rita", reason: "not today" },
    });
    const outcome = await c.session.task(id).result();
    expect(outcome.status).toBe("failed");
    if (outcome.status === "failed") expect(outcome.error.message).toBe(message);
    expect(t.demoRuns()).toBe(0);
  });

  it("tasks/cancel withdraws the pending call, with the same audit row as a cancelled held request; cancelling a decided call changes nothing", async () => {
    const t = await start({ approvals: { waitSeconds: 30 } });
    await enableTool(t.runtime, ADD_NOTE);
    const token = await createAgentToken(t.runtime, "bot");
    const c = await taskClient(token);
    const id = await callAsTask(c, ADD_NOTE, { text: "never mind" });

    await c.session.task(id).cancel();
    expect(await callStatus(t.runtime, id)).toBe("withdrawn");
    expect(await c.session.task(id).snapshot()).toMatchObject({ status: "cancelled" });
    expect((await c.session.task(id).result()).status).toBe("cancelled");

    // The same client's held request, cancelled the 2025 way (its stream closed).
    const held = await plainClient(token);
    const pending = nextPending(t);
    const abort = new AbortController();
    const call = held.client.callTool(
      { name: ADD_NOTE, arguments: { text: "no" } },
      { signal: abort.signal },
    );
    const heldId = await pending;
    abort.abort("changed my mind");
    await expect(call).rejects.toThrow(/changed my mind|abort/i);
    await waitForCallStatus(t.runtime, heldId, "withdrawn");

    const withdrawal = async (callId: string) =>
      (await t.runtime.broker.story(callId)).audit
        .filter((a) => a.action === "call.withdrawn")
        .map(({ actor, action, detail }) => ({ actor, action, detail }));
    expect(await withdrawal(id)).toEqual([
      { actor: "bot", action: "call.withdrawn", detail: "cancelled by the requester" },
    ]);
    expect(await withdrawal(id)).toEqual(await withdrawal(heldId));

    // Decided: a cancel is acknowledged and the decision stands.
    const rita = await createTestUser(t.runtime, "rita", ["reviewer"]);
    const later = await callAsTask(c, ADD_NOTE, { text: "keep" });
    await request("POST", `/api/calls/${later}/approve`, { cookie: rita.cookie });
    await waitForCallStatus(t.runtime, later, "succeeded");
    const audited = (await t.runtime.broker.story(later)).audit.length;
    await c.session.task(later).cancel();
    await c.session.task(id).cancel();
    expect(await callStatus(t.runtime, later)).toBe("succeeded");
    expect((await t.runtime.broker.story(later)).audit).toHaveLength(audited);
    expect((await c.session.task(later).snapshot()).status).toBe("completed");
  });

  it("another token can neither see nor cancel the task: its id answers exactly as an unknown id does", async () => {
    const t = await start({ approvals: { waitSeconds: 30 } });
    await enableTool(t.runtime, ADD_NOTE);
    const mine = await taskClient(await createAgentToken(t.runtime, "bot"));
    const theirs = await taskClient(await createAgentToken(t.runtime, "other-bot"));
    const id = await callAsTask(mine, ADD_NOTE, { text: "mine" });
    const unknown = taskId("01900000-0000-7000-8000-000000000000");

    const seen = await errorOf(theirs.session.task(id).snapshot());
    expect(seen).toEqual({ code: -32602, message: "Failed to retrieve task: Task not found" });
    expect(await errorOf(theirs.session.task(unknown).snapshot())).toEqual(seen);
    expect(await errorOf(theirs.session.task(id).cancel())).toEqual(seen);
    expect(await errorOf(theirs.session.task(unknown).cancel())).toEqual(seen);
    expect(await callStatus(t.runtime, id)).toBe("pending");
    expect((await mine.session.task(id).snapshot()).status).toBe("working");
  });

  it("a read-only call still answers at once with its result, not a task", async () => {
    const t = await start();
    await enableTool(t.runtime, LIST_NOTES);
    const c = await taskClient(await createAgentToken(t.runtime, "bot"));
    const execution: Execution = await c.session.callTool(LIST_NOTES, {});
    expect(execution.kind).toBe("immediate");
    const outcome = await execution.result();
    expect(outcome.status).toBe("completed");
    if (outcome.status !== "completed") return;
    expect(textOf(outcome.result)).toBe("The notebook is empty.");
    expect((outcome.result as { _meta?: unknown })._meta).toMatchObject({
      [CALL_META_KEY]: { status: "succeeded" },
    });
  });

  it("a 2026-07-28 client that does not declare the extension is held as before, and answered once a reviewer approves", async () => {
    const t = await start({ approvals: { waitSeconds: 30 } });
    await enableTool(t.runtime, ADD_NOTE);
    const rita = await createTestUser(t.runtime, "rita", ["reviewer"]);
    const { client } = await plainClient(await createAgentToken(t.runtime, "bot"));
    const pending = nextPending(t);
    const held = client.callTool({ name: ADD_NOTE, arguments: { text: "held" } });
    const id = await pending;
    expect(await callStatus(t.runtime, id)).toBe("pending");
    await request("POST", `/api/calls/${id}/approve`, { cookie: rita.cookie });
    const result = await held;
    expect(result.isError).toBeFalsy();
    expect(textOf(result)).toBe("Added note 1: held");
    expect(result._meta?.[CALL_META_KEY]).toEqual({ id, status: "succeeded" });
  });

  it("tasks/* from a request that does not declare the extension answer -32021, and tasks/update is refused: Gatehouse never asks for input", async () => {
    const t = await start({ approvals: { waitSeconds: 30 } });
    await enableTool(t.runtime, ADD_NOTE);
    const c = await taskClient(await createAgentToken(t.runtime, "bot"));
    const id = await callAsTask(c, ADD_NOTE, { text: "ask me" });
    for (const method of ["tasks/get", "tasks/cancel", "tasks/update"]) {
      const answer = await c.raw(method, { taskId: id, inputResponses: {} });
      expect(answer, method).toMatchObject({
        kind: "error",
        error: {
          code: -32021,
          data: { requiredCapabilities: { extensions: { [TASKS_EXTENSION]: {} } } },
        },
      });
    }
    expect(await callStatus(t.runtime, id)).toBe("pending");

    const declared = {
      ...plainEnvelope(),
      "io.modelcontextprotocol/clientCapabilities": { extensions: { [TASKS_EXTENSION]: {} } },
    };
    const update = await c.raw("tasks/update", { taskId: id, inputResponses: {}, _meta: declared });
    expect(update).toEqual({
      kind: "error",
      error: {
        code: -32602,
        message: `Task ${id} asks for no input: Gatehouse never asks a client for input, so there is nothing to update`,
      },
    });
    expect(await callStatus(t.runtime, id)).toBe("pending");
  });
});

describe("a Gatehouse restart between a task's creation and its approval", () => {
  it("the same client's tasks/get after the restart sees the task completed with the result", async () => {
    const first = await start({ approvals: { waitSeconds: 30 } });
    await enableTool(first.runtime, ADD_NOTE);
    const c = await taskClient(await createAgentToken(first.runtime, "bot"));
    const id = await callAsTask(c, ADD_NOTE, { text: "across the restart" });
    expect((await c.session.task(id).snapshot()).status).toBe("working");

    await first.stop({ keepDir: true });
    forget();
    const second = await start({ dir: first.dir, approvals: { waitSeconds: 30 } });
    expect(await callStatus(second.runtime, id)).toBe("pending");
    expect((await c.session.task(id).snapshot()).status).toBe("working");

    const rita = await createTestUser(second.runtime, "rita", ["reviewer"]);
    const approved = await request("POST", `/api/calls/${id}/approve`, { cookie: rita.cookie });
    expect(approved.status).toBe(200);
    await waitForCallStatus(second.runtime, id, "succeeded");
    const done = await c.session.task(id).snapshot();
    expect(done.status).toBe("completed");
    expect(textOf(done.raw.result)).toBe("Added note 1: across the restart");
    // One discovery, before the restart: the client never reconnected.
    // (ext-tasks reads the tool's declaration with tools/list before it calls it.)
    expect(c.sent).toEqual([
      "server/discover",
      "tools/list",
      "tools/call",
      "tasks/get",
      "tasks/get",
      "tasks/get",
    ]);
  });
});
