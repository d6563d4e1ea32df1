import "server-only";
import { mkdirSync } from "node:fs";
import path from "node:path";
import Database from "better-sqlite3";
import type { SQL } from "drizzle-orm";
import { drizzle as betterSqlite } from "drizzle-orm/better-sqlite3";
import { migrate } from "drizzle-orm/better-sqlite3/migrator";
import { type BaseSQLiteDatabase, SQLiteAsyncDialect } from "drizzle-orm/sqlite-core";
import { GatehouseError } from "@/lib/errors";
import type { StoreLocation } from "./location";
import { assertNotNewer, localMigrations } from "./migrations";
import { openPg, type PgDb } from "./pg-driver";
import "./query-errors";
import { tablesDialect } from "./schema";
import { sqliteDriver } from "./sqlite-driver";

/**
 * The store, as every query sees it: drizzle's async SQLite API, whichever store is underneath.
 * On PostgreSQL the object is drizzle's pg database, built on schema.ts's PostgreSQL tables; the
 * code uses only what both share: awaited builders, `.returning()`, `prepare().execute()`,
 * {@link first} and {@link transaction} (never SQLite's `.get()`/`.all()`/`.run()`, nor
 * `db.transaction`; test/architecture.test.ts checks).
 */
export type Db = BaseSQLiteDatabase<"async", unknown>;

export type Dialect = "sqlite" | "postgres";

interface Handle {
  dialect: Dialect;
  /** Raw SQL on this handle's store (or transaction), rows as objects keyed by column alias. */
  rows(query: SQL): Promise<Record<string, unknown>[]>;
  /** Runs `fn` in a transaction on this handle's store; nested when the handle is a transaction's. */
  transaction<T>(fn: (tx: Db) => Promise<T>, opts: TransactionOptions): Promise<T>;
  close(): Promise<void>;
  /** The SQLite connection (SQLite only): the lock, backups and tests reach it through here. */
  sqlite?: Database.Database;
  /** The PostgreSQL URL (PostgreSQL only): listening for notifications takes a connection of its own. */
  postgresUrl?: string;
  /**
   * PostgreSQL only: the store this handle belongs to (itself for the store) and what its
   * statements run on (the pool for the store, the transaction's own connection for a transaction).
   */
  pg?: PgBinding;
  /** A store's own handle only (never a transaction's): hears each of its transactions (see {@link observeTransactions}). */
  onTransaction?: TransactionObserver;
}

/** Hears one transaction of a store: committed or rolled back, and how long it took with its retries (s). */
export type TransactionObserver = (outcome: "committed" | "rolled_back", seconds: number) => void;

/** Where a PostgreSQL handle's statements run: see {@link pgBindingOf}. */
export interface PgBinding {
  store: Db;
  client: unknown;
}

/**
 * The handle of every store and transaction object this process opened. On `globalThis`: Next
 * evaluates server modules more than once (the server's bundle, each route), and a store opened
 * by one copy of this module is used through the others.
 */
const HANDLES = Symbol.for("gatehouse.store.handles");
const holder = globalThis as { [HANDLES]?: WeakMap<object, Handle> };
holder[HANDLES] ??= new WeakMap();
const handles: WeakMap<object, Handle> = holder[HANDLES];

function handleOf(db: Db): Handle {
  const handle = handles.get(db);
  if (!handle) throw new Error("not a Gatehouse store (open it with openDb or openStore)");
  return handle;
}

/** Folder of the committed drizzle-kit migrations for `dialect`; resolved from the working directory. */
export function migrationsFolder(dialect: Dialect = "sqlite"): string {
  const root =
    process.env.GATEHOUSE_MIGRATIONS ?? path.join(/*turbopackIgnore: true*/ process.cwd(), "drizzle");
  return dialect === "postgres" ? path.join(root, "pg") : root;
}

export { dbPathFromEnv } from "./location";

/** How long a request waits for another process's write lock on SQLite before `store_busy` (ms). */
export const BUSY_TIMEOUT_MS = 5000;

export interface TransactionOptions {
  /**
   * `false`: on SQLite, fail at once (SQLITE_BUSY) when another process holds the write lock,
   * instead of after {@link BUSY_TIMEOUT_MS}. For background ticks (expiry), tried again shortly
   * anyway: better-sqlite3 is synchronous, so a wait for the lock is a wait of the whole process.
   * No effect on PostgreSQL. Default `true`.
   */
  wait?: boolean;
  /**
   * PostgreSQL only: `"read committed"` for a transaction whose statements are each right on
   * their own, whatever commits beside them (a conditional update and the writes that follow
   * from its answer). Such a transaction takes no predicate locks, so it never fails, nor makes
   * others fail, for a serialization conflict. Default `"serializable"`. No effect on SQLite.
   */
  isolation?: "serializable" | "read committed";
}

/**
 * Runs `fn` in one transaction: all of its writes or none. On SQLite one transaction runs at a
 * time and statements from outside wait for it; on PostgreSQL it is SERIALIZABLE and tried again
 * when PostgreSQL rolls it back for a concurrent one, so `fn` may run more than once and must do
 * nothing outside the store (publish, call, send) before it resolves. Given a transaction's `tx`,
 * nests (a savepoint: a failing inner part rolls back alone).
 */
export function transaction<T>(
  db: Db,
  fn: (tx: Db) => Promise<T>,
  opts: TransactionOptions = {},
): Promise<T> {
  const handle = handleOf(db);
  const observe = handle.onTransaction;
  if (!observe) return handle.transaction(fn, opts);
  const started = performance.now();
  return handle.transaction(fn, opts).then(
    (value) => {
      observe("committed", (performance.now() - started) / 1000);
      return value;
    },
    (err: unknown) => {
      observe("rolled_back", (performance.now() - started) / 1000);
      throw err;
    },
  );
}

/**
 * Has `observer` hear every transaction of store `db` from now on (nested ones are part of
 * theirs): the metrics' store latency. One observer per store; a second replaces the first.
 */
export function observeTransactions(db: Db, observer: TransactionObserver): void {
  handleOf(db).onTransaction = observer;
}

/** The first row `query` returns, or undefined: SQLite's `.get()`, on either store. */
export async function first<T>(query: PromiseLike<T[]>): Promise<T | undefined> {
  return (await query)[0];
}

/**
 * Rows of raw SQL (`sql\`…\``, spelled so that both stores read it the same), as objects keyed
 * by the column names or aliases of the query: for the few queries the builder cannot say.
 * drizzle's `db.all(sql)` answers arrays on SQLite and does not exist on PostgreSQL.
 */
export async function rows<T extends Record<string, unknown>>(db: Db, query: SQL): Promise<T[]> {
  return (await handleOf(db).rows(query)) as T[];
}

/** Which store `db` is. */
export function dialectOf(db: Db): Dialect {
  return handleOf(db).dialect;
}

/** The SQLite connection under `db`, or undefined on PostgreSQL. */
export function sqliteOf(db: Db): Database.Database | undefined {
  return handleOf(db).sqlite;
}

/**
 * PostgreSQL only (undefined on SQLite): the store `db` belongs to, and the pool or connection
 * its statements run on, for statements built once per store and run on any of its transactions
 * (prepared.ts).
 */
export function pgBindingOf(db: Db): PgBinding | undefined {
  return handleOf(db).pg;
}

/** The URL of the PostgreSQL store under `db`, or undefined on SQLite. Carries the password: never print it. */
export function postgresUrlOf(db: Db): string | undefined {
  return handleOf(db).postgresUrl;
}

/** Closes the store (waits for PostgreSQL's connections to end). */
export function closeDb(db: Db): Promise<void> {
  return handleOf(db).close();
}

function sqliteStore(sqlite: Database.Database): Db {
  const driver = sqliteDriver(sqlite, {});
  const outer = driver.outer as unknown as Db;
  const inner = driver.inner as unknown as Db;
  const close = async () => {
    if (sqlite.open) sqlite.close();
  };
  const dialect = new SQLiteAsyncDialect();
  const rawRows = (query: SQL, inside: boolean) => {
    const { sql: text, params } = dialect.sqlToQuery(query);
    return driver.rows(text, params, inside);
  };
  handles.set(outer, {
    dialect: "sqlite",
    rows: (query) => rawRows(query, false),
    sqlite,
    close,
    transaction: (fn, opts) =>
      driver.transaction(
        () => fn(inner),
        false,
        opts.wait === false ? { busyTimeoutMs: BUSY_TIMEOUT_MS } : undefined,
      ),
  });
  handles.set(inner, {
    dialect: "sqlite",
    rows: (query) => rawRows(query, true),
    sqlite,
    close,
    transaction: (fn) => driver.transaction(() => fn(inner), true),
  });
  return outer;
}

/**
 * Opens (creating the folder and file when missing) the SQLite store, switches it to WAL and
 * applies pending migrations, after refusing one migrated by a newer Gatehouse. `":memory:"`
 * opens a private in-memory store (tests).
 */
export function openDb(file: string): Db {
  if (tablesDialect !== "sqlite") {
    throw new GatehouseError(
      "store_config",
      "this process queries PostgreSQL tables (DATABASE_URL): it cannot open a SQLite store",
    );
  }
  if (file !== ":memory:") mkdirSync(path.dirname(/*turbopackIgnore: true*/ file), { recursive: true });
  const sqlite = new Database(file);
  sqlite.pragma("journal_mode = WAL");
  sqlite.pragma("foreign_keys = ON");
  sqlite.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`);
  // WAL with NORMAL sync is durable across process crashes (not power loss), which is what the
  // "never lose a pending call" promise is about.
  sqlite.pragma("synchronous = NORMAL");
  try {
    const folder = migrationsFolder("sqlite");
    const hasTable = sqlite.prepare("SELECT 1 FROM sqlite_master WHERE name = '__drizzle_migrations'").get();
    const applied = hasTable
      ? (sqlite.prepare('SELECT created_at AS "when" FROM __drizzle_migrations').all() as Array<{
          when: number;
        }>)
      : [];
    assertNotNewer(
      applied.map((a) => ({ when: Number(a.when) })),
      localMigrations(folder),
    );
    migrate(betterSqlite(sqlite), { migrationsFolder: folder });
  } catch (err) {
    sqlite.close();
    throw err;
  }
  return sqliteStore(sqlite);
}

/**
 * Opens the store at `location` (see `storeLocation`), migrated. PostgreSQL: connects, migrates
 * under an advisory lock; throws `store_unavailable` when it cannot be reached.
 */
export async function openStore(location: StoreLocation): Promise<Db> {
  if (location.dialect === "sqlite") return openDb(location.file);
  if (tablesDialect !== "postgres") {
    throw new GatehouseError(
      "store_config",
      "this process queries SQLite tables: set DATABASE_URL before Gatehouse starts to use PostgreSQL",
    );
  }
  const folder = migrationsFolder("postgres");
  const driver = await openPg(location.url, folder, localMigrations(folder));
  const db = driver.db as unknown as Db;
  let closing: Promise<void> | undefined;
  const close = () => {
    closing ??= driver.pool.end();
    return closing;
  };
  const register = (tx: PgDb): Db => {
    handles.set(tx, {
      dialect: "postgres",
      postgresUrl: location.url,
      pg: { store: db, client: sessionClientOf(tx) },
      rows: async (query) => (await tx.execute(query)).rows,
      close,
      transaction: (fn) =>
        (
          tx as unknown as { transaction: (f: (t: PgDb) => Promise<unknown>) => Promise<unknown> }
        ).transaction((inner) => fn(register(inner))) as never,
    });
    return tx as unknown as Db;
  };
  handles.set(db, {
    dialect: "postgres",
    postgresUrl: location.url,
    pg: { store: db, client: driver.pool },
    rows: async (query) => (await driver.db.execute(query)).rows,
    close,
    transaction: (fn, opts) => driver.transaction((tx) => fn(register(tx)), opts.isolation),
  });
  return db;
}

/**
 * The connection a drizzle transaction runs on: its session's client (drizzle-orm's
 * node-postgres session keeps it as `client`; pinned version, checked by the store tests).
 */
function sessionClientOf(tx: PgDb): unknown {
  const client = (tx as unknown as { session?: { client?: unknown } }).session?.client;
  if (!client) throw new Error("a PostgreSQL transaction without a connection (drizzle-orm changed?)");
  return client;
}

/**
 * Opens an existing SQLite store for reading only: no folder or file is created, no migration
 * applied, nothing can be written (SQLite refuses). For looking at a store a server owns (`rules
 * test`). Throws `not_found` when there is no store at `file`.
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
  return sqliteStore(sqlite);
}
