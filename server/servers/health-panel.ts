import "server-only";
import { and, count, eq, gte, isNotNull, sql } from "drizzle-orm";
import type { HealthPanelView } from "@/lib/api-types";
import { type Db, first } from "../store/db";
import { calls, notificationDeliveries } from "../store/schema";

const HOUR_MS = 60 * 60 * 1000;

/** Hours the panel's charts cover, the current one last. */
export const PANEL_HOURS = 24;

/** Reviewer decisions read for the time-to-decision chart at most (the latest first); past it the chart samples. */
const MAX_DECISIONS_READ = 20_000;

/**
 * The Servers page's health panel, from the store (so every replica draws the same): calls
 * waiting now, reviewers' decisions in the last hour, the time from request to a reviewer's
 * decision per hour (p50 and p95) and calls per server per hour over the last
 * {@link PANEL_HOURS} hours, and failed notification deliveries in the same span. Hours are UTC
 * hours, as the store's timestamps are. `expireAfterSeconds` bounds how long before a decision
 * its call was made (a call is decided before it expires), so only recent rows are read.
 */
export async function healthPanel(
  db: Db,
  opts: { expireAfterSeconds: number; now?: number },
): Promise<HealthPanelView> {
  const now = opts.now ?? Date.now();
  const firstHour = Math.floor(now / HOUR_MS) * HOUR_MS - (PANEL_HOURS - 1) * HOUR_MS;
  const since = new Date(firstHour).toISOString();
  const hourAgo = new Date(now - HOUR_MS).toISOString();
  const madeSince = new Date(firstHour - opts.expireAfterSeconds * 1000).toISOString();
  const hours = Array.from({ length: PANEL_HOURS }, (_, i) =>
    new Date(firstHour + i * HOUR_MS).toISOString(),
  );
  const hourOf = (iso: string) => `${iso.slice(0, 13)}:00:00.000Z`;

  const [pending, decisions, perServer, failed] = await Promise.all([
    countPending(db),
    db
      .select({ createdAt: calls.createdAt, decidedAt: calls.decidedAt })
      .from(calls)
      .where(and(gte(calls.createdAt, madeSince), isNotNull(calls.decidedAt), gte(calls.decidedAt, since)))
      .orderBy(sql`${calls.decidedAt} desc`)
      .limit(MAX_DECISIONS_READ),
    db
      .select({ server: calls.server, hour: sql<string>`substr(${calls.createdAt}, 1, 13)`, n: count() })
      .from(calls)
      .where(gte(calls.createdAt, since))
      .groupBy(calls.server, sql`substr(${calls.createdAt}, 1, 13)`),
    first(
      db
        .select({ n: count() })
        .from(notificationDeliveries)
        .where(
          and(eq(notificationDeliveries.status, "failed"), gte(notificationDeliveries.createdAt, since)),
        ),
    ),
  ]);

  const waits = new Map<string, number[]>(hours.map((h) => [h, []]));
  let lastHour = 0;
  for (const d of decisions) {
    if (!d.decidedAt) continue;
    if (d.decidedAt >= hourAgo) lastHour++;
    waits.get(hourOf(d.decidedAt))?.push((Date.parse(d.decidedAt) - Date.parse(d.createdAt)) / 1000);
  }
  const servers = new Map<string, number[]>();
  for (const row of perServer) {
    // A call for a tool nobody knows has no server: counted under "(unknown tool)".
    const name = row.server === "" ? "(unknown tool)" : row.server;
    const counts = servers.get(name) ?? hours.map(() => 0);
    const at = hours.indexOf(`${row.hour}:00:00.000Z`);
    if (at !== -1) counts[at] = (counts[at] ?? 0) + Number(row.n);
    servers.set(name, counts);
  }
  return {
    at: new Date(now).toISOString(),
    pendingNow: pending,
    decisionsLastHour: lastHour,
    hours,
    timeToDecision: hours.map((h) => {
      const sorted = (waits.get(h) ?? []).sort((a, b) => a - b);
      return { decisions: sorted.length, p50: quantile(sorted, 0.5), p95: quantile(sorted, 0.95) };
    }),
    callsPerServer: [...servers]
      .map(([server, counts]) => ({ server, counts }))
      .sort((a, b) => a.server.localeCompare(b.server)),
    failedDeliveries: Number(failed?.n ?? 0),
  };
}

/** Calls waiting for a reviewer now: the panel's and the metrics' one count. */
export async function countPending(db: Db): Promise<number> {
  const row = await first(db.select({ n: count() }).from(calls).where(eq(calls.status, "pending")));
  return Number(row?.n ?? 0);
}

/** The `q` quantile of ascending `sorted` (nearest rank), or null when it is empty. */
export function quantile(sorted: readonly number[], q: number): number | null {
  if (sorted.length === 0) return null;
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[rank] ?? null;
}
