import "server-only";
import { desc, gte, or } from "drizzle-orm";
import type { LiveEvent } from "@/lib/api-types";
import type { Db } from "../store/db";
import { calls, tools } from "../store/schema";

/** The most calls one resync publishes: the newest first; older ones are found on the next refetch. */
const RESYNC_MAX_CALLS = 5_000;

/**
 * Publishes with `publish` what changed in the store since `since` (ISO 8601) that other replicas' event
 * notifications would have told: each call created, decided or finished since then (with its
 * status now), every server's catalogue, grants and resource reads (both "refetch"). For a replica
 * that could not hear the others for a while: its waiters re-read their calls and its browsers
 * refetch.
 */
export async function publishChangesSince(
  db: Db,
  publish: (event: LiveEvent) => void,
  since: string,
): Promise<void> {
  const changed = await db
    .select({ id: calls.id, status: calls.status })
    .from(calls)
    .where(or(gte(calls.createdAt, since), gte(calls.decidedAt, since), gte(calls.finishedAt, since)))
    .orderBy(desc(calls.createdAt))
    .limit(RESYNC_MAX_CALLS);
  for (const c of changed) publish({ type: "call", id: c.id, status: c.status });
  const servers = await db.selectDistinct({ server: tools.server }).from(tools);
  for (const s of servers) publish({ type: "catalogue", server: s.server });
  publish({ type: "grants" });
  publish({ type: "resources" });
}
