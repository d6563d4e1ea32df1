import "server-only";
import { mkdirSync } from "node:fs";
import path from "node:path";
import Database from "better-sqlite3";
import { type BetterSQLite3Database, drizzle } from "drizzle-orm/better-sqlite3";
import { migrate } from "drizzle-orm/better-sqlite3/migrator";
import { GatehouseError } from "@/lib/errors";
import * as schema from "./schema";

export type Db = BetterSQLite3Database<typeof schema> & { $client: Database.Database };

/** Folder of the committed drizzle-kit migrations; resolved from the working directory. */
export function migrationsFolder(): string {
  return process.env.GATEHOUSE_MIGRATIONS ?? path.join(/*turbopackIgnore: true*/ process.cwd(), "drizzle");
}

/** `GATEHOUSE_DB`, default `data/gatehouse.db` under the working directory. */
export function dbPathFromEnv(env: Record<string, string | undefined> = process.env): string {
  return path.resolve(/*turbopackIgnore: true*/ env.GATEHOUSE_DB ?? path.join("data", "gatehouse.db"));
}

/** How long a request waits for another process's write lock before `store_busy` (ms). */
export const BUSY_TIMEOUT_MS = 5000;

/**
 * Opens (creating the folder and file when missing) the SQLite store, switches it to WAL and
 * applies pending migrations. `":memory:"` opens a private in-memory store (tests).
 */
export function openDb(file: string): Db {
  if (file !== ":memory:") mkdirSync(path.dirname(/*turbopackIgnore: true*/ file), { recursive: true });
  const sqlite = new Database(file);
  sqlite.pragma("journal_mode = WAL");
  sqlite.pragma("foreign_keys = ON");
  sqlite.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`);
  // WAL with NORMAL sync is durable across process crashes (not power loss), which is what the
  // "never lose a pending call" promise is about.
  sqlite.pragma("synchronous = NORMAL");
  const db = drizzle(sqlite, { schema }) as Db;
  migrate(db, { migrationsFolder: migrationsFolder() });
  return db;
}

/**
 * Runs `fn` on `db` without waiting for another process's write lock: a busy store fails it at
 * once (SQLITE_BUSY) instead of after {@link BUSY_TIMEOUT_MS}. For background ticks (expiry),
 * which are tried again shortly anyway: better-sqlite3 is synchronous, so every wait for the
 * lock is a wait of the whole process, and a tick each second that waited five would leave no
 * time for anything else while the lock is held.
 */
export function withoutWaiting<T>(db: Db, fn: () => T): T {
  db.$client.pragma("busy_timeout = 0");
  try {
    return fn();
  } finally {
    db.$client.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`);
  }
}

/**
 * Opens an existing store for reading only: no folder or file is created, no migration applied,
 * nothing can be written (SQLite refuses). For looking at a store a server owns (`rules test`).
 * Throws `not_found` when there is no store at `file`.
 */
export function openDbReadOnly(file: string): Db {
  let sqlite: Database.Database;
  try {
    sqlite = new Database(file, { readonly: true, fileMustExist: true });
  } catch (err) {
    throw new GatehouseError(
      "not_found",
      `no Gatehouse store at ${file} (set GATEHOUSE_DB, or start Gatehouse once)`,
      {
        cause: err,
      },
    );
  }
  sqlite.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`);
  return drizzle(sqlite, { schema }) as Db;
}
