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

/**
 * Opens (creating the folder and file when missing) the SQLite store, switches it to WAL and
 * applies pending migrations. `":memory:"` opens a private in-memory store (tests).
 */
export function openDb(file: string): Db {
  if (file !== ":memory:") mkdirSync(path.dirname(/*turbopackIgnore: true*/ file), { recursive: true });
  const sqlite = new Database(file);
  sqlite.pragma("journal_mode = WAL");
  sqlite.pragma("foreign_keys = ON");
  sqlite.pragma("busy_timeout = 5000");
  // WAL with NORMAL sync is durable across process crashes (not power loss), which is what the
  // "never lose a pending call" promise is about.
  sqlite.pragma("synchronous = NORMAL");
  const db = drizzle(sqlite, { schema }) as Db;
  migrate(db, { migrationsFolder: migrationsFolder() });
  return db;
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
  sqlite.pragma("busy_timeout = 5000");
  return drizzle(sqlite, { schema }) as Db;
}
