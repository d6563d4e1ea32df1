import "server-only";
import type { RuleConfig } from "../config/types";
import { type EvaluatorOptions, WhenEvaluator } from "./evaluator";
import { anyGlobMatches } from "./glob";
import type { RuleInput, RuleMatch, RuleSkip, RuleVerdict, WhenOutcome } from "./types";

const ALWAYS: WhenOutcome = { kind: "true" };

/**
 * The rules of gatehouse.json, tried in order (PRODUCT.md §11): the first whose `tools` globs,
 * `agents` and `when` all match decides. A `when` that cannot be evaluated fails closed: it
 * does not match an `allow` rule (recorded as skipped, and the next rule is tried) and does
 * match a `deny` or `review` rule. Only conditions of rules whose tools and agents match are
 * evaluated, each in the worker pool of {@link WhenEvaluator}; the rest never leave this thread.
 */
export class RuleSet {
  readonly rules: readonly RuleConfig[];
  private readonly evaluator: WhenEvaluator;

  constructor(rules: readonly RuleConfig[], opts: EvaluatorOptions = {}) {
    this.rules = rules;
    this.evaluator = new WhenEvaluator(opts);
  }

  /** First rule whose tools glob, agents and when all match; never throws (errors fail closed). */
  async decide(input: RuleInput): Promise<RuleVerdict> {
    const skipped: RuleSkip[] = [];
    for (const [index, rule] of this.rules.entries()) {
      if (!appliesTo(rule, input)) continue;
      const when = rule.when === null ? ALWAYS : await this.evaluator.evaluate(rule.when, input);
      if (when.kind === "false") continue;
      if (when.kind === "error") {
        if (rule.decision === "allow") {
          skipped.push({
            rule: rule.name,
            why: `its condition could not be evaluated (${when.message}), so this allow rule does not apply`,
          });
          continue;
        }
        return { match: failedClosed(rule, index, when), skipped };
      }
      return {
        match: { rule, index, when, explanation: `rule ${JSON.stringify(rule.name)} matched` },
        skipped,
      };
    }
    return { match: null, skipped };
  }

  /** Stops the evaluator's workers; a later `when` comes out as an error (and fails closed). */
  close(): Promise<void> {
    return this.evaluator.close();
  }
}

/** Whether the rule's tools and agents cover the call (its `when` aside). */
function appliesTo(rule: RuleConfig, input: RuleInput): boolean {
  if (!anyGlobMatches(rule.tools, input.tool)) return false;
  return rule.agents === null || (input.agent !== "" && rule.agents.includes(input.agent));
}

function failedClosed(rule: RuleConfig, index: number, when: WhenOutcome & { kind: "error" }): RuleMatch {
  return {
    rule,
    index,
    when,
    explanation: `rule ${JSON.stringify(rule.name)}: its condition could not be evaluated (${when.message}), so it applies (failing closed)`,
  };
}
