/** Words for grants and rules, shared by the approval card, /grants, /rules and a call's story. */

import type { BadgeTone } from "@/components/ui";
import type { CallView, GrantRequest, GrantView, RuleView } from "@/lib/api-types";
import { grantScopeText } from "@/lib/decision-text";

/** The three lengths the browser offers (`grantMinuteChoices`), as a reviewer reads them. */
export const grantMinuteLabels: Record<number, string> = {
  15: "15 minutes",
  60: "1 hour",
  480: "a working day (8 h)",
};

/** Any grant length (the API takes 1..480 minutes): a choice's own words, else "90 minutes", "2 h". */
export function minutesText(minutes: number): string {
  const label = grantMinuteLabels[minutes];
  if (label) return label;
  if (minutes % 60 === 0) return `${minutes / 60} h`;
  return `${minutes} minutes`;
}

/**
 * The sentence a reviewer reads before approving with a grant, e.g. "Also allow build-bot to call
 * demo_add_note with these exact arguments for 1 hour, at most 3 more calls."
 */
export function grantSentence(call: Pick<CallView, "tool" | "requester">, grant: GrantRequest): string {
  const uses =
    grant.uses === undefined ? "" : `, at most ${grant.uses} more ${grant.uses === 1 ? "call" : "calls"}`;
  return `Also allow ${call.requester.name} to call ${call.tool} with ${grantScopeText[grant.scope]} for ${minutesText(grant.minutes)}${uses}.`;
}

/** "3 of 10" or "3 (no limit)". */
export function usesText(grant: Pick<GrantView, "uses" | "usesAllowed">): string {
  return grant.usesAllowed === null ? `${grant.uses} (no limit)` : `${grant.uses} of ${grant.usesAllowed}`;
}

export const ruleDecisionTone: Record<RuleView["decision"], BadgeTone> = {
  allow: "green",
  deny: "red",
  review: "amber",
};

/** What made the automatic part of a call's decision: a rule (and what it did) or a grant. */
export type DecisionSource =
  | { kind: "allowed"; rule: string }
  | { kind: "denied"; rule: string }
  | { kind: "held"; rule: string; approvals: number }
  | { kind: "grant"; grantId: string };

/**
 * Reads what decided a call from its view. A grant wins (a call it covered ran without review,
 * whatever rule matched first); a rule's own decision shows in the call's course: refused with
 * `denied_by_rule` (or refused before anyone decided) was a deny, anything that waited for
 * reviewers was held, anything that ran without a decision was allowed.
 */
export function decisionSourceOf(call: CallView): DecisionSource | null {
  if (call.grantId) return { kind: "grant", grantId: call.grantId };
  if (!call.rule) return null;
  const rule = call.rule;
  if (call.error?.code === "denied_by_rule") return { kind: "denied", rule };
  const waited =
    call.status === "pending" ||
    call.status === "denied" ||
    call.status === "expired" ||
    call.status === "withdrawn" ||
    call.decidedAt !== null ||
    call.approvedBy.length > 0;
  if (waited) return { kind: "held", rule, approvals: call.approvalsNeeded };
  if (call.status === "refused") return { kind: "denied", rule };
  return { kind: "allowed", rule };
}

/** "allowed by rule notes-reads", "held by rule payments (2 approvals)", "ran under a grant from alice". */
export function decisionSourceText(source: DecisionSource, grantBy?: string | null): string {
  switch (source.kind) {
    case "allowed":
      return `allowed by rule ${source.rule}`;
    case "denied":
      return `denied by rule ${source.rule}`;
    case "held":
      return `held by rule ${source.rule} (${source.approvals} ${source.approvals === 1 ? "approval" : "approvals"})`;
    case "grant":
      return grantBy ? `ran under a grant from ${grantBy}` : "ran under a grant";
  }
}
