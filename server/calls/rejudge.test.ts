/**
 * A pending call is judged against the rules as they are now, not as they were when it was held:
 * when it is approved, and at start. Real runtimes and stores, the real rule evaluator; the
 * approval-time judgement is seen through a broker built on a runtime's store with other rules
 * (rules change only with a restart, and the start pass would otherwise get there first).
 */
import { describe, expect, it } from "vitest";
import { ADD_NOTE, startTestRuntime, type TestRuntime, waitForEvent } from "@/test/support/runtime";
import type { RuleConfig } from "../config/types";
import { logger } from "../log";
import { RuleSet } from "../rules";
import { rule } from "../rules/rule-fixtures";
import { CallBroker } from "./broker";
import { addNote, approve, auditRows, callRow, people, runtimes, sameStore } from "./call-fixtures";

const { start, extra } = runtimes();

/** A broker on `rt`'s store and servers that decides with `rules` (its start pass not run). */
function brokerWith(rt: TestRuntime, rules: RuleConfig[]): CallBroker {
  const { db, bus, manager, config } = rt.runtime;
  return new CallBroker({
    db,
    bus,
    log: logger("test"),
    approvals: config.approvals,
    rules: new RuleSet(rules),
    callTool: (server, tool, args, opts) => manager.callTool(server, tool, args, opts),
  });
}

const denyNotes = rule({
  name: "notes-closed",
  tools: [ADD_NOTE],
  decision: "deny",
  reason: "notes are closed",
});
const twoEyes = rule({ name: "two-eyes", tools: [ADD_NOTE], decision: "review", approvals: 2 });

describe("a pending call is judged against the current rules when approved", () => {
  it("a deny rule added since the call was held refuses it at approval, naming the rule, and it never runs", async () => {
    const rt = await start();
    const { agent } = await people(rt);
    const held = await addNote(agent, "queued before the rule");
    const broker = brokerWith(rt, [denyNotes]);
    try {
      await expect(Promise.resolve().then(() => broker.approve("alice", held.id))).rejects.toMatchObject({
        code: "denied_by_rule",
      });
    } finally {
      await broker.stop();
    }
    const row = await callRow(rt, held.id);
    expect(row).toMatchObject({ status: "refused", errorCode: "denied_by_rule", rule: "notes-closed" });
    expect(row?.errorMessage).toContain("notes are closed");
    const refused = (await auditRows(rt, held.id)).find((a) => a.action === "call.refused");
    expect(refused?.detail).toContain('rule "notes-closed"');
    expect(rt.demoRuns()).toBe(0);
  });

  it("a rule raised to two approvals since the call was held keeps it pending at 1 of 2 after one approval", async () => {
    const rt = await start();
    const { agent } = await people(rt);
    const held = await addNote(agent, "queued before the rule");
    const broker = brokerWith(rt, [twoEyes]);
    try {
      await broker.approve("alice", held.id);
      expect(await callRow(rt, held.id)).toMatchObject({
        status: "pending",
        approvalsNeeded: 2,
        rule: "two-eyes",
      });
      const counted = (await auditRows(rt, held.id)).find((a) => a.action === "call.approval");
      expect(counted?.detail).toContain("1 of 2 approvals");
      expect(counted?.detail).toContain('rule "two-eyes"');
      // The second reviewer's approval runs it.
      await broker.approve("bob", held.id);
      expect((await callRow(rt, held.id))?.status).not.toBe("pending");
    } finally {
      await broker.stop();
    }
    expect(rt.demoRuns()).toBe(1);
  });

  it("an allow rule added since the call was held leaves the approval as usual: one approval runs it", async () => {
    const rt = await start();
    const { agent } = await people(rt);
    const held = await addNote(agent, "queued before the rule");
    const broker = brokerWith(rt, [rule({ name: "notes-ok", tools: [ADD_NOTE], decision: "allow" })]);
    try {
      await broker.approve("alice", held.id);
    } finally {
      await broker.stop();
    }
    expect((await callRow(rt, held.id))?.status).toBe("succeeded");
    expect(rt.demoRuns()).toBe(1);
  });
});

describe("pending calls are judged against the current rules at start", () => {
  it("a restart with a deny rule refuses the queued calls it matches, naming it; a raised count is recorded", async () => {
    const first = await startTestRuntime();
    extra.push(first);
    const { agent, alice } = await people(first);
    const dropping = await addNote(agent, "please DROP the table");
    const plain = await addNote(agent, "an ordinary note");
    await first.stop({ keepDir: true });

    // As gatehouse.json says them.
    const rules = [
      {
        name: "no-drop",
        tools: [ADD_NOTE],
        when: "args.text.matches('(?i)\\\\bdrop\\\\b')",
        decision: "deny",
        reason: "DROP never goes through Gatehouse",
      },
      { name: "two-eyes", tools: [ADD_NOTE], decision: "review", approvals: 2 },
    ];
    const second = await start({ ...sameStore(first), config: { rules } });
    const judged = async () =>
      (await callRow(second, dropping.id))?.status === "refused" &&
      (await callRow(second, plain.id))?.approvalsNeeded === 2;
    await waitForEvent(second.runtime.bus, judged, { already: judged, what: () => "the start's judgement" });

    expect(await callRow(second, dropping.id)).toMatchObject({
      errorCode: "denied_by_rule",
      rule: "no-drop",
    });
    const refused = (await auditRows(second, dropping.id)).find((a) => a.action === "call.refused");
    expect(refused?.detail).toContain('rule "no-drop"');
    expect(await callRow(second, plain.id)).toMatchObject({ status: "pending", rule: "two-eyes" });
    const raised = (await auditRows(second, plain.id)).at(-1);
    expect(raised?.detail).toContain('rule "two-eyes"');

    expect((await approve(plain.id, alice.cookie)).status).toBe(200);
    expect(await callRow(second, plain.id)).toMatchObject({ status: "pending" });
    expect(second.demoRuns()).toBe(0);
  });
});
