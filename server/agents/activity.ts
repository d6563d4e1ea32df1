import "server-only";
import { and, count, eq, gte, max } from "drizzle-orm";
import type { TokenActivityView } from "@/lib/api-types";
import type { Db } from "../store/db";
import { auditEvents, calls } from "../store/schema";

/**
 * What each agent token has been doing, as the Settings page shows owners: its calls in the last
 * hour, its calls waiting now, and when a limit last refused it (`agent.limited` in the audit:
 * the first refusal of each minute, so to the minute). Tokens with none of these are left out.
 */
export async function tokenActivity(db: Db, now = new Date()): Promise<Record<string, TokenActivityView>> {
  const hourAgo = new Date(now.getTime() - 3_600_000).toISOString();
  const out: Record<string, TokenActivityView> = {};
  const of = (name: string) => {
    let entry = out[name];
    if (!entry) {
      entry = { callsLastHour: 0, pendingNow: 0, lastLimitedAt: null };
      out[name] = entry;
    }
    return entry;
  };
  const agentCalls = eq(calls.requesterKind, "agent");
  const recent = await db
    .select({ name: calls.requesterName, n: count() })
    .from(calls)
    .where(and(agentCalls, gte(calls.createdAt, hourAgo)))
    .groupBy(calls.requesterName);
  for (const row of recent) of(row.name).callsLastHour = row.n;
  const waiting = await db
    .select({ name: calls.requesterName, n: count() })
    .from(calls)
    .where(and(agentCalls, eq(calls.status, "pending")))
    .groupBy(calls.requesterName);
  for (const row of waiting) of(row.name).pendingNow = row.n;
  const limited = await db
    .select({ name: auditEvents.actor, at: max(auditEvents.at) })
    .from(auditEvents)
    .where(eq(auditEvents.action, "agent.limited"))
    .groupBy(auditEvents.actor);
  for (const row of limited) if (row.at) of(row.name).lastLimitedAt = row.at;
  return out;
}
