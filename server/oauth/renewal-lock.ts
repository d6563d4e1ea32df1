import "server-only";
import pg from "pg";
import { type Db, postgresUrlOf } from "../store/db";

/** How long a replica waits for another's renewal of the same grant before failing (ms). */
export const RENEWAL_LOCK_WAIT_MS = 60_000;

/** A renewal lock held: {@link release} ends it (and never rejects). */
export interface RenewalLock {
  release(): Promise<void>;
}

/**
 * Takes the lock under which one replica at a time renews `server`'s grant, across every
 * replica of the store: an authorization server that rotates refresh tokens takes each one
 * once, and one presented again ends the whole grant, so two replicas must never refresh with
 * the same token. On PostgreSQL, a session advisory lock keyed by the server's name, on a
 * connection of its own held for as long as the renewal runs: the refresh is a network request,
 * which may not run inside a store transaction (SERIALIZABLE, run again on a conflict, its
 * request then sent twice), and a transaction-scoped lock ends with its transaction. A replica
 * that dies holding it loses its connection, and the lock with it. The schema has no column to
 * claim a renewal with (a version, a lease), and a conditional write of the result would come
 * after the refresh token had been spent twice. Waits at most {@link RENEWAL_LOCK_WAIT_MS}, then
 * rejects (a renewal that failed: retried at the supervisor's pace). On SQLite, one process
 * serves the store and renews each grant once at a time already: nothing to take.
 */
export async function takeRenewalLock(db: Db, server: string): Promise<RenewalLock> {
  const url = postgresUrlOf(db);
  if (!url) return { release: async () => undefined };
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5_000 });
  // A connection lost while held: the lock is gone with it; the renewal's write still stands alone.
  client.on("error", () => undefined);
  await client.connect();
  try {
    await client.query(`SET lock_timeout = ${RENEWAL_LOCK_WAIT_MS}`);
    await client.query("SELECT pg_advisory_lock(hashtext($1))", [`gatehouse oauth renewal ${server}`]);
  } catch (err) {
    await client.end().catch(() => undefined);
    throw err;
  }
  return {
    // Ending the session releases the lock; no unlock statement needed.
    release: () => client.end().catch(() => undefined),
  };
}
