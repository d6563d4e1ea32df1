import "server-only";
import { type Db, pgBindingOf } from "./db";

const caches = new WeakMap<Db, Map<string, unknown>>();

/**
 * One prepared statement per `key` and store, built on first use. The call path runs the same
 * few queries on every call; building and compiling them each time (drizzle's SQL builder,
 * then the database's parse and plan) cost more than running them.
 *
 * SQLite: one statement per `key` and handle (the store, or the transaction's handle, which is
 * the same connection).
 *
 * PostgreSQL: one statement per `key` and store, shared by its transactions, and named `key`,
 * so each pooled connection parses and plans it once (node-postgres remembers which names a
 * connection has parsed) instead of on every execution. Run through `db`, it runs on `db`'s
 * connection: a transaction's statements stay in the transaction. `key` must name one SQL text
 * (PostgreSQL refuses a second text under a name a connection knows). Behind PgBouncer in
 * transaction mode this needs `max_prepared_statements` (PgBouncer 1.21 or newer).
 */
export function prepared<T>(db: Db, key: string, build: () => T): T {
  const pg = pgBindingOf(db);
  const owner = pg?.store ?? db;
  let cache = caches.get(owner);
  if (!cache) {
    cache = new Map();
    caches.set(owner, cache);
  }
  let statement = cache.get(key) as T | undefined;
  if (statement === undefined) {
    statement = build();
    if (pg) nameStatement(statement, key);
    cache.set(key, statement);
  }
  // drizzle's node-postgres statement runs on its `client`: the one it was built on may be a
  // transaction's connection given back to the pool since, so every use says which to run on.
  return pg ? (Object.create(statement as object, { client: { value: pg.client } }) as T) : statement;
}

/**
 * Runs `text` (PostgreSQL only) as a statement named `name` on `db`'s connection (a
 * transaction's own, or the pool's), with positional `values`: for the few hot statements
 * drizzle's builder cannot say (a data-modifying WITH). Rows as objects by column name.
 */
export async function pgStatement(
  db: Db,
  name: string,
  text: string,
  values: unknown[],
): Promise<Record<string, unknown>[]> {
  const pg = pgBindingOf(db);
  if (!pg) throw new Error(`${name} runs on PostgreSQL only`);
  const client = pg.client as {
    query(config: {
      name: string;
      text: string;
      values: unknown[];
    }): Promise<{ rows: Record<string, unknown>[] }>;
  };
  return (await client.query({ name, text, values })).rows;
}

/** Names a drizzle node-postgres prepared statement (its two query configs; pinned drizzle-orm). */
function nameStatement(statement: unknown, name: string): void {
  const s = statement as { rawQueryConfig?: { name?: string }; queryConfig?: { name?: string } };
  if (!s.rawQueryConfig || !s.queryConfig) {
    throw new Error("not a drizzle node-postgres prepared statement (drizzle-orm changed?)");
  }
  s.rawQueryConfig.name = name;
  s.queryConfig.name = name;
}
