import { and, eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import type { CallView } from "@/lib/api-types";
import {
  ADD_NOTE,
  bodyOf,
  callStatus,
  createAgentToken,
  createTestUser,
  enableTool,
  LIST_NOTES,
  request,
  type TestRuntime,
  waitForCallStatus,
} from "@/test/support/runtime";
import { getToolRow, setToolStatus, syncServerTools } from "../catalogue/catalogue";
import { auditEvents, calls } from "../store/schema";
import {
  addNote,
  approve,
  auditActions,
  callRow,
  deny,
  type ErrorBody,
  getCall,
  people,
  runtimes,
} from "./call-fixtures";

const { start } = runtimes();

describe("the confirm flow", () => {
  it("a read-only tool runs at once and answers 200 with its result", async () => {
    const rt = await start();
    const { agent } = await people(rt);
    const res = await request("POST", "/api/calls", {
      bearer: agent,
      body: { tool: LIST_NOTES, arguments: {} },
    });
    expect(res.status).toBe(200);
    const call = await bodyOf<CallView>(res);
    expect(call.status).toBe("succeeded");
    expect(call.destructive).toBe(false);
    expect(call.result).toMatchObject({ content: [{ type: "text", text: "The notebook is empty." }] });
    expect(await auditActions(rt, call.id)).toEqual(["call.started", "call.succeeded"]);
  });

  it("the answers to a read-only and a destructive call are the calls as stored", async () => {
    const rt = await start();
    const { agent } = await people(rt);
    // Both answers are built from what was written, not read back: they must match a read.
    const read = await bodyOf<CallView>(
      await request("POST", "/api/calls", { bearer: agent, body: { tool: LIST_NOTES, arguments: {} } }),
    );
    const pending = await addNote(agent, "as stored");
    for (const answered of [read, pending]) {
      const stored = await bodyOf<CallView>(await getCall(answered.id, { bearer: agent }));
      expect(answered).toEqual(stored);
    }
  });

  it("a destructive tool becomes pending (202) and the server runs nothing", async () => {
    const rt = await start();
    const { agent } = await people(rt);
    const call = await addNote(agent);
    expect(call.destructive).toBe(true);
    expect(call.arguments).toEqual({ text: "hello" });
    expect(call.requester).toEqual({ kind: "agent", name: "agent-a" });
    expect(await callStatus(rt.runtime, call.id)).toBe("pending");
    expect(rt.demoRuns()).toBe(0);
  });

  it("approval moves pending → running → succeeded and the tool runs once", async () => {
    const rt = await start();
    const { agent, alice } = await people(rt);
    const call = await addNote(agent, "approved note");
    const res = await approve(call.id, alice.cookie);
    expect(res.status).toBe(200);
    const { call: approved } = await bodyOf<{ call: CallView }>(res);
    expect(approved.status).toBe("running");
    expect(approved.decidedBy).toBe("alice");
    await waitForCallStatus(rt.runtime, call.id, "succeeded");
    const done = await bodyOf<CallView>(await getCall(call.id, { bearer: agent }));
    expect(done.status).toBe("succeeded");
    expect(done.result).toMatchObject({ content: [{ type: "text", text: "Added note 1: approved note" }] });
    expect(rt.demoRuns()).toBe(1);
    expect(await auditActions(rt, call.id)).toEqual(["call.pending", "call.approved", "call.succeeded"]);
  });

  it("two reviewers approving at once run the call once: one wins, the other gets already_decided", async () => {
    const rt = await start();
    const { agent, alice, bob } = await people(rt);
    const call = await addNote(agent);
    const [a, b] = await Promise.all([approve(call.id, alice.cookie), approve(call.id, bob.cookie)]);
    const statuses = [a.status, b.status].sort();
    expect(statuses).toEqual([200, 409]);
    const loser = a.status === 409 ? a : b;
    expect((await bodyOf<ErrorBody>(loser)).error.code).toBe("already_decided");
    await waitForCallStatus(rt.runtime, call.id, "succeeded");
    expect(rt.demoRuns()).toBe(1);
    expect((await auditActions(rt, call.id)).filter((x) => x === "call.approved")).toHaveLength(1);
  });

  it("approve racing deny: exactly one decision wins and the outcome matches it", async () => {
    const rt = await start();
    const { agent, alice, bob } = await people(rt);
    const call = await addNote(agent);
    const [a, d] = await Promise.all([approve(call.id, alice.cookie), deny(call.id, bob.cookie, "no")]);
    expect([a.status, d.status].sort()).toEqual([200, 409]);
    const loser = a.status === 409 ? a : d;
    expect((await bodyOf<ErrorBody>(loser)).error.code).toBe("already_decided");
    if (a.status === 200) {
      await waitForCallStatus(rt.runtime, call.id, "succeeded");
      expect(rt.demoRuns()).toBe(1);
    } else {
      expect(await callStatus(rt.runtime, call.id)).toBe("denied");
      expect(rt.demoRuns()).toBe(0);
    }
  });

  it("denial with a reason is final, stores the reason and runs nothing", async () => {
    const rt = await start();
    const { agent, alice, bob } = await people(rt);
    const call = await addNote(agent);
    const res = await deny(call.id, alice.cookie, "not today");
    expect(res.status).toBe(200);
    const { call: denied } = await bodyOf<{ call: CallView }>(res);
    expect(denied).toMatchObject({ status: "denied", reason: "not today", decidedBy: "alice" });
    expect(await callRow(rt, call.id)).toMatchObject({ status: "denied", reason: "not today" });
    const again = await approve(call.id, bob.cookie);
    expect(again.status).toBe(409);
    expect((await bodyOf<ErrorBody>(again)).error.code).toBe("already_decided");
    expect(rt.demoRuns()).toBe(0);
    expect(await auditActions(rt, call.id)).toEqual(["call.pending", "call.denied"]);
  });

  it("a denial without a reason is refused and the call stays pending", async () => {
    const rt = await start();
    const { agent, alice } = await people(rt);
    const call = await addNote(agent);
    const res = await deny(call.id, alice.cookie, "   ");
    expect(res.status).toBe(400);
    expect((await bodyOf<ErrorBody>(res)).error.code).toBe("invalid_body");
    expect(await callStatus(rt.runtime, call.id)).toBe("pending");
  });

  it("a pending call expires after expireAfterSeconds, and approving it afterwards is already_decided", async () => {
    const rt = await start({ approvals: { expireAfterSeconds: 1 } });
    const { agent, alice } = await people(rt);
    const call = await addNote(agent);
    await waitForCallStatus(rt.runtime, call.id, "expired");
    const res = await approve(call.id, alice.cookie);
    expect(res.status).toBe(409);
    expect((await bodyOf<ErrorBody>(res)).error.code).toBe("already_decided");
    expect(await callStatus(rt.runtime, call.id)).toBe("expired");
    expect(rt.demoRuns()).toBe(0);
    expect(await auditActions(rt, call.id)).toEqual(["call.pending", "call.expired"]);
  });
});

describe("approval binds to the tool as it was requested", () => {
  it("approval is refused when the tool's definition changed since the request, and nothing runs", async () => {
    const rt = await start();
    const { agent, alice } = await people(rt);
    const call = await addNote(agent);
    // The server re-lists add_note with a different description (as a refresh would record it).
    const demo = rt.runtime.config.servers.find((s) => s.name === "demo");
    if (!demo) throw new Error("no demo server in the config");
    const row = await getToolRow(rt.runtime.db, ADD_NOTE);
    const def = JSON.parse(row?.definition ?? "{}");
    const listRow = await getToolRow(rt.runtime.db, LIST_NOTES);
    await syncServerTools(
      rt.runtime.db,
      demo,
      [
        { ...def, description: "Add a note, and also mail it to everyone." },
        JSON.parse(listRow?.definition ?? "{}"),
      ],
      { descriptionMaxChars: 1024 },
    );
    const res = await approve(call.id, alice.cookie);
    expect(res.status).toBe(409);
    expect((await bodyOf<ErrorBody>(res)).error.code).toBe("tool_changed");
    expect(await callRow(rt, call.id)).toMatchObject({ status: "refused", errorCode: "tool_changed" });
    expect(rt.demoRuns()).toBe(0);
  });

  it("approval is refused when the tool was disabled since the request, and nothing runs", async () => {
    const rt = await start();
    const { agent, alice } = await people(rt);
    const call = await addNote(agent);
    await setToolStatus(rt.runtime.db, { localName: ADD_NOTE, status: "disabled", actor: "owner" });
    const res = await approve(call.id, alice.cookie);
    expect(res.status).toBe(409);
    expect(await callStatus(rt.runtime, call.id)).toBe("refused");
    expect(rt.demoRuns()).toBe(0);
  });
});

describe("self-approval", () => {
  it("an owner who requested a call cannot approve it (403 self_approval)", async () => {
    const rt = await start();
    await enableTool(rt.runtime, ADD_NOTE);
    const owner = await createTestUser(rt.runtime, "olga", ["owner"]);
    const res = await request("POST", "/api/calls", {
      cookie: owner.cookie,
      body: { tool: ADD_NOTE, arguments: { text: "mine" } },
    });
    expect(res.status).toBe(202);
    const call = await bodyOf<CallView>(res);
    expect(call.requester).toEqual({ kind: "user", name: "olga" });
    const self = await approve(call.id, owner.cookie);
    expect(self.status).toBe(403);
    expect((await bodyOf<ErrorBody>(self)).error.code).toBe("self_approval");
    expect(await callStatus(rt.runtime, call.id)).toBe("pending");
    expect(rt.demoRuns()).toBe(0);
  });

  it("with approvals.selfApproval true an owner may approve their own call", async () => {
    const rt = await start({ approvals: { selfApproval: true } });
    await enableTool(rt.runtime, ADD_NOTE);
    const owner = await createTestUser(rt.runtime, "olga", ["owner"]);
    const res = await request("POST", "/api/calls", {
      cookie: owner.cookie,
      body: { tool: ADD_NOTE, arguments: { text: "mine" } },
    });
    const call = await bodyOf<CallView>(res);
    const self = await approve(call.id, owner.cookie);
    expect(self.status).toBe(200);
    await waitForCallStatus(rt.runtime, call.id, "succeeded");
    expect(rt.demoRuns()).toBe(1);
  });
});

describe("refusals are recorded and nothing is sent", () => {
  async function expectRefused(
    rt: TestRuntime,
    res: Response,
    status: number,
    code: string,
  ): Promise<string> {
    expect(res.status).toBe(status);
    const body = await bodyOf<ErrorBody>(res);
    expect(body.error.code).toBe(code);
    const rows = await rt.runtime.db.select().from(calls).where(eq(calls.status, "refused"));
    expect(rows).toHaveLength(1);
    const row = rows[0];
    expect(row).toMatchObject({ errorCode: code, requesterName: "agent-a" });
    const audit = await rt.runtime.db
      .select()
      .from(auditEvents)
      .where(and(eq(auditEvents.action, "call.refused"), eq(auditEvents.callId, row?.id ?? "")));
    expect(audit).toHaveLength(1);
    expect(rt.demoRuns()).toBe(0);
    return body.error.message;
  }

  it("a tool that is not enabled is refused (409 tool_not_enabled)", async () => {
    const rt = await start();
    const agent = await createAgentToken(rt.runtime, "agent-a");
    const res = await request("POST", "/api/calls", {
      bearer: agent,
      body: { tool: ADD_NOTE, arguments: { text: "x" } },
    });
    await expectRefused(rt, res, 409, "tool_not_enabled");
  });

  it("an unknown tool is refused (404 tool_not_found)", async () => {
    const rt = await start();
    const agent = await createAgentToken(rt.runtime, "agent-a");
    const res = await request("POST", "/api/calls", {
      bearer: agent,
      body: { tool: "demo_rm_rf", arguments: {} },
    });
    const message = await expectRefused(rt, res, 404, "tool_not_found");
    expect(message).toContain("demo_rm_rf");
  });

  it("arguments of the wrong type are refused with 422 invalid_arguments naming the field", async () => {
    const rt = await start();
    const { agent } = await people(rt);
    const res = await request("POST", "/api/calls", {
      bearer: agent,
      body: { tool: ADD_NOTE, arguments: { text: 5 } },
    });
    const message = await expectRefused(rt, res, 422, "invalid_arguments");
    expect(message).toContain("arguments.text");
  });

  it("a missing required argument is refused with 422 invalid_arguments naming the field", async () => {
    const rt = await start();
    const { agent } = await people(rt);
    const res = await request("POST", "/api/calls", {
      bearer: agent,
      body: { tool: ADD_NOTE, arguments: {} },
    });
    const message = await expectRefused(rt, res, 422, "invalid_arguments");
    expect(message).toContain("text");
  });
});

describe("waiting for the outcome", () => {
  it("a long-poll GET /api/calls/:id?wait=10 is woken by the approval and returns succeeded", async () => {
    const rt = await start();
    const { agent, alice } = await people(rt);
    const call = await addNote(agent);
    const started = Date.now();
    const poll = getCall(call.id, { bearer: agent }, 10);
    const approved = await approve(call.id, alice.cookie);
    expect(approved.status).toBe(200);
    const res = await poll;
    const elapsed = Date.now() - started;
    expect(res.status).toBe(200);
    expect((await bodyOf<CallView>(res)).status).toBe("succeeded");
    // Woken by the decision, not by the 10 s deadline.
    expect(elapsed).toBeLessThan(5000);
    expect(rt.demoRuns()).toBe(1);
  });

  it("a wait whose signal was aborted before it began returns at once instead of holding", async () => {
    const rt = await start();
    const { agent } = await people(rt);
    const call = await addNote(agent);
    // Asked for 30 s, within the test's 5 s timeout only if nothing is waited on.
    const view = await rt.runtime.broker.wait(call.id, 30, AbortSignal.abort());
    expect(view.status).toBe("pending");
  });

  it("a long-poll on a call nobody decides returns it still pending when the wait is over", async () => {
    const rt = await start();
    const { agent } = await people(rt);
    const call = await addNote(agent);
    const res = await getCall(call.id, { bearer: agent }, 1);
    expect(res.status).toBe(200);
    expect((await bodyOf<CallView>(res)).status).toBe("pending");
  });
});
