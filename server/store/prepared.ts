import "server-only";
import type { Db } from "./db";

const caches = new WeakMap<Db, Map<string, unknown>>();

/**
 * One prepared statement per `key` and store, built on first use. The call path runs the same
 * few queries on every call; building and compiling them each time (drizzle's SQL builder,
 * then SQLite's prepare) cost more than running them.
 */
export function prepared<T>(db: Db, key: string, build: () => T): T {
  let cache = caches.get(db);
  if (!cache) {
    cache = new Map();
    caches.set(db, cache);
  }
  let statement = cache.get(key) as T | undefined;
  if (statement === undefined) {
    statement = build();
    cache.set(key, statement);
  }
  return statement;
}
