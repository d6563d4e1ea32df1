import type { CallView, GrantScope } from "./api-types";

/**
 * The words for decisions that the server (audit rows, messages, agents' answers) and the browser
 * both say, written once.
 */

/** What a held call waits for, in words: "a reviewer's approval" or "2 approvals from different reviewers". */
export function approvalsNeededText(needed: number): string {
  return needed <= 1 ? "a reviewer's approval" : `${needed} approvals from different reviewers`;
}

/** How far a call's approvals are: "1 of 2 approvals". */
export function approvalsText(approvals: number, needed: number): string {
  return `${approvals} of ${needed} approvals`;
}

/** What a grant covers, as it reads after "with": "these exact arguments" or "any arguments". */
export const grantScopeText: Record<GrantScope, string> = {
  arguments: "these exact arguments",
  tool: "any arguments",
};

/** "rita", "rita and rex", "rita, rex and tom". */
export function namesText(names: readonly string[]): string {
  if (names.length <= 1) return names[0] ?? "";
  return `${names.slice(0, -1).join(", ")} and ${names[names.length - 1]}`;
}

/**
 * Who decided a call, as people read it: for a denied call, or one whose approval was refused,
 * whoever did that (not those who approved before); otherwise everyone who approved. Null when
 * no person decided it.
 */
export function decidersText(call: Pick<CallView, "status" | "approvedBy" | "decidedBy">): string | null {
  if (call.status === "denied" || call.status === "refused") return call.decidedBy;
  return call.approvedBy.length > 0 ? namesText(call.approvedBy) : call.decidedBy;
}
