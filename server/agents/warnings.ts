import "server-only";
import { isNotNull } from "drizzle-orm";
import type { ToolSetConfig } from "../config";
import { anyGlobMatches } from "../rules/glob";
import type { Db } from "../store/db";
import { agentTokens } from "../store/schema";

/**
 * What is probably a mistake in the tool sets, as start-time warnings: a set whose globs match no
 * tool the catalogue knows (`known`, every local name), and an active token whose set the
 * configuration no longer has (it may use no tool until an owner gives it another).
 */
export async function toolSetWarnings(
  db: Db,
  sets: readonly ToolSetConfig[],
  known: readonly string[],
): Promise<string[]> {
  const out: string[] = [];
  for (const set of sets) {
    if (!known.some((name) => anyGlobMatches(set.tools, name)))
      out.push(`toolSets.${set.name}: its tools globs match no tool in the catalogue; check them for a typo`);
  }
  const names = new Set(sets.map((s) => s.name));
  const tokens = await db
    .select({ name: agentTokens.name, set: agentTokens.toolSet, revokedAt: agentTokens.revokedAt })
    .from(agentTokens)
    .where(isNotNull(agentTokens.toolSet));
  for (const t of tokens) {
    if (t.revokedAt === null && t.set !== null && !names.has(t.set))
      out.push(
        `agent token ${t.name}: its tool set "${t.set}" is not in the configuration, so it may use no tool; give it another on Settings or with token set`,
      );
  }
  return out;
}
