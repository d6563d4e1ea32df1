import "server-only";
import type Database from "better-sqlite3";
import { drizzle } from "drizzle-orm/sqlite-proxy";

/** What drizzle's remote SQLite driver hands the callback, and what it expects back. */
type Method = "run" | "all" | "values" | "get";
type Answer = { rows: unknown[] };
type Callback = (sql: string, params: unknown[], method: Method) => Promise<Answer>;

/**
 * Runs one statement on `sqlite`, synchronously, the way drizzle's remote driver wants the
 * answer: rows as arrays (`get`: the one row, or undefined). Statements are compiled once per SQL
 * text: the call path runs the same few on every call, and compiling cost more than running.
 */
function runner(sqlite: Database.Database): (sql: string, params: unknown[], method: Method) => Answer {
  const statements = new Map<string, Database.Statement>();
  return (text, params, method) => {
    let statement = statements.get(text);
    if (!statement) {
      statement = sqlite.prepare(text);
      // Bounded: every SQL text comes from the code (values are parameters), so the map holds
      // the queries Gatehouse has, plus the few built with a variable number of parameters.
      if (statements.size < 2000) statements.set(text, statement);
    }
    if (method === "run" || !statement.reader) {
      statement.run(...params);
      return { rows: [] };
    }
    statement.raw(true);
    if (method === "get") return { rows: statement.get(...params) as unknown[] };
    return { rows: statement.all(...params) };
  };
}

/**
 * One writer at a time on the connection. A transaction's statements are awaited one by one, and
 * between two of them other requests' code runs: a statement of theirs on the same connection
 * would land inside the open transaction (and be rolled back with it). So while a transaction is
 * open every statement from outside it waits, and transactions take turns.
 */
class Turns {
  private held = false;
  private waiting: Array<() => void> = [];

  get busy(): boolean {
    return this.held || this.waiting.length > 0;
  }

  /** Resolves when the caller holds the turn; `release()` passes it on. */
  take(): Promise<void> {
    if (!this.held) {
      this.held = true;
      return Promise.resolve();
    }
    return new Promise((resolve) => this.waiting.push(resolve));
  }

  release(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.held = false;
  }
}

export interface SqliteDriver {
  /** The database statements outside any transaction go through. */
  outer: ReturnType<typeof drizzle>;
  /** The database a transaction's body is given (statements run at once: it holds the turn). */
  inner: ReturnType<typeof drizzle>;
  /** Runs raw SQL and answers rows as objects; `inside`: from a transaction's body (no waiting). */
  rows(text: string, params: unknown[], inside: boolean): Promise<Record<string, unknown>[]>;
  /**
   * Runs `fn` (which uses `inner`) in one `BEGIN IMMEDIATE … COMMIT`, or a savepoint when
   * `nested`. `noWait`: the BEGIN fails at once when another process holds the write lock,
   * instead of after the connection's busy_timeout (`busyTimeoutMs`, restored after).
   */
  transaction<T>(fn: () => Promise<T>, nested: boolean, noWait?: { busyTimeoutMs: number }): Promise<T>;
}

/**
 * drizzle's remote SQLite driver over a better-sqlite3 connection: every statement is async, as
 * on PostgreSQL, so one body of code serves both; statements still run synchronously underneath.
 */
export function sqliteDriver<S extends Record<string, unknown>>(
  sqlite: Database.Database,
  schema: S,
): SqliteDriver {
  const run = runner(sqlite);
  const turns = new Turns();
  const outerCallback: Callback = async (text, params, method) => {
    if (!turns.busy) return run(text, params, method);
    await turns.take();
    try {
      return run(text, params, method);
    } finally {
      turns.release();
    }
  };
  const innerCallback: Callback = async (text, params, method) => run(text, params, method);
  let depth = 0;
  const objects = (text: string, params: unknown[]) => {
    const statement = sqlite.prepare(text);
    if (!statement.reader) {
      statement.run(...params);
      return [];
    }
    return statement.all(...params) as Record<string, unknown>[];
  };
  return {
    async rows(text, params, inside) {
      if (inside || !turns.busy) return objects(text, params);
      await turns.take();
      try {
        return objects(text, params);
      } finally {
        turns.release();
      }
    },
    outer: drizzle(outerCallback, { schema }),
    inner: drizzle(innerCallback, { schema }),
    async transaction<T>(
      fn: () => Promise<T>,
      nested: boolean,
      noWait?: { busyTimeoutMs: number },
    ): Promise<T> {
      if (nested) {
        if (!sqlite.inTransaction) throw new Error("the transaction this one nests in has ended");
        const name = `sp${++depth}`;
        sqlite.exec(`SAVEPOINT ${name}`);
        try {
          const out = await fn();
          sqlite.exec(`RELEASE ${name}`);
          return out;
        } catch (err) {
          // Some errors (a full disk) end the whole transaction: nothing is left to roll back to.
          if (sqlite.inTransaction) sqlite.exec(`ROLLBACK TO ${name}; RELEASE ${name}`);
          throw err;
        } finally {
          depth--;
        }
      }
      await turns.take();
      try {
        // IMMEDIATE: the write lock is taken up front, so a store another process holds fails
        // here (after busy_timeout) rather than halfway through.
        if (noWait) sqlite.pragma("busy_timeout = 0");
        try {
          sqlite.exec("BEGIN IMMEDIATE");
        } finally {
          if (noWait) sqlite.pragma(`busy_timeout = ${noWait.busyTimeoutMs}`);
        }
        try {
          const out = await fn();
          sqlite.exec("COMMIT");
          return out;
        } catch (err) {
          if (sqlite.inTransaction) sqlite.exec("ROLLBACK");
          throw err;
        }
      } finally {
        turns.release();
      }
    },
  };
}
