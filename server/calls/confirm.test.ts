/**
 * The confirm flow in depth: approval bound to what was seen, "already decided" that says how,
 * expiry the waiting agent can see, the reviewer's context (why approval, the tool's
 * description), the owner's settings, and the audit trail of each call's life. A real runtime with real fixture servers that count their runs; requests go through the real
 * route modules.
 */
import { eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import type { CallsPage, CallView } from "@/lib/api-types";
import {
  ADD_NOTE,
  bodyOf,
  callStatus,
  createTestUser,
  enableTool,
  LIST_NOTES,
  request,
  waitForCallStatus,
} from "@/test/support/runtime";
import { getToolRow } from "../catalogue/catalogue";
import { first } from "../store/db";
import { calls } from "../store/schema";
import {
  announceChange,
  approve,
  auditRows,
  call,
  type ErrorBody,
  onStoreOf,
  agentAndReviewers as people,
  runtimes,
  startWithMutable as startMutable,
  story,
  WRITE,
  writeFileTool,
} from "./call-fixtures";

const { start } = runtimes();
const startWithMutable = (tools?: object[]) => startMutable(start, tools);

describe("approval is bound to the definition and arguments seen at request time", () => {
  it("approving after the server changed the tool's definition is refused, the call is marked refused, and nothing runs", async () => {
    const m = await startWithMutable();
    const { rt } = m;
    await enableTool(rt.runtime, WRITE);
    const { agent, alice } = await people(rt);
    const pending = await call(agent, WRITE, { path: "/etc/motd" });
    expect(pending.status).toBe("pending");

    // The server now describes the same tool differently, and says so.
    m.setTools([writeFileTool({ description: "Writes a file, and also uploads it somewhere." })]);
    await announceChange(rt, WRITE);

    // Reviewers are told before they click.
    const listed = await bodyOf<CallsPage>(
      await request("GET", "/api/calls?status=pending", { cookie: alice.cookie }),
    );
    expect(listed.calls.find((c) => c.id === pending.id)?.toolChanged).toBe(true);

    const res = await approve(pending.id, alice.cookie);
    expect(res.status).toBe(409);
    const body = await bodyOf<ErrorBody>(res);
    expect(body.error.code).toBe("tool_changed");
    expect(body.error.message).toMatch(/definition changed since the call was requested/);
    expect(await first(rt.runtime.db.select().from(calls).where(eq(calls.id, pending.id)))).toMatchObject({
      status: "refused",
      errorCode: "tool_changed",
      decidedBy: "alice",
    });
    const rows = await auditRows(rt, pending.id);
    expect(rows.map((r) => [r.action, r.actor])).toEqual([
      ["call.pending", "agent-a"],
      ["call.refused", "alice"],
    ]);
    expect(rows[1]?.detail).toMatch(/^approval refused: /);
    expect(m.runs("write_file")).toBe(0);
  });

  it("a call whose stored arguments no longer match their digest cannot be approved, and nothing runs", async () => {
    const m = await startWithMutable();
    const { rt } = m;
    await enableTool(rt.runtime, WRITE);
    const { agent, alice } = await people(rt);
    const pending = await call(agent, WRITE, { path: "/tmp/harmless" });
    // Someone with access to the store swaps the arguments after the reviewer read them.
    await onStoreOf(rt, async (store) => {
      await store
        .update(calls)
        .set({ arguments: JSON.stringify({ path: "/etc/passwd" }) })
        .where(eq(calls.id, pending.id));
    });

    const res = await approve(pending.id, alice.cookie);
    expect(res.status).toBe(409);
    expect((await bodyOf<ErrorBody>(res)).error.code).toBe("arguments_changed");
    expect(await callStatus(rt.runtime, pending.id)).toBe("refused");
    expect(m.runs("write_file")).toBe(0);
  });

  it("the same definition listed again after a refresh does not block approval", async () => {
    const m = await startWithMutable();
    const { rt } = m;
    await enableTool(rt.runtime, WRITE);
    const { agent, alice } = await people(rt);
    const pending = await call(agent, WRITE, { path: "/tmp/x" });
    // A refresh that lists the same tools changes nothing.
    await rt.runtime.manager.get("mut").refreshTools();
    const res = await approve(pending.id, alice.cookie);
    expect(res.status).toBe(200);
    await waitForCallStatus(rt.runtime, pending.id, "succeeded");
    expect(m.runs("write_file")).toBe(1);
  });
});

describe("already decided says how", () => {
  it("the losing approver learns who approved first", async () => {
    const t = await start();
    await enableTool(t.runtime, ADD_NOTE);
    const { agent, alice, bob } = await people(t);
    const pending = await call(agent, ADD_NOTE, { text: "once" });
    expect((await approve(pending.id, alice.cookie)).status).toBe(200);
    const late = await approve(pending.id, bob.cookie);
    expect(late.status).toBe(409);
    expect((await bodyOf<ErrorBody>(late)).error).toEqual({
      code: "already_decided",
      message: "Already decided: alice approved it.",
    });
    await waitForCallStatus(t.runtime, pending.id, "succeeded");
    expect(t.demoRuns()).toBe(1);
  });

  it("a denial racing expiry loses once the deadline has passed, even before the expiry timer runs", async () => {
    const t = await start();
    await enableTool(t.runtime, ADD_NOTE);
    const { agent, alice } = await people(t);
    const pending = await call(agent, ADD_NOTE, { text: "late" });
    await t.runtime.db
      .update(calls)
      .set({ expiresAt: new Date(Date.now() - 1000).toISOString() })
      .where(eq(calls.id, pending.id));
    const res = await request("POST", `/api/calls/${pending.id}/deny`, {
      cookie: alice.cookie,
      body: { reason: "too late" },
    });
    expect(res.status).toBe(409);
    expect((await bodyOf<ErrorBody>(res)).error.message).toBe(
      "Already decided: it expired before anyone decided.",
    );
    expect(await callStatus(t.runtime, pending.id)).toBe("expired");
  });
});

describe("expiry is visible to the waiting agent", () => {
  it("an agent long-polling a call that expires is woken with status expired", async () => {
    const t = await start({ approvals: { expireAfterSeconds: 1 } });
    await enableTool(t.runtime, ADD_NOTE);
    const { agent } = await people(t);
    const pending = await call(agent, ADD_NOTE, { text: "nobody looks" });
    expect(pending.expiresAt).not.toBeNull();
    const started = Date.now();
    const res = await request("GET", `/api/calls/${pending.id}?wait=30`, { bearer: agent });
    expect(res.status).toBe(200);
    const seen = await bodyOf<CallView>(res);
    expect(seen.status).toBe("expired");
    expect(seen.finishedAt).not.toBeNull();
    // Woken by the expiry, not by the 30 s deadline.
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(t.demoRuns()).toBe(0);
  });
});

describe("reviewers see why a call needs approval", () => {
  it("a pending call carries the approval reason from the annotations and the tool's description", async () => {
    const m = await startWithMutable([
      writeFileTool(),
      writeFileTool({
        name: "drop_table",
        description: "Drops a table.",
        annotations: { destructiveHint: true },
      }),
      writeFileTool({ name: "send_mail", description: "Sends mail.", annotations: { readOnlyHint: false } }),
    ]);
    const { rt } = m;
    for (const name of [WRITE, "mut_drop_table", "mut_send_mail"]) await enableTool(rt.runtime, name);
    await enableTool(rt.runtime, ADD_NOTE);
    const { agent } = await people(rt);
    const reasons = {
      [WRITE]: "no readOnlyHint",
      mut_drop_table: "destructiveHint: true",
      mut_send_mail: "readOnlyHint: false",
    };
    for (const [tool, reason] of Object.entries(reasons)) {
      const pending = await call(agent, tool, { path: "x" });
      expect(pending.approvalReason).toBe(reason);
      expect(await callStatus(rt.runtime, pending.id)).toBe("pending");
    }
    const note = await call(agent, ADD_NOTE, { text: "hi" });
    expect(note).toMatchObject({
      approvalReason: "no readOnlyHint",
      toolDescription: "Add a note to the demo notebook.",
      toolChanged: false,
    });
    await enableTool(rt.runtime, LIST_NOTES);
    const read = await call(agent, LIST_NOTES, {}, 200);
    expect(read.approvalReason).toBeNull();
  });
});

describe("the owner's settings decide what waits (the catalogue's approval need)", () => {
  it("Always confirm makes a read-only tool's call wait, and a vouch lets an unannotated tool run at once", async () => {
    const t = await start();
    await enableTool(t.runtime, LIST_NOTES);
    await enableTool(t.runtime, ADD_NOTE);
    const { agent } = await people(t);
    const owner = await createTestUser(t.runtime, "olga", ["owner"]);
    const patch = (tool: string, body: object) =>
      request("PATCH", `/api/catalogue/${tool}`, { cookie: owner.cookie, body });

    expect((await patch(LIST_NOTES, { alwaysConfirm: true })).status).toBe(200);
    const read = await call(agent, LIST_NOTES, {});
    expect(read).toMatchObject({ status: "pending", approvalReason: "owner requires confirmation" });

    const expectedHash = (await getToolRow(t.runtime.db, ADD_NOTE))?.definitionHash;
    expect((await patch(ADD_NOTE, { vouch: true, expectedHash })).status).toBe(200);
    const write = await call(agent, ADD_NOTE, { text: "vouched" }, 200);
    expect(write).toMatchObject({ status: "succeeded", approvalReason: null, destructive: false });
    expect(t.demoRuns()).toBe(1);
  });
});

describe("every attempt is in the audit log, with who, when and how long", () => {
  it("an approved call's life: pending (requester, reason), approved (reviewer, wait), succeeded (run time)", async () => {
    const t = await start();
    await enableTool(t.runtime, ADD_NOTE);
    const { agent, alice } = await people(t);
    const pending = await call(agent, ADD_NOTE, { text: "audited" });
    await approve(pending.id, alice.cookie);
    await waitForCallStatus(t.runtime, pending.id, "succeeded");
    const rows = await auditRows(t, pending.id);
    expect(
      rows.map((r) => ({ action: r.action, actor: r.actor, subject: r.subject, detail: r.detail })),
    ).toEqual([
      { action: "call.pending", actor: "agent-a", subject: ADD_NOTE, detail: "no readOnlyHint" },
      { action: "call.approved", actor: "alice", subject: ADD_NOTE, detail: null },
      { action: "call.succeeded", actor: "agent-a", subject: ADD_NOTE, detail: null },
    ]);
    expect(rows[0]?.durationMs).toBeNull();
    expect(rows[1]?.durationMs).toEqual(expect.any(Number));
    expect(rows[2]?.durationMs).toEqual(expect.any(Number));
    for (const r of rows) expect(Date.parse(r.at)).not.toBeNaN();

    const s = await story(pending.id, alice.cookie);
    expect(s.call).toMatchObject({ id: pending.id, status: "succeeded", decidedBy: "alice" });
    expect(s.call.durationMs).toEqual(expect.any(Number));
    expect(s.audit.map((a) => a.action)).toEqual(["call.pending", "call.approved", "call.succeeded"]);
    expect(s.audit[2]?.durationMs).toBe(rows[2]?.durationMs);
  });

  it("a read-only call's life: started and succeeded, with its run time", async () => {
    const t = await start();
    await enableTool(t.runtime, LIST_NOTES);
    const { agent } = await people(t);
    const done = await call(agent, LIST_NOTES, {}, 200);
    const rows = await auditRows(t, done.id);
    expect(rows.map((r) => [r.action, r.actor, r.detail])).toEqual([
      ["call.started", "agent-a", "read-only"],
      ["call.succeeded", "agent-a", null],
    ]);
    expect(rows[1]?.durationMs).toEqual(expect.any(Number));
    expect(done.durationMs).toEqual(expect.any(Number));
  });

  it("a call whose tool reports an error: pending, approved, failed with the error and run time", async () => {
    const m = await startWithMutable();
    await enableTool(m.rt.runtime, WRITE);
    const { agent, alice } = await people(m.rt);
    const pending = await call(agent, WRITE, { path: "x", fail: true });
    await approve(pending.id, alice.cookie);
    await waitForCallStatus(m.rt.runtime, pending.id, "failed");
    const rows = await auditRows(m.rt, pending.id);
    expect(rows.map((r) => r.action)).toEqual(["call.pending", "call.approved", "call.failed"]);
    expect(rows[2]).toMatchObject({ actor: "agent-a", detail: "the tool reported an error" });
    expect(rows[2]?.durationMs).toEqual(expect.any(Number));
    expect(m.runs("write_file")).toBe(1);
  });

  it("a denied call's life: pending, then denied by the reviewer with the reason and the wait", async () => {
    const t = await start();
    await enableTool(t.runtime, ADD_NOTE);
    const { agent, alice } = await people(t);
    const pending = await call(agent, ADD_NOTE, { text: "no" });
    await request("POST", `/api/calls/${pending.id}/deny`, {
      cookie: alice.cookie,
      body: { reason: "not now" },
    });
    const rows = await auditRows(t, pending.id);
    expect(rows.map((r) => [r.action, r.actor, r.detail])).toEqual([
      ["call.pending", "agent-a", "no readOnlyHint"],
      ["call.denied", "alice", "not now"],
    ]);
    expect(rows[1]?.durationMs).toEqual(expect.any(Number));
  });

  it("an expired call's life: pending, then expired by gatehouse after waiting its whole deadline", async () => {
    const t = await start({ approvals: { expireAfterSeconds: 1 } });
    await enableTool(t.runtime, ADD_NOTE);
    const { agent } = await people(t);
    const pending = await call(agent, ADD_NOTE, { text: "ignored" });
    await waitForCallStatus(t.runtime, pending.id, "expired");
    const rows = await auditRows(t, pending.id);
    expect(rows.map((r) => [r.action, r.actor])).toEqual([
      ["call.pending", "agent-a"],
      ["call.expired", "gatehouse"],
    ]);
    expect(rows[1]?.durationMs ?? 0).toBeGreaterThanOrEqual(900);
  });

  it("a refused attempt's life is one row with the requester and the reason", async () => {
    const t = await start();
    const { agent, alice } = await people(t);
    const res = await request("POST", "/api/calls", {
      bearer: agent,
      body: { tool: ADD_NOTE, arguments: {} },
    });
    expect(res.status).toBe(409);
    const refused = await first(t.runtime.db.select().from(calls).where(eq(calls.status, "refused")));
    if (!refused) throw new Error("the refusal was not recorded");
    const s = await story(refused.id, alice.cookie);
    expect(s.call).toMatchObject({ status: "refused", requester: { kind: "agent", name: "agent-a" } });
    expect(s.audit.map((a) => [a.action, a.actor, a.detail])).toEqual([
      ["call.refused", "agent-a", `tool_not_enabled: ${ADD_NOTE} is not enabled`],
    ]);
  });
});
