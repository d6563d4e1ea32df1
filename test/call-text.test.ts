/**
 * The words a new user reads about one call (components/call-text.ts): its audit trail says who
 * requested it and who approved it as such, an outcome says Gatehouse ran it and for how long,
 * a call of an unknown tool has no server to be "on", and the activity list speaks in sentence
 * case. Here rather than beside the module: Vitest runs the tests of server/, lib/ and test/.
 */
import { describe, expect, it } from "vitest";
import {
  approversIn,
  auditStepText,
  auditStepWords,
  decisionText,
  recentDecisionText,
  runTimeText,
  serverOf,
} from "@/components/call-text";
import type { AuditEventView, CallView } from "@/lib/api-types";
import { formatDateTime } from "@/lib/format";

function call(over: Partial<CallView> = {}): CallView {
  return {
    id: "c1",
    tool: "demo_add_note",
    server: "demo",
    status: "pending",
    destructive: true,
    approvalReason: "no readOnlyHint",
    toolDescription: null,
    toolChanged: false,
    arguments: {},
    requester: { kind: "user", name: "olga" },
    createdAt: "2026-12-01T10:00:00.000Z",
    expiresAt: "2026-12-01T10:15:00.000Z",
    decidedAt: null,
    decidedBy: null,
    reason: null,
    startedAt: null,
    finishedAt: null,
    result: null,
    resultTruncated: false,
    error: null,
    durationMs: null,
    rule: null,
    grantId: null,
    approvalsNeeded: 1,
    approvedBy: [],
    ...over,
  };
}

let nextId = 1;
function event(action: string, actor: string, over: Partial<AuditEventView> = {}): AuditEventView {
  return {
    id: nextId++,
    at: "2026-12-01T10:00:05.000Z",
    actor,
    action,
    detail: null,
    durationMs: null,
    ...over,
  };
}

/** One row's line as the trail shows it, for a trail of `events`. */
function line(row: AuditEventView, events: AuditEventView[], approvalsNeeded?: number): string {
  return auditStepText(auditStepWords(row, { approvers: approversIn(events), approvalsNeeded }));
}

describe("an audit trail's rows", () => {
  it("a held call's request names its requester as such, and what it waits for", () => {
    const pending = event("call.pending", "olga", { detail: "no readOnlyHint" });
    expect(line(pending, [pending], 1)).toBe("Requested by olga · waiting for a reviewer's approval");
    expect(line(pending, [pending], 2)).toBe(
      "Requested by olga · waiting for 2 approvals from different reviewers",
    );
    // Where the trail does not know how many approvals the call needs, it claims no number.
    expect(line(pending, [pending])).toBe("Requested by olga · waiting for approval");
    expect(line(pending, [pending])).not.toMatch(/approval by olga/);
    expect(auditStepWords(pending, { approvers: [] })).toMatchObject({
      detailLabel: "Why",
      detail: "no readOnlyHint",
    });
  });

  it("an approved call's outcome says that Gatehouse ran it, who approved it, and the run time", () => {
    const trail = [
      event("call.pending", "build-bot"),
      event("call.approved", "rita", { durationMs: 5000 }),
      event("call.succeeded", "build-bot", { durationMs: 12 }),
    ];
    const [, approved, succeeded] = trail as [AuditEventView, AuditEventView, AuditEventView];
    expect(line(approved, trail)).toBe("Approved by rita 5 s after the request");
    expect(line(succeeded, trail)).toBe("Succeeded in 12 ms · Gatehouse ran it, approved by rita");
    // The requester is the outcome row's actor, but it did not make the call succeed.
    expect(line(succeeded, trail)).not.toContain("build-bot");
  });

  it("two approvals are both named on the outcome; a failure says how long the tool ran", () => {
    const trail = [
      event("call.pending", "pair-bot"),
      event("call.approval", "rita", { detail: "1 of 2 approvals" }),
      event("call.approved", "rex", { durationMs: 61_000, detail: "2 of 2 approvals" }),
      event("call.failed", "pair-bot", { durationMs: 2400, detail: "the tool reported an error" }),
    ];
    expect(line(trail[1] as AuditEventView, trail)).toBe("Approved by rita · more approvals needed");
    expect(line(trail[2] as AuditEventView, trail)).toBe("Approved by rex 1 min 1 s after the request");
    expect(line(trail[3] as AuditEventView, trail)).toBe(
      "Failed after 2.4 s · Gatehouse ran it, approved by rita and rex",
    );
    expect(auditStepWords(trail[3] as AuditEventView, { approvers: [] }).detailLabel).toBe("Error");
  });

  it("a call that ran at once: requested, then run by Gatehouse, with nobody's approval claimed", () => {
    const trail = [
      event("call.started", "build-bot", { detail: "read-only" }),
      event("call.succeeded", "build-bot", { durationMs: 3 }),
    ];
    expect(line(trail[0] as AuditEventView, trail)).toBe("Requested by build-bot · Gatehouse ran it at once");
    expect(line(trail[1] as AuditEventView, trail)).toBe("Succeeded in 3 ms · Gatehouse ran it");
  });

  it("a refusal at the request is Gatehouse's; one at the approval says the reviewer approved", () => {
    const atRequest = event("call.refused", "olga", { detail: 'tool_not_found: no tool named "demo_nope"' });
    expect(line(atRequest, [atRequest])).toBe("Requested by olga · refused by Gatehouse");
    const atApproval = event("call.refused", "rita", {
      durationMs: 30_000,
      detail: "approval refused: demo_add_note changed on its server and must be re-enabled by an owner",
    });
    const words = auditStepWords(atApproval, { approvers: [] });
    expect(auditStepText(words)).toBe(
      "Approved by rita 30 s after the request · refused by Gatehouse: the approval no longer applied",
    );
    expect(words.detail).toBe("demo_add_note changed on its server and must be re-enabled by an owner");
  });

  it("Gatehouse's own steps name nobody; a denial's detail is its reason", () => {
    const expired = event("call.expired", "gatehouse", { durationMs: 900_000 });
    expect(line(expired, [expired])).toBe("Expired without a decision 15 min after the request");
    const denied = event("call.denied", "rita", { durationMs: 4000, detail: "not on a Friday" });
    expect(line(denied, [denied])).toBe("Denied by rita 4 s after the request");
    expect(auditStepWords(denied, { approvers: [] }).detailLabel).toBe("Reason");
    const interrupted = event("call.interrupted", "gatehouse", { detail: "outcome unknown" });
    expect(line(interrupted, [interrupted])).not.toContain("gatehouse");
  });

  it("a call whose server failed under it is not said to be interrupted by Gatehouse's stop, and the rules' own steps name nobody", () => {
    const died = event("call.interrupted", "bot", { detail: "outcome unknown (the tool may have run)" });
    expect(line(died, [died])).toContain("the server failed or did not answer");
    expect(line(died, [died])).not.toContain("Gatehouse stopped");
    const refused = event("call.refused", "gatehouse", {
      detail: 'denied_by_rule: denied by rule "no-drop"',
    });
    expect(line(refused, [refused])).toBe("Refused by Gatehouse · the current rules deny it");
    const rejudged = event("call.rejudged", "gatehouse", {
      detail: 'rule "two-eyes" now asks for 2 approvals',
    });
    expect(line(rejudged, [rejudged])).not.toContain("gatehouse");
  });
});

describe("a call's place and decision in the activity list", () => {
  it("a call of an unknown tool has no server: no dangling 'on'", () => {
    expect(serverOf(call({ server: "demo" }))).toBe("demo");
    expect(serverOf(call({ server: "" }))).toBeNull();
  });

  it("the decision reads in sentence case", () => {
    expect(decisionText(call({ status: "succeeded", decidedBy: "rita", approvedBy: ["rita"] }))).toBe(
      "Approved by rita",
    );
    expect(decisionText(call({ status: "succeeded", destructive: false }))).toBe("Read-only, no review");
    expect(decisionText(call({ status: "pending" }))).toBe("Waiting");
    expect(
      decisionText(
        call({ status: "refused", server: "", error: { code: "tool_not_found", message: "no tool" } }),
      ),
    ).toBe("Refused: tool_not_found");
    expect(decisionText(call({ status: "denied", decidedBy: "rita", reason: "not now" }))).toBe(
      "Denied by rita: not now",
    );
    expect(decisionText(call({ status: "succeeded", rule: "notes-reads", destructive: false }))).toBe(
      "Allowed by rule notes-reads",
    );
  });
});

describe("who decided a call, in the approvals page's recently decided list", () => {
  it('an approved call that ran reads approved by its reviewer, never "succeeded by"', () => {
    const ran = call({ status: "succeeded", decidedBy: "rita", approvedBy: ["rita"] });
    expect(recentDecisionText(ran)).toBe("approved by rita");
    expect(recentDecisionText(call({ status: "denied", decidedBy: "rita", reason: "no" }))).toBe(
      "denied by rita",
    );
  });

  it("a call that expired or was withdrawn short of its approvals is not called approved", () => {
    const halfway = { approvalsNeeded: 2, approvedBy: ["rita"], decidedBy: null };
    expect(recentDecisionText(call({ status: "expired", ...halfway }))).toBe("expired at 1 of 2 approvals");
    expect(recentDecisionText(call({ status: "withdrawn", ...halfway }))).toBe(
      "withdrawn by the requester at 1 of 2 approvals",
    );
    expect(recentDecisionText(call({ status: "expired" }))).toBe("expired without a decision");
  });
});

describe("a call's run time in its story", () => {
  const startedAt = "2026-12-01T10:00:05.000Z";
  const finishedAt = "2026-12-01T10:00:05.012Z";

  it("is the call's durationMs, said as the span from the send to the tool's answer", () => {
    expect(runTimeText(call({ status: "succeeded", startedAt, finishedAt, durationMs: 12 }))).toBe(
      `12 ms, from when Gatehouse sent the call (${formatDateTime(startedAt)}) to the tool's answer`,
    );
  });

  it("claims no figure while the tool runs, after a restart, or when the tool was never asked", () => {
    expect(runTimeText(call({ status: "running", startedAt }))).toBe(
      `Still running: Gatehouse let it run at ${formatDateTime(startedAt)}`,
    );
    const restart = {
      code: "interrupted",
      message: "Gatehouse stopped while the call was running: outcome unknown",
    };
    expect(runTimeText(call({ status: "interrupted", startedAt, finishedAt, error: restart }))).toBe(
      `Unknown: Gatehouse stopped while the tool ran (let run at ${formatDateTime(startedAt)})`,
    );
    expect(runTimeText(call({ status: "denied" }))).toBeNull();
  });

  it("an interrupted call names who stopped the tool: Gatehouse at a restart, or the server under the call", () => {
    const restart = {
      code: "interrupted",
      message: "Gatehouse stopped while the call was running: outcome unknown",
    };
    const died = {
      code: "interrupted",
      message: "outcome unknown (the tool may have run; it is not run again): connection closed",
    };
    expect(recentDecisionText(call({ status: "interrupted", error: restart }))).toBe(
      "interrupted by a restart",
    );
    expect(recentDecisionText(call({ status: "interrupted", error: died }))).toBe(
      "interrupted: the server failed under it",
    );
    expect(runTimeText(call({ status: "interrupted", startedAt, error: died }))).toBe(
      `Unknown: the tool server failed or did not answer while the tool ran (let run at ${formatDateTime(startedAt)})`,
    );
  });
});
