import type { RuleConfig } from "../config/types";

/** A rule with every field set, for tests that vary a few: an allow rule on every tool. */
export function rule(fields: Partial<RuleConfig> & { name: string }): RuleConfig {
  return {
    tools: ["*"],
    agents: null,
    when: null,
    decision: "allow",
    reason: null,
    approvals: 1,
    ...fields,
  };
}

/** A call by the agent token "bot" with these arguments. */
export function callOf(tool: string, args: Record<string, unknown> = {}, agent = "bot") {
  return { tool, agent, args };
}
