import "server-only";
import { userName } from "@/lib/api-types";
import { childPath } from "./display";
import type { Issues, Json } from "./readers";
import { checkKeys, describeGiven, isObject, show, typeName } from "./readers";
import { checkWhen, WHEN_LIMITS } from "./rule-when";
import type { RuleConfig, RuleDecision } from "./types";

/**
 * The `rules` section (PRODUCT.md §11): tried in order, the first rule whose tools, agents and
 * `when` all match decides a call. Everything that can be known without the catalogue is
 * checked here; whether a rule's globs match any known tool is a start-time warning made by
 * whoever has the catalogue (`rulesMatchingNoTool` in server/rules).
 */

/** Rule names: they are stored on calls and counted, so they stay short and plain. */
export const RULE_NAME_PATTERN = /^[a-z0-9][a-z0-9._-]{0,63}$/;
/** What a glob may hold: the characters of local tool names, and the wildcards `*` and `?`. */
const GLOB_CHAR = /^[A-Za-z0-9_.\-*?]$/;
const RULE_DECISIONS = ["allow", "deny", "review"] as const satisfies readonly RuleDecision[];
/** Bounds of a rule's fields. */
const RULE_LIMITS = {
  ...WHEN_LIMITS,
  reasonMaxChars: 500,
  approvalsMin: 1,
  approvalsMax: 5,
} as const;

const KEYS = ["name", "tools", "agents", "when", "decision", "reason", "approvals"] as const;
const EXAMPLE =
  '{"name": "no-drop", "tools": ["db_*"], "when": "args.sql.matches(\'(?i)\\\\bdrop\\\\b\')", "decision": "deny"}';

/** Words other policy files use, so a pasted rule gets a real fix rather than a bare "unknown". */
const HINTS: Record<string, string> = {
  condition: 'write the condition in "when"',
  if: 'write the condition in "when"',
  match: 'write the condition in "when"',
  action: 'use "decision" ("allow", "deny" or "review")',
  effect: 'use "decision" ("allow", "deny" or "review")',
  message: 'use "reason"',
  tool: 'use "tools", a list of globs, e.g. "tools": ["db_*"]',
  agent: 'use "agents", a list of token names, e.g. "agents": ["billing-bot"]',
  requiredApprovals: 'use "approvals"',
};

/** Validates `raw.rules`: [] when absent. Every problem is reported with its JSON path. */
export function readRules(raw: Json, issues: Issues): RuleConfig[] {
  const value = raw.rules;
  if (value === undefined) return [];
  if (!Array.isArray(value)) {
    issues.error("rules", `must be an array of rules like [${EXAMPLE}], not ${typeName(value)}`);
    return [];
  }
  const rules: RuleConfig[] = [];
  const firstAt = new Map<string, string>();
  value.forEach((entry: unknown, i) => {
    const at = childPath("rules", i);
    const rule = readRule(entry, at, issues);
    if (rule === null) return;
    rules.push(rule);
    if (rule.name === "") return;
    const first = firstAt.get(rule.name);
    if (first !== undefined) {
      issues.error(
        childPath(at, "name"),
        `${show(rule.name)} is already the name of ${first}; give each rule its own name (calls and hit counts name rules)`,
      );
    } else {
      firstAt.set(rule.name, at);
    }
  });
  return rules;
}

/** One rule; null when the entry is not an object. A field that is wrong comes back empty. */
function readRule(raw: unknown, where: string, issues: Issues): RuleConfig | null {
  if (!isObject(raw)) {
    issues.error(where, `must be an object like ${EXAMPLE}, not ${typeName(raw)}`);
    return null;
  }
  checkKeys(raw, KEYS, where, HINTS, issues);
  const at = (key: (typeof KEYS)[number]) => childPath(where, key);
  const name = readName(raw.name, at("name"), issues);
  const decision = readDecision(raw.decision, at("decision"), issues);
  return {
    name,
    tools: readTools(raw.tools, at("tools"), issues),
    agents: readAgents(raw.agents, at("agents"), issues),
    when: readWhen(raw.when, at("when"), name, issues),
    decision: decision ?? "deny",
    reason: readReason(raw.reason, at("reason"), issues),
    approvals: readApprovals(raw.approvals, at("approvals"), decision, issues),
  };
}

function readName(value: unknown, where: string, issues: Issues): string {
  if (value === undefined) {
    issues.error(where, 'is required; add one, e.g. "name": "no-drop" (calls decided by the rule name it)');
    return "";
  }
  if (typeof value !== "string") {
    issues.error(where, `must be a string naming the rule, e.g. "no-drop", not ${typeName(value)}`);
    return "";
  }
  if (!RULE_NAME_PATTERN.test(value)) {
    const suggestion = value
      .toLowerCase()
      .replace(/[^a-z0-9._-]+/g, "-")
      .replace(/^[^a-z0-9]+/, "")
      .slice(0, 64);
    issues.error(
      where,
      `rule name ${show(value)} is not allowed; use a lowercase letter or digit, then up to 63 lowercase letters, digits, ".", "_" or "-" (^[a-z0-9][a-z0-9._-]{0,63}$)` +
        (suggestion !== value && RULE_NAME_PATTERN.test(suggestion) ? `, e.g. ${show(suggestion)}` : ""),
    );
    return "";
  }
  return value;
}

function readDecision(value: unknown, where: string, issues: Issues): RuleDecision | null {
  if (value === undefined) {
    issues.error(where, 'is required; add "decision": "allow", "deny" or "review"');
    return null;
  }
  const known = RULE_DECISIONS.find((d) => d === value);
  if (known) return known;
  const given = typeof value === "string" ? show(value) : typeName(value);
  issues.error(
    where,
    `${given} is not a decision; use "allow" (run at once), "deny" (refuse) or "review" (hold for reviewers)`,
  );
  return null;
}

/**
 * `tools`: a non-empty list of globs on local tool names (a rule's, a tool set's). `empty` is
 * what an empty list is told; `example` the globs a missing list is shown.
 */
export function readTools(
  value: unknown,
  where: string,
  issues: Issues,
  empty = 'lists no tools, so the rule could never apply; add a glob such as "db_*"',
  example = '["db_*", "files_read_?"]',
): string[] {
  if (value === undefined) {
    issues.error(where, `is required; list globs on local tool names, e.g. "tools": ${example}`);
    return [];
  }
  if (!Array.isArray(value)) {
    const fix = typeof value === "string" ? `; write it as a list: [${show(value)}]` : "";
    issues.error(where, `must be an array of globs on local tool names, not ${typeName(value)}${fix}`);
    return [];
  }
  if (value.length === 0) {
    issues.error(where, empty);
    return [];
  }
  const globs: string[] = [];
  value.forEach((item: unknown, i) => {
    const problem = globProblem(item);
    if (problem) issues.error(childPath(where, i), problem);
    else globs.push(item as string);
  });
  return globs;
}

/** Why `item` is not a glob, or null when it is one. */
function globProblem(item: unknown): string | null {
  if (typeof item !== "string" || item === "") {
    return `must be a glob on local tool names like "db_*", not ${describeGiven(item)}`;
  }
  for (const c of item) {
    if (GLOB_CHAR.test(c)) continue;
    const named = c === " " ? '" " (a space)' : /\s/.test(c) ? "a whitespace character" : show(c);
    return `${show(item)} contains ${named}, which a glob cannot hold; use the characters of local tool names (letters, digits, "_", ".", "-") and the wildcards "*" (any run of characters) and "?" (exactly one)`;
  }
  return null;
}

/** `agents`: null when absent (any requester); otherwise a non-empty list of token names. */
function readAgents(value: unknown, where: string, issues: Issues): string[] | null {
  if (value === undefined) return null;
  if (!Array.isArray(value)) {
    const fix = typeof value === "string" ? `; write it as a list: [${show(value)}]` : "";
    issues.error(where, `must be an array of agent token names, not ${typeName(value)}${fix}`);
    return null;
  }
  if (value.length === 0) {
    issues.error(
      where,
      'lists no agents, so the rule could never apply; name token names, or remove "agents" to apply to any requester',
    );
    return null;
  }
  const agents: string[] = [];
  value.forEach((item: unknown, i) => {
    // The same rule as token names are created with, untrimmed: a config value is exact.
    if (typeof item === "string" && item === item.trim() && userName.safeParse(item).success) {
      agents.push(item);
      return;
    }
    const given = typeof item === "string" ? show(item) : typeName(item);
    issues.error(
      childPath(where, i),
      `${given} is not a token name; use 1-64 letters, digits, ".", "_" or "-", starting with a letter or digit, as on the Tokens page`,
    );
  });
  return agents;
}

/** `when`: a bounded CEL condition that parses and uses only known names; null when absent. */
function readWhen(value: unknown, where: string, name: string, issues: Issues): string | null {
  if (value === undefined) return null;
  const rule = name === "" ? "this rule" : `rule ${show(name)}`;
  if (typeof value !== "string" || value.trim() === "") {
    issues.error(
      where,
      `must be a CEL condition over args, tool, agent and agent.set, e.g. "args.path.startsWith('/srv/notes/')", not ${describeGiven(value)}; remove "when" to apply the rule to every call it names`,
    );
    return null;
  }
  const problem = checkWhen(value);
  if (problem === null) return value;
  const place =
    problem.column === undefined
      ? ""
      : problem.line !== undefined && problem.line > 1
        ? ` at line ${problem.line}, column ${problem.column}`
        : ` at column ${problem.column}`;
  switch (problem.kind) {
    case "syntax":
      issues.error(where, `${rule}: CEL syntax error${place}: ${problem.message}`);
      break;
    case "name":
    case "pattern":
      issues.error(where, `${rule}: ${problem.message}${place}${problem.fix ? `; ${problem.fix}` : ""}`);
      break;
    default:
      issues.error(where, `${rule}: the condition ${problem.message}`);
  }
  return null;
}

/** `reason`: shown to the requester or reviewers; null when absent. */
function readReason(value: unknown, where: string, issues: Issues): string | null {
  if (value === undefined) return null;
  if (typeof value !== "string" || value.trim() === "") {
    issues.error(
      where,
      `must be a sentence shown to the requester or reviewers, not ${describeGiven(value)}; remove "reason" to use one naming the rule`,
    );
    return null;
  }
  if (value.length > RULE_LIMITS.reasonMaxChars) {
    issues.error(
      where,
      `is ${value.length} characters long; at most ${RULE_LIMITS.reasonMaxChars} are allowed, so shorten it`,
    );
    return null;
  }
  return value;
}

/** `approvals`: only on review rules, an integer 1..5; 1 when absent. */
function readApprovals(value: unknown, where: string, decision: RuleDecision | null, issues: Issues): number {
  if (value === undefined) return 1;
  if (decision !== null && decision !== "review") {
    issues.error(
      where,
      `only applies to "review" rules (distinct reviewers a held call needs); remove it, or use "decision": "review"`,
    );
    return 1;
  }
  const range = `an integer from ${RULE_LIMITS.approvalsMin} to ${RULE_LIMITS.approvalsMax}`;
  if (typeof value !== "number") {
    const unquote = typeof value === "string" && /^\s*\d+\s*$/.test(value);
    issues.error(
      where,
      `must be ${range}, not ${typeName(value)}${unquote ? `; write ${value.trim()} without quotes` : ""}`,
    );
    return 1;
  }
  if (!Number.isInteger(value) || value < RULE_LIMITS.approvalsMin || value > RULE_LIMITS.approvalsMax) {
    issues.error(where, `${value} is not allowed; use ${range} distinct reviewers (default 1)`);
    return 1;
  }
  return value;
}
