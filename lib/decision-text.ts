import type { GrantScope } from "./api-types";

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
