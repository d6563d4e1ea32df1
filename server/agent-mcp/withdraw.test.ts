/**
 * `CallBroker.withdraw`: the agent that requested a pending call takes it back when
 * its MCP client cancels the held request. A real runtime with the demo server.
 */
import { and, eq } from "drizzle-orm";
import { afterEach, describe, expect, it } from "vitest";
import type { LiveEvent } from "@/lib/api-types";
import { GatehouseError } from "@/lib/errors";
import {
  ADD_NOTE,
  callStatus,
  createTestUser,
  enableTool,
  startTestRuntime,
  type TestRuntime,
  waitForCallStatus,
} from "@/test/support/runtime";
import { auditEvents } from "../store/schema";

let rt: TestRuntime | undefined;

afterEach(async () => {
  await rt?.stop();
  rt = undefined;
});

const agent = { kind: "agent", name: "bot" } as const;

async function pendingCall(t: TestRuntime): Promise<string> {
  await enableTool(t.runtime, ADD_NOTE);
  const { httpStatus, call } = await t.runtime.broker.request(agent, {
    tool: ADD_NOTE,
    arguments: { text: "maybe" },
  });
  expect(httpStatus).toBe(202);
  return call.id;
}

async function codeOf(fn: () => unknown): Promise<string | undefined> {
  try {
    await fn();
  } catch (err) {
    if (err instanceof GatehouseError) return err.code;
    throw err;
  }
  return undefined;
}

describe("withdrawing a pending call", () => {
  it("the requester moves its pending call to withdrawn, with an audit row and a bus event, and nothing runs", async () => {
    rt = await startTestRuntime();
    const id = await pendingCall(rt);
    const events: LiveEvent[] = [];
    const unsubscribe = rt.runtime.bus.subscribe((e) => events.push(e));
    const view = await rt.runtime.broker.withdraw(agent, id);
    unsubscribe();
    expect(view.status).toBe("withdrawn");
    expect(view.finishedAt).not.toBeNull();
    expect(await callStatus(rt.runtime, id)).toBe("withdrawn");
    expect(events).toContainEqual({ type: "call", id, status: "withdrawn" });
    const audit = await rt.runtime.db
      .select()
      .from(auditEvents)
      .where(and(eq(auditEvents.callId, id), eq(auditEvents.action, "call.withdrawn")));
    expect(audit).toHaveLength(1);
    expect(audit[0]?.actor).toBe("bot");
    expect(rt.demoRuns()).toBe(0);
  });

  it("withdrawn is final: a long-poll wakes up with it and a reviewer can no longer approve", async () => {
    rt = await startTestRuntime();
    const id = await pendingCall(rt);
    const reviewer = await createTestUser(rt.runtime, "rita", ["reviewer"]);
    const waited = rt.runtime.broker.wait(id, 10);
    await rt.runtime.broker.withdraw(agent, id);
    expect((await waited).status).toBe("withdrawn");
    await expect(rt.runtime.broker.approve(reviewer.user.name, id)).rejects.toMatchObject({
      code: "already_decided",
    });
    expect(rt.demoRuns()).toBe(0);
  });

  it("another requester cannot withdraw the call: it answers call_not_found and the call stays pending", async () => {
    rt = await startTestRuntime();
    const id = await pendingCall(rt);
    expect(await codeOf(() => rt?.runtime.broker.withdraw({ kind: "agent", name: "other" }, id))).toBe(
      "call_not_found",
    );
    expect(await codeOf(() => rt?.runtime.broker.withdraw({ kind: "user", name: "bot" }, id))).toBe(
      "call_not_found",
    );
    expect(await callStatus(rt.runtime, id)).toBe("pending");
  });

  it("a call already decided cannot be withdrawn (already_decided) and keeps its decision", async () => {
    rt = await startTestRuntime();
    const id = await pendingCall(rt);
    const reviewer = await createTestUser(rt.runtime, "rita", ["reviewer"]);
    await rt.runtime.broker.approve(reviewer.user.name, id);
    expect(await codeOf(() => rt?.runtime.broker.withdraw(agent, id))).toBe("already_decided");
    await waitForCallStatus(rt.runtime, id, "succeeded");
    expect(rt.demoRuns()).toBe(1);
  });
});
