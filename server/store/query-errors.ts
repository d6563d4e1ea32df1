import "server-only";
import { DrizzleQueryError } from "drizzle-orm/errors";
import { PgPreparedQuery } from "drizzle-orm/pg-core/session";
import { SQLitePreparedQuery } from "drizzle-orm/sqlite-core/session";

type QueryWithCache = (text: string, params: unknown[], query: () => Promise<unknown>) => Promise<unknown>;

/**
 * drizzle wraps every failed statement in a `DrizzleQueryError` whose message carries the
 * statement's parameters: call arguments, token and session hashes, sealed secrets. Messages
 * reach logs and error answers, so a failed statement surfaces here as the driver's own error
 * instead (better-sqlite3's `SqliteError`, pg's `DatabaseError`: their code and message, no
 * parameters), as drizzle's synchronous SQLite driver did. Applied once per copy of drizzle
 * (Next bundles server modules more than once).
 */
function unwrapFailures(proto: { queryWithCache: QueryWithCache }): void {
  const marked = proto as { queryWithCache: QueryWithCache & { unwraps?: true } };
  if (marked.queryWithCache.unwraps) return;
  const original = marked.queryWithCache;
  const patched = async function (
    this: unknown,
    text: string,
    params: unknown[],
    query: () => Promise<unknown>,
  ) {
    try {
      return await original.call(this, text, params, query);
    } catch (err) {
      throw err instanceof DrizzleQueryError && err.cause ? err.cause : err;
    }
  } as QueryWithCache & { unwraps?: true };
  patched.unwraps = true;
  marked.queryWithCache = patched;
}

unwrapFailures(SQLitePreparedQuery.prototype as unknown as { queryWithCache: QueryWithCache });
unwrapFailures(PgPreparedQuery.prototype as unknown as { queryWithCache: QueryWithCache });
