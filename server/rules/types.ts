import "server-only";
import type { RuleConfig } from "../config/types";

/** What a rule is tried against: one call of an enabled, unchanged tool whose arguments passed the schema. */
export interface RuleInput {
  /** The local tool name. */
  tool: string;
  /** The token name of an agent requester; "" for a person (`agents` lists never match ""). */
  agent: string;
  /** The agent's tool set (`agent.set` in a condition); "" without one, and for a person. Default "". */
  agentSet?: string;
  args: Record<string, unknown>;
}

/**
 * How a rule's `when` came out; a rule without `when` counts as "true". An error's message says
 * what went wrong ("a key it reads is missing", "it ran longer than 100 ms", ...) and never
 * quotes an argument value: it is written to audit rows and shown to reviewers.
 */
export type WhenOutcome = { kind: "true" } | { kind: "false" } | { kind: "error"; message: string };

/** The rule that decides a call. */
export interface RuleMatch {
  rule: RuleConfig;
  /** Its place in `rules` (0-based). */
  index: number;
  /**
   * One sentence: 'rule "no-drop" matched', or 'rule "no-drop": its condition could not be
   * evaluated (a key it reads is missing: "sql"), so it applies (failing closed)'. The reason
   * in parentheses never quotes an argument value (it is written to audit rows).
   */
  explanation: string;
  /** The `when` outcome: "true", or "error" for a deny or review rule that failed closed. */
  when: WhenOutcome;
}

/** A rule passed over on the way: an allow rule whose condition could not be evaluated. */
export interface RuleSkip {
  rule: string;
  why: string;
}

/** The first matching rule (null: none, the default of PRODUCT.md §5 decides) and what was passed over. */
export interface RuleVerdict {
  match: RuleMatch | null;
  skipped: RuleSkip[];
}
