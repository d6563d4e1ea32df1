/**
 * The rules room's public face (PRODUCT.md §11): import from "../rules", not the files behind
 * it. `RuleSet` decides which rule, if any, applies to a call (conditions evaluated in a worker
 * pool with a deadline, failing closed); `views.ts` answers `GET /api/rules`.
 */
export type { EvaluatorOptions } from "./evaluator";
export { WHEN_DEADLINE_MS } from "./evaluator";
export { globMatches } from "./glob";
export { RuleSet } from "./rule-set";
export type { RuleInput, RuleMatch, RuleSkip, RuleVerdict, WhenOutcome } from "./types";
export { enabledToolNames, listRules, rulesMatchingNoTool, ruleViews } from "./views";
