import { eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import type { CallView } from "@/lib/api-types";
import { ADD_NOTE, bodyOf, LIST_NOTES, request, waitForCallStatus } from "@/test/support/runtime";
import { setToolStatus, updateTool } from "../catalogue/catalogue";
import { notificationDeliveries, tools } from "../store/schema";
import { addNote, auditRows, call, callRow, type ErrorBody, people, runtimes } from "./call-fixtures";

const { start } = runtimes();

const notesRules = [
  {
    name: "no-drop",
    tools: ["demo_*"],
    when: "has(args.text) && args.text.matches('(?i)\\\\bdrop\\\\b')",
    decision: "deny",
    reason: "DROP never goes through Gatehouse",
  },
  { name: "todo-notes", tools: [ADD_NOTE], when: "args.text.startsWith('todo:')", decision: "allow" },
  { name: "broken-allow", tools: [ADD_NOTE], when: "args.missing == 'x'", decision: "allow" },
];

describe("rules decide calls", () => {
  it("an allow rule runs a destructive call at once, and its row and audit row name the rule", async () => {
    const rt = await start({ config: { rules: notesRules } });
    const { agent } = await people(rt);
    const ran = await call(agent, ADD_NOTE, { text: "todo: buy milk" }, 200);
    expect(ran.status).toBe("succeeded");
    expect(ran.rule).toBe("todo-notes");
    expect(rt.demoRuns()).toBe(1);
    const started = (await auditRows(rt, ran.id)).find((a) => a.action === "call.started");
    expect(started?.detail).toBe('allowed by rule "todo-notes"');
  });

  it("a deny rule refuses the call with its reason, sends nothing, and names the rule", async () => {
    const rt = await start({ config: { rules: notesRules } });
    const { agent } = await people(rt);
    const res = await request("POST", "/api/calls", {
      bearer: agent,
      body: { tool: ADD_NOTE, arguments: { text: "please DROP the table" } },
    });
    expect(res.status).toBe(403);
    const body = await bodyOf<ErrorBody>(res);
    expect(body.error.code).toBe("denied_by_rule");
    expect(body.error.message).toBe('denied by rule "no-drop": DROP never goes through Gatehouse');
    expect(rt.demoRuns()).toBe(0);
    const [refused] = await rt.runtime.broker.list({ limit: 1 });
    expect(refused?.status).toBe("refused");
    expect(refused?.rule).toBe("no-drop");
    const audit = await auditRows(rt, refused?.id ?? "");
    expect(audit.map((a) => a.action)).toEqual(["call.refused"]);
    expect(audit[0]?.detail).toContain('rule "no-drop"');
  });

  it("a deny rule applies to a read-only tool too: rules come before the default", async () => {
    const rt = await start({
      config: {
        rules: [{ name: "no-reads-for-agent-a", tools: [LIST_NOTES], agents: ["agent-a"], decision: "deny" }],
      },
    });
    const { agent } = await people(rt);
    const res = await request("POST", "/api/calls", {
      bearer: agent,
      body: { tool: LIST_NOTES, arguments: {} },
    });
    expect(res.status).toBe(403);
    expect((await bodyOf<ErrorBody>(res)).error.message).toContain('rule "no-reads-for-agent-a"');
  });

  it("an allow rule whose condition cannot be evaluated is passed over: the call waits as by default", async () => {
    const rt = await start({ config: { rules: notesRules } });
    const { agent } = await people(rt);
    // "broken-allow" reads args.missing, which this call lacks: failing closed, it never allows.
    const held = await addNote(agent, "an ordinary note");
    expect(held.rule).toBeNull();
    expect(held.approvalReason).toBe("no readOnlyHint");
    expect(rt.demoRuns()).toBe(0);
  });

  it("a deny rule whose condition cannot be evaluated applies (failing closed)", async () => {
    const rt = await start({
      config: { rules: [{ name: "strict", tools: [ADD_NOTE], when: "args.level > 3", decision: "deny" }] },
    });
    const { agent } = await people(rt);
    const res = await request("POST", "/api/calls", {
      bearer: agent,
      body: { tool: ADD_NOTE, arguments: { text: "x" } },
    });
    expect(res.status).toBe(403);
    const [refused] = await rt.runtime.broker.list({ limit: 1 });
    expect((await auditRows(rt, refused?.id ?? ""))[0]?.detail).toMatch(/could not be evaluated/);
  });

  it("a review rule holds a read-only call and says why; the agents filter limits it", async () => {
    const rt = await start({
      config: {
        rules: [
          {
            name: "watch-b",
            tools: ["demo_list_*"],
            agents: ["agent-b"],
            decision: "review",
            reason: "agent-b is new",
          },
        ],
      },
    });
    const { agent } = await people(rt);
    // agent-a is not in the rule's agents: the read-only default runs it.
    expect((await call(agent, LIST_NOTES, {}, 200)).rule).toBeNull();
    const { createAgentToken } = await import("@/test/support/runtime");
    const other = await createAgentToken(rt.runtime, "agent-b");
    const held = await call(other, LIST_NOTES, {}, 202);
    expect(held.rule).toBe("watch-b");
    expect(held.approvalReason).toBe("agent-b is new");
    expect(held.approvalsNeeded).toBe(1);
  });

  it("a tool disabled while its rule is being evaluated is refused, not run", async () => {
    const rt = await start({ config: { rules: notesRules } });
    await people(rt);
    // The request reads the tool, then waits for the rule's worker; the owner acts in between.
    const answer = rt.runtime.broker.request(
      { kind: "agent", name: "agent-a" },
      { tool: ADD_NOTE, arguments: { text: "todo: now" } },
    );
    await setToolStatus(rt.runtime.db, { localName: ADD_NOTE, status: "disabled", actor: "owner" });
    await expect(answer).rejects.toMatchObject({ code: "tool_not_enabled" });
    expect(rt.demoRuns()).toBe(0);
    const [refused] = await rt.runtime.broker.list({ limit: 1 });
    expect(refused).toMatchObject({ status: "refused", rule: null });
  });

  it("a read-only call whose tool an owner set to 'Always confirm' while its rules were evaluated waits", async () => {
    const rt = await start({
      config: {
        rules: [{ name: "huge-lists", tools: [LIST_NOTES], when: "size(args) > 100", decision: "deny" }],
      },
    });
    await people(rt);
    const answer = rt.runtime.broker.request(
      { kind: "agent", name: "agent-a" },
      { tool: LIST_NOTES, arguments: {} },
    );
    await updateTool(rt.runtime.db, { localName: LIST_NOTES, alwaysConfirm: true, actor: "owner" });
    const { httpStatus, call: held } = await answer;
    expect(httpStatus).toBe(202);
    expect(held.approvalReason).toBe("owner requires confirmation");
  });

  it("a tool whose definition changed and was accepted again while its rules were evaluated is refused", async () => {
    const rt = await start({ config: { rules: notesRules } });
    await people(rt);
    // What a refresh and an owner's "Accept change" leave, committed while the real rule set
    // decides (after its verdict, before the call is born): a new definition, pinned.
    const rules = rt.runtime.rules;
    const decide = rules.decide.bind(rules);
    rules.decide = async (input) => {
      const verdict = await decide(input);
      const hash = "f".repeat(64);
      await rt.runtime.db
        .update(tools)
        .set({ definitionHash: hash, pinnedHash: hash })
        .where(eq(tools.localName, ADD_NOTE));
      return verdict;
    };
    const answer = rt.runtime.broker.request(
      { kind: "agent", name: "agent-a" },
      { tool: ADD_NOTE, arguments: { text: "todo: x" } },
    );
    await expect(answer).rejects.toMatchObject({ code: "tool_changed" });
    expect(rt.demoRuns()).toBe(0);
  });

  it("an allow rule passed over for an error is named in the audit row of the call", async () => {
    const rt = await start({ config: { rules: notesRules } });
    const { agent } = await people(rt);
    const held = await addNote(agent, "plain");
    const pending = (await auditRows(rt, held.id)).find((a) => a.action === "call.pending");
    expect(pending?.detail).toMatch(/passed over: rule "broken-allow"/);
  });

  it("webhook events carry approvals, approvalsNeeded and the deciding rule", async () => {
    const rt = await start({
      config: {
        rules: [...notesRules, { name: "pairs", tools: [ADD_NOTE], decision: "review", approvals: 2 }],
        notifications: {
          // Never reached in this test: the payloads are read from the outbox as queued.
          webhooks: [
            {
              name: "ops",
              url: "http://127.0.0.1:9/hook",
              allowPrivate: true,
              events: ["call.pending", "call.decided"],
            },
          ],
        },
      },
    });
    const { agent } = await people(rt);
    const ran = await call(agent, ADD_NOTE, { text: "todo: decided by a rule" }, 200);
    const held = await addNote(agent, "needs two");
    const payloads = (
      await rt.runtime.db
        .select()
        .from(notificationDeliveries)
        .where(eq(notificationDeliveries.target, "ops"))
    ).map((d) => ({
      callId: d.callId,
      event: d.event,
      call: (JSON.parse(d.payload) as { call: Record<string, unknown> }).call,
    }));
    const decided = payloads.find((p) => p.callId === ran.id);
    expect(decided?.event).toBe("call.decided");
    expect(decided?.call).toMatchObject({
      rule: "todo-notes",
      grant: null,
      approvals: 0,
      approvalsNeeded: 1,
    });
    const pending = payloads.find((p) => p.callId === held.id);
    expect(pending?.event).toBe("call.pending");
    expect(pending?.call).toMatchObject({ rule: "pairs", approvals: 0, approvalsNeeded: 2 });
  });

  // That the main thread and other evaluations keep answering while it runs is shown, with a bound
  // generous enough not to depend on the machine's load, in server/rules/evaluator.test.ts.
  it("a hostile condition is stopped by the time bound and fails closed; a call beside it is decided as usual", async () => {
    // Ten to the eighth evaluations: minutes of work without the bound.
    let hostile = "args.text != 'never'";
    for (let i = 0; i < 8; i++) hostile = `[0,1,2,3,4,5,6,7,8,9].all(v${i}, ${hostile})`;
    const rt = await start({
      config: {
        rules: [
          { name: "hostile", tools: [ADD_NOTE], when: hostile, decision: "review", approvals: 2 },
          { name: "reads", tools: [LIST_NOTES], when: "tool == 'demo_list_notes'", decision: "allow" },
        ],
      },
    });
    const { agent } = await people(rt);
    const slow = request("POST", "/api/calls", {
      bearer: agent,
      body: { tool: ADD_NOTE, arguments: { text: "t" } },
    }).then(async (res) => ({ status: res.status, body: await bodyOf<CallView>(res) }));
    const [held, read] = await Promise.all([slow, call(agent, LIST_NOTES, {}, 200)]);
    expect(read.rule).toBe("reads");
    // The review rule's condition overran: it applies (failing closed), so the call waits for two.
    expect(held.status).toBe(202);
    expect(held.body.rule).toBe("hostile");
    expect(held.body.approvalsNeeded).toBe(2);
    const pendingAudit = (await auditRows(rt, held.body.id)).find((a) => a.action === "call.pending");
    expect(pendingAudit?.detail).toMatch(/could not be evaluated/);
    expect(rt.demoRuns()).toBe(0);
    // The next call is decided normally: the bound did not break the evaluator.
    const after = await call(agent, ADD_NOTE, { text: "again" }, 202);
    expect(after.rule).toBe("hostile");
    await waitForCallStatus(rt.runtime, read.id, "succeeded", 5000);
    expect((await callRow(rt, after.id))?.approvalsNeeded).toBe(2);
  });
});
