import { index, integer, real, sqliteTable, text } from "drizzle-orm/sqlite-core";
// Relative, not "@/…": drizzle-kit loads this file without the tsconfig path aliases.
import { now } from "./schema-now";

/**
 * Tables of schema-sqlite.ts that reference no other: the replicas and what they share (who runs
 * which stdio server, sign-in counters, held results, linked URIs, agents' call buckets, email digests).
 * schema-sqlite.ts re-exports them; this file is part of the one schema definition.
 */

/**
 * The Gatehouse processes serving this store, each with its heartbeat (the database's clock); one
 * whose heartbeat is older than the lease is dead (server/replicas/registry.ts).
 */
export const replicas = sqliteTable("replicas", {
  /** Random, chosen at start; a restarted process is a new replica. */
  id: text("id").primaryKey(),
  /** Where the other replicas reach its internal route (`GATEHOUSE_INTERNAL_URL`), or null. */
  address: text("address"),
  /** Host name and process id, for people reading the Servers page. */
  label: text("label").notNull(),
  startedAt: text("started_at").notNull().default(now),
  heartbeatAt: text("heartbeat_at").notNull().default(now),
});

/** Which replica runs each stdio server (server/replicas/holding.ts): where its calls are forwarded. */
export const serverHolders = sqliteTable("server_holders", {
  /** The server's config name. */
  server: text("server").primaryKey(),
  replica: text("replica").notNull(),
  since: text("since").notNull().default(now),
});

/** The sign-in throttle's counters: `name:<name>` or `address:<bucket>` (server/auth/throttle.ts). */
export const signInCounters = sqliteTable("sign_in_counters", {
  key: text("key").primaryKey(),
  /** When the current window opened (ISO 8601). */
  since: text("since").notNull(),
  /** Attempts counted in that window. */
  attempts: integer("attempts").notNull().default(0),
});

/**
 * The full result of a held call whose stored result was cut to `RESULT_STORE_MAX_BYTES`: kept
 * for a while (`keptUntil`) so the agent waiting for it, on whichever replica, receives it whole.
 */
export const heldResults = sqliteTable(
  "held_results",
  {
    callId: text("call_id").primaryKey(),
    /** The result's JSON. */
    result: text("result").notNull(),
    keptUntil: text("kept_until").notNull(),
  },
  (t) => [index("held_results_kept_idx").on(t.keptUntil)],
);

/** URIs a server linked in tool results passed to agents, readable through any replica (links.ts). */
export const linkedUris = sqliteTable(
  "linked_uris",
  {
    /** sha256 of the server's name, a NUL and the URI (a URI may be longer than an index key). */
    key: text("key").primaryKey(),
    server: text("server").notNull(),
    linkedAt: text("linked_at").notNull().default(now),
  },
  (t) => [index("linked_uris_server_idx").on(t.server, t.linkedAt)],
);

/**
 * Agent tokens' call buckets (`callsPerMinute`) on PostgreSQL, shared by every replica
 * (server/agents/rates.ts). Unused on SQLite, where one process counts in memory.
 */
export const agentRates = sqliteTable("agent_rates", {
  tokenName: text("token_name").primaryKey(),
  /** Calls left in the bucket when it was last taken from (a fraction while it refills). */
  tokens: real("tokens").notNull(),
  /** When that was: milliseconds since the epoch, on the clock of the replica that took. */
  takenAt: real("taken_at").notNull(),
});

/**
 * Pending-call digests by email (server/notify/digests.ts), one row per reviewer and requester:
 * whether a digest to that reviewer about that requester is queued, and when the next may go.
 */
export const notificationDigests = sqliteTable("notification_digests", {
  /** The reviewer's user name, a line break, and the requester (`agent:<name>` or `user:<name>`). */
  key: text("key").primaryKey(),
  /** 1 while a digest row for this key is queued in the outbox (at most one is). */
  queued: integer("queued").notNull(),
  /** The earliest time the next digest for this key may be sent. */
  notBefore: text("not_before").notNull(),
});
