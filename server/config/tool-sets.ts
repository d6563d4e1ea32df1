import "server-only";
import { childPath } from "./display";
import { checkKeys, type Issues, isObject, type Json, readInt, readSection, show, typeName } from "./readers";
import { RULE_NAME_PATTERN, readTools } from "./rules";
import type { AgentLimitsConfig, ToolSetConfig } from "./types";

/**
 * The `toolSets` section (PRODUCT.md §16): named lists of globs on local tool names. A token
 * given a set sees and may call only the enabled tools its globs match; a token without one sees
 * every enabled tool. Whether a set's globs match any known tool is a start-time warning made by
 * whoever has the catalogue (server/agents).
 */

const SET_KEYS = ["tools", "limits"] as const;
const LIMIT_KEYS = ["callsPerMinute", "maxPendingCalls", "maxConcurrentCalls"] as const;
const LIMIT_HINTS: Record<string, string> = {
  concurrency: 'use "maxConcurrentCalls"',
  rateLimit: 'use "callsPerMinute"',
  rpm: 'use "callsPerMinute"',
};
const EXAMPLE = '{"billing": {"tools": ["pay_*", "crm_read_*"]}}';

/** Words other gateways' profile files use, so a pasted set gets a real fix. */
const HINTS: Record<string, string> = {
  allow: 'list the globs in "tools", e.g. "tools": ["pay_*"]',
  include: 'list the globs in "tools", e.g. "tools": ["pay_*"]',
  tool: 'use "tools", a list of globs, e.g. "tools": ["pay_*"]',
  limit: 'use "limits", e.g. "limits": {"callsPerMinute": 60}',
  rateLimit: 'use "limits", e.g. "limits": {"callsPerMinute": 60}',
};

/** Validates `raw.toolSets`: [] when absent, sorted by name. Every problem is reported with its JSON path. */
export function readToolSets(raw: Json, issues: Issues): ToolSetConfig[] {
  const value = raw.toolSets;
  if (value === undefined) return [];
  if (!isObject(value)) {
    issues.error(
      "toolSets",
      `must be an object mapping set names to their tools, like ${EXAMPLE}, not ${typeName(value)}`,
    );
    return [];
  }
  const sets: ToolSetConfig[] = [];
  for (const [name, entry] of Object.entries(value)) {
    const at = childPath("toolSets", name);
    if (!RULE_NAME_PATTERN.test(name)) {
      issues.error(
        at,
        `set name ${show(name)} is not allowed; use a lowercase letter or digit, then up to 63 lowercase letters, digits, ".", "_" or "-" (^[a-z0-9][a-z0-9._-]{0,63}$)`,
      );
      continue;
    }
    if (!isObject(entry)) {
      issues.error(at, `must be an object like {"tools": ["pay_*"]}, not ${typeName(entry)}`);
      continue;
    }
    checkKeys(entry, SET_KEYS, at, HINTS, issues);
    const tools = readTools(
      entry.tools,
      childPath(at, "tools"),
      issues,
      'lists no tools, so a token in the set could use nothing; add a glob such as "pay_*", or give the token no set',
      '["pay_*", "crm_read_*"]',
    );
    const limits = entry.limits === undefined ? {} : readLimits(entry, at, true, issues);
    if (tools.length > 0) sets.push({ name, tools, limits });
  }
  return sets.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

/** `agentLimits`: every token's limits; the defaults (maxPendingCalls 20, the others off) when absent. */
export function readAgentLimits(raw: Json, issues: Issues): AgentLimitsConfig {
  return readLimits(raw, "", false, issues) as AgentLimitsConfig;
}

/**
 * The limits in `parent.limits` (a set's: only the keys given) or in `agentLimits` (every key,
 * defaults filled in).
 */
function readLimits(
  parent: Json,
  at: string,
  partial: boolean,
  issues: Issues,
): Partial<AgentLimitsConfig> | AgentLimitsConfig {
  const key = partial ? "limits" : "agentLimits";
  const where = at ? childPath(at, key) : key;
  const section = readSection(parent, key, at, '{"callsPerMinute": 60, "maxPendingCalls": 5}', issues);
  checkKeys(section, LIMIT_KEYS, where, LIMIT_HINTS, issues);
  const out: Partial<AgentLimitsConfig> = {};
  for (const name of LIMIT_KEYS) {
    if (partial && section[name] === undefined) continue;
    out[name] = readInt(section, name, where, issues);
  }
  return out;
}
