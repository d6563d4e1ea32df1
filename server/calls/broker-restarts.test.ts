/**
 * The call state machine across restarts of an in-process runtime, and who may see which call.
 */
import path from "node:path";
import { asc, eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import type { CallView } from "@/lib/api-types";
import {
  bodyOf,
  callStatus,
  createAgentToken,
  REPO_ROOT,
  request,
  startTestRuntime,
  waitForCallStatus,
  waitForEvent,
} from "@/test/support/runtime";
import { getToolRow, updateTool } from "../catalogue/catalogue";
import { first as firstRow } from "../store/db";
import { auditEvents, calls } from "../store/schema";
import {
  addNote,
  approve,
  auditActions,
  callRow,
  type ErrorBody,
  getCall,
  onStoreOf,
  people,
  runtimes,
  sameStore,
} from "./call-fixtures";

const { start, extra } = runtimes();

describe("restarts", () => {
  it("a pending call survives a restart and approving it afterwards runs it once", async () => {
    const first = await startTestRuntime();
    extra.push(first);
    const { agent, alice } = await people(first);
    const call = await addNote(agent);
    await first.stop({ keepDir: true });

    const second = await start(sameStore(first));
    expect(await callStatus(second.runtime, call.id)).toBe("pending");
    const seen = await getCall(call.id, { bearer: agent });
    expect((await bodyOf<CallView>(seen)).status).toBe("pending");
    const res = await approve(call.id, alice.cookie);
    expect(res.status).toBe(200);
    await waitForCallStatus(second.runtime, call.id, "succeeded");
    expect(second.demoRuns()).toBe(1);
  });

  it("a read-only call cut short by shutdown is stored failed, with its audit row, not left running", async () => {
    const first = await startTestRuntime({
      servers: {
        silent: {
          command: process.execPath,
          args: [path.join(REPO_ROOT, "test", "fixtures", "servers", "silent.mjs")],
          enabled: true,
        },
      },
    });
    extra.push(first);
    const db = first.runtime.db;
    const listed = async () => (await getToolRow(db, "silent_hang")) !== null;
    await waitForEvent(first.runtime.bus, listed, {
      already: listed,
      what: () => "the silent server's tool",
    });
    // The tool never answers; vouched read-only, its call runs at once and stays in flight.
    await updateTool(db, { localName: "silent_hang", actor: "owner", status: "enabled", vouch: true });
    const answer = first.runtime.broker.request(
      { kind: "agent", name: "agent-a" },
      { tool: "silent_hang", arguments: {} },
    );
    // The start is committed at a turn of the event loop once the call is decided (group commit),
    // the tool asked right after; no event tells of a start, so the turns are counted.
    // (On PostgreSQL each write is committed at once, and a few turns go by waiting for it.)
    for (let turn = 0; turn < 1000 && !(await firstRow(db.select().from(calls))); turn++) {
      await new Promise((resolve) => setImmediate(resolve));
    }
    const started = (await firstRow(db.select().from(calls))) as { id: string };
    expect(await callStatus(first.runtime, started.id)).toBe("running");
    await first.stop({ keepDir: true });
    await answer.catch(() => undefined);

    // The outcome of a call failed by the shutdown itself is written before the store closes.
    const { rows, actions } = await onStoreOf(first, async (store) => {
      const found = await store
        .select({ id: calls.id, status: calls.status })
        .from(calls)
        .where(eq(calls.tool, "silent_hang"));
      const audit = await store
        .select({ action: auditEvents.action })
        .from(auditEvents)
        .where(eq(auditEvents.callId, found[0]?.id ?? ""))
        .orderBy(asc(auditEvents.id));
      return { rows: found, actions: audit };
    });
    expect(rows.map((r) => r.status)).toEqual(["failed"]);
    expect(actions.map((a) => a.action)).toEqual(["call.started", "call.failed"]);
  });

  it("a call left running by a crash becomes interrupted on start and is never run", async () => {
    const first = await startTestRuntime();
    extra.push(first);
    const { agent, alice } = await people(first);
    const call = await addNote(agent);
    await first.stop({ keepDir: true });
    // Simulate a crash in the middle of the run: the row says running, nothing finished it.
    await onStoreOf(first, async (store) => {
      await store
        .update(calls)
        .set({ status: "running", startedAt: new Date().toISOString() })
        .where(eq(calls.id, call.id));
    });

    const second = await start(sameStore(first));
    expect(await callRow(second, call.id)).toMatchObject({ status: "interrupted", errorCode: "interrupted" });
    expect(await auditActions(second, call.id)).toContain("call.interrupted");
    const res = await approve(call.id, alice.cookie);
    expect(res.status).toBe(409);
    expect((await bodyOf<ErrorBody>(res)).error.code).toBe("already_decided");
    expect(second.demoRuns()).toBe(0);
  });
});

describe("who sees which call", () => {
  it("an agent sees its own calls, and another token's call answers 404", async () => {
    const rt = await start();
    const { agent, alice } = await people(rt);
    const other = await createAgentToken(rt.runtime, "agent-b");
    const call = await addNote(agent);

    const foreign = await getCall(call.id, { bearer: other });
    expect(foreign.status).toBe(404);
    expect((await bodyOf<ErrorBody>(foreign)).error.code).toBe("call_not_found");
    const list = await bodyOf<{ calls: CallView[] }>(await request("GET", "/api/calls", { bearer: other }));
    expect(list.calls.map((c) => c.id)).not.toContain(call.id);

    expect((await getCall(call.id, { bearer: agent })).status).toBe(200);
    const own = await bodyOf<{ calls: CallView[] }>(await request("GET", "/api/calls", { bearer: agent }));
    expect(own.calls.map((c) => c.id)).toEqual([call.id]);
    expect((await getCall(call.id, { cookie: alice.cookie })).status).toBe(200);
  });

  it("the approval publishes running and then the final status on the bus", async () => {
    const rt = await start();
    const { agent, alice } = await people(rt);
    const call = await addNote(agent);
    const running = waitForEvent(
      rt.runtime.bus,
      (e) => e.type === "call" && e.id === call.id && e.status === "running",
    );
    await approve(call.id, alice.cookie);
    await expect(running).resolves.toEqual({ type: "call", id: call.id, status: "running" });
    await waitForCallStatus(rt.runtime, call.id, "succeeded");
  });
});
