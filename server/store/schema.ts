/**
 * The tables this process queries: schema-sqlite's, or their PostgreSQL twins (schema-pg) when
 * `DATABASE_URL` names PostgreSQL. Chosen once, when this module loads, because the store is a
 * fact of the deployment and every query builds on these objects; `openStore` refuses a store of
 * the other kind. Both are typed as schema-sqlite's: the twins carry the same columns with the
 * same values, and the code queries them only in ways both dialects share (awaited builders,
 * `.returning()`, never SQLite's `.get()`/`.all()`/`.run()`); the tests run on both stores.
 */
// Relative, not "@/…": drizzle-kit and the migration scripts load these without path aliases.
import { type SQL, sql } from "drizzle-orm";
import { isPostgresUrl } from "./location";
import * as pg from "./schema-pg";
import * as sqlite from "./schema-sqlite";

/** The dialect every table below belongs to. */
export const tablesDialect: "sqlite" | "postgres" = isPostgresUrl(process.env.DATABASE_URL?.trim() ?? "")
  ? "postgres"
  : "sqlite";

const chosen: typeof sqlite = tablesDialect === "postgres" ? { ...pg, now: sqlite.now } : sqlite;

export const users = chosen.users;
export const sessions = chosen.sessions;
export const setupCodes = chosen.setupCodes;
export const agentTokens = chosen.agentTokens;
export const tools = chosen.tools;
export const catalogueChanges = chosen.catalogueChanges;
export const changeReads = chosen.changeReads;
export const overCapTools = chosen.overCapTools;
export const serverSwitches = chosen.serverSwitches;
export const calls = chosen.calls;
export const auditEvents = chosen.auditEvents;
export const notificationDeliveries = chosen.notificationDeliveries;
export const grants = chosen.grants;
export const serverOauth = chosen.serverOauth;
export const oauthPending = chosen.oauthPending;
export const serverHistory = chosen.serverHistory;
export const replicas = chosen.replicas;
export const serverHolders = chosen.serverHolders;
export const mcpSessions = chosen.mcpSessions;
export const signInCounters = chosen.signInCounters;
export const heldResults = chosen.heldResults;
export const linkedUris = chosen.linkedUris;
export const agentRates = chosen.agentRates;
export const notificationDigests = chosen.notificationDigests;

/**
 * The database's clock `ms` milliseconds ago (0: now), as ISO 8601 UTC text with milliseconds,
 * the form of every timestamp column. For leases between replicas: one clock for all, so the
 * replicas' own clocks need not agree.
 */
export function dbTimeAgo(ms: number): SQL {
  const seconds = (ms / 1000).toFixed(3);
  return tablesDialect === "postgres"
    ? sql`to_char((now() - make_interval(secs => ${sql.raw(seconds)})) at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`
    : sql`strftime('%Y-%m-%dT%H:%M:%fZ', 'now', ${sql.raw(`'-${seconds} seconds'`)})`;
}
