import "server-only";
import { count, eq, isNotNull, max } from "drizzle-orm";
import type { RuleListView, RuleView } from "@/lib/api-types";
import type { RuleConfig } from "../config/types";
import type { Db } from "../store/db";
import { agentTokens, calls, tools } from "../store/schema";
import { anyGlobMatches } from "./glob";

/**
 * Rules as the owner sees them (`GET /api/rules`): each with its hit count (calls whose `rule`
 * is its name, counted in one grouped query) and the enabled tools its globs match now.
 */
export async function ruleViews(
  db: Db,
  rules: readonly RuleConfig[],
  enabledTools: readonly string[],
): Promise<RuleView[]> {
  const grouped = await db
    .select({ rule: calls.rule, hits: count(), lastHitAt: max(calls.createdAt) })
    .from(calls)
    .where(isNotNull(calls.rule))
    .groupBy(calls.rule);
  const hits = new Map(grouped.map((row) => [row.rule, row] as const));
  return rules.map((rule) => {
    const counted = hits.get(rule.name);
    return {
      name: rule.name,
      tools: [...rule.tools],
      agents: rule.agents === null ? null : [...rule.agents],
      when: rule.when,
      decision: rule.decision,
      reason: rule.reason,
      approvals: rule.approvals,
      hits: counted?.hits ?? 0,
      lastHitAt: counted?.lastHitAt ?? null,
      matchingTools: enabledTools.filter((name) => anyGlobMatches(rule.tools, name)),
    };
  });
}

/**
 * Local names of the tools an owner has enabled, in name order: code-unit order, sorted here
 * rather than by ORDER BY, which follows the database's collation on PostgreSQL (`db_x` after
 * `dba` in most locales) and byte order on SQLite.
 */
export async function enabledToolNames(db: Db): Promise<string[]> {
  const rows = await db.select({ name: tools.localName }).from(tools).where(eq(tools.status, "enabled"));
  return rows.map((row) => row.name).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
}

/** `GET /api/rules`: the rules in the order they are tried, with hits and matching enabled tools. */
export async function listRules(db: Db, rules: readonly RuleConfig[]): Promise<RuleListView> {
  const named = new Set(rules.flatMap((r) => r.agents ?? []));
  const inSets = await db
    .select({ name: agentTokens.name, set: agentTokens.toolSet })
    .from(agentTokens)
    .where(isNotNull(agentTokens.toolSet));
  const toolSets: Record<string, string> = {};
  for (const t of inSets) if (t.set !== null && named.has(t.name)) toolSets[t.name] = t.set;
  return { rules: await ruleViews(db, rules, await enabledToolNames(db)), toolSets };
}

/**
 * Names of the rules whose globs match none of `toolNames` (a start-time warning: a typo in a
 * glob, or a server not connected yet). Config validation cannot say this: it has no catalogue.
 */
export function rulesMatchingNoTool(rules: readonly RuleConfig[], toolNames: readonly string[]): string[] {
  return rules
    .filter((rule) => !toolNames.some((name) => anyGlobMatches(rule.tools, name)))
    .map((rule) => rule.name);
}
