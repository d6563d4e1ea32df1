import "server-only";
import { setTimeout as delay } from "node:timers/promises";
import { drizzle, type NodePgDatabase } from "drizzle-orm/node-postgres";
import { migrate } from "drizzle-orm/node-postgres/migrator";
import pg from "pg";
import { GatehouseError } from "@/lib/errors";
import { logger } from "../log";
import { type AppliedMigration, assertNotNewer } from "./migrations";

const log = logger("store");

/** Advisory lock key under which replicas starting together migrate one at a time ("gh-migr"). */
const MIGRATION_LOCK = 0x6768_6d69;

/** SQLSTATEs of a transaction PostgreSQL rolled back for another's sake: run it again. */
const RETRYABLE = new Set(["40001", "40P01"]);

/** How many times a transaction is tried before its serialization failure is let through. */
export const TRANSACTION_ATTEMPTS = 10;

/** The SQLSTATE (or Node error code) of `err` or of an error in its `cause` chain. */
export function errorCode(err: unknown): string {
  for (let e = err, depth = 0; e && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string") return code;
  }
  return "";
}

/** Node's codes for a connection that could not be made or broke. */
const NETWORK_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "EPIPE",
  "ETIMEDOUT",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EHOSTUNREACH",
]);

/** pg's own words for a broken connection, and for no connection free in time. */
/**
 * The node-postgres messages of a lost or refused connection, and PostgreSQL's own refusal of a
 * database closed to connections (SQLSTATE 55000, which otherwise means other things).
 */
const CONNECTION_MESSAGES =
  /Connection terminated|connection timeout|Client has encountered a connection error|timeout exceeded when trying to connect|Cannot use a pool after calling end|is not currently accepting connections/i;

/**
 * Whether `err` (or an error in its `cause` chain) says PostgreSQL could not be reached or went
 * away, not that a statement was wrong: SQLSTATE class 08 and the shutdown codes, Node's network
 * codes, and pg's own messages.
 */
export function isConnectionFault(err: unknown): boolean {
  for (let e = err, depth = 0; e && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (
      typeof code === "string" &&
      (code.startsWith("08") || /^57P0[123]$/.test(code) || NETWORK_CODES.has(code))
    )
      return true;
    if (CONNECTION_MESSAGES.test(e instanceof Error ? e.message : String(e))) return true;
  }
  return false;
}

export type PgDb = NodePgDatabase<Record<string, never>>;

export interface PgDriver {
  db: PgDb;
  pool: pg.Pool;
  /**
   * Runs `fn` in one SERIALIZABLE transaction, tried again (up to {@link TRANSACTION_ATTEMPTS}
   * times, after a short random pause) when PostgreSQL rolls it back for a concurrent one:
   * SERIALIZABLE makes every transaction behave as if it ran alone, which is what each was
   * written for on SQLite (one writer at a time), so `fn` may run more than once and must do
   * nothing outside the store. `isolation` `"read committed"` is for a transaction that is right
   * without it (see `TransactionOptions.isolation` in db.ts); default `"serializable"`.
   */
  transaction<T>(fn: (tx: PgDb) => Promise<T>, isolation?: "serializable" | "read committed"): Promise<T>;
}

/** The address of `url` without its credentials, for messages. */
export function where(url: string): string {
  const u = new URL(url);
  return `${u.hostname}:${u.port || "5432"}${u.pathname}`;
}

/**
 * Connects to PostgreSQL at `url`, then migrates it under an advisory lock (replicas starting
 * together migrate once; the others wait, then find nothing to do) after refusing a database
 * whose schema is newer than this build. Throws `store_unavailable` when PostgreSQL cannot be
 * reached, `store_config` when the schema is newer.
 */
export async function openPg(
  url: string,
  migrationsFolder: string,
  localMigrations: AppliedMigration[],
): Promise<PgDriver> {
  const pool = new pg.Pool({
    connectionString: url,
    // Statements are short and no transaction waits on anything outside the store, so a few
    // connections serve many requests; a burst queues for one rather than failing.
    max: 16,
    // A request that waited this long for a connection answers `store_unavailable`. Generous:
    // connecting costs a SCRAM exchange, slow on a process busy with a burst of requests.
    connectionTimeoutMillis: 15_000,
    idleTimeoutMillis: 30_000,
  });
  // An idle client whose connection breaks emits here; unhandled, it would end the process.
  pool.on("error", (err) => log.warn("PostgreSQL connection lost", { error: errorCode(err) || String(err) }));
  let client: pg.PoolClient;
  try {
    client = await pool.connect();
  } catch (err) {
    await pool.end().catch(() => undefined);
    throw new GatehouseError(
      "store_unavailable",
      `PostgreSQL at ${where(url)} cannot be reached (${errorCode(err) || (err as Error).message}); check DATABASE_URL and that the server is up`,
      { cause: err },
    );
  }
  try {
    await client.query("SELECT pg_advisory_lock($1)", [MIGRATION_LOCK]);
    try {
      const applied = await client
        .query<{ created_at: string; hash: string }>(
          `SELECT created_at, hash FROM drizzle.__drizzle_migrations ORDER BY created_at`,
        )
        .catch((err: unknown) => {
          // A database never migrated has neither the schema nor the table yet.
          if (errorCode(err) === "3F000" || errorCode(err) === "42P01") return { rows: [] };
          throw err;
        });
      assertNotNewer(
        applied.rows.map((r) => ({ when: Number(r.created_at), hash: r.hash })),
        localMigrations,
      );
      await migrate(drizzle(client), { migrationsFolder });
    } finally {
      await client.query("SELECT pg_advisory_unlock($1)", [MIGRATION_LOCK]);
    }
  } catch (err) {
    client.release();
    await pool.end().catch(() => undefined);
    throw err;
  }
  client.release();
  const db = drizzle(pool);
  return {
    db,
    pool,
    async transaction<T>(
      fn: (tx: PgDb) => Promise<T>,
      isolation: "serializable" | "read committed" = "serializable",
    ): Promise<T> {
      for (let attempt = 1; ; attempt++) {
        try {
          return await db.transaction((tx) => fn(tx as unknown as PgDb), { isolationLevel: isolation });
        } catch (err) {
          if (attempt >= TRANSACTION_ATTEMPTS || !RETRYABLE.has(errorCode(err))) throw err;
          await delay(Math.random() * 5 * attempt);
        }
      }
    },
  };
}
