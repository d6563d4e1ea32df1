import "server-only";
import { type Db, dialectOf, sqliteOf, type TransactionOptions, transaction } from "./db";

interface Queued {
  write: (tx: Db) => Promise<void>;
  resolve: () => void;
  reject: (err: unknown) => void;
}

/**
 * Group commit for the call path. On SQLite, writes queued during one turn of the event loop are
 * committed together, in one transaction, at `setImmediate`; each runs in its own savepoint, so a
 * write that throws is rolled back alone and only its promise rejects. `write()` resolves once
 * its transaction has committed, so a caller that awaits it has its row on disk (WAL) before it
 * answers anyone.
 *
 * Why: every SQLite commit writes each page it touched to the WAL, and a call's row and audit
 * entries touch about ten (table and index pages). Calls arriving together share those pages
 * and one commit; a lone call pays what it paid before, plus one turn of the event loop.
 *
 * On PostgreSQL each write is its own transaction, at once: PostgreSQL already commits
 * concurrent transactions together, and unrelated writes in one SERIALIZABLE transaction would
 * only conflict more (and be run again together).
 *
 * Writes that must decide something at once (the conditional `pending → running` update of
 * an approval) do not go through here; they run on the store directly.
 */
export class WriteBatch {
  private queue: Queued[] = [];
  private scheduled: NodeJS.Immediate | null = null;
  private readonly batched: boolean;

  constructor(private readonly db: Db) {
    this.batched = dialectOf(db) === "sqlite";
  }

  /**
   * Queues `write` (statements on the `tx` it is given) for the next group commit. `isolation`
   * applies on PostgreSQL only (see {@link TransactionOptions}); so does `alone`: the write is
   * one statement, atomic on its own, and runs on the store outside any transaction (saving
   * the round trips of BEGIN and COMMIT). Default false.
   */
  write(
    write: (tx: Db) => Promise<void>,
    opts: Pick<TransactionOptions, "isolation"> & { alone?: boolean } = {},
  ): Promise<void> {
    if (!this.batched) return opts.alone ? write(this.db) : transaction(this.db, write, opts);
    return new Promise((resolve, reject) => {
      this.queue.push({ write, resolve, reject });
      this.scheduled ??= setImmediate(() => void this.flush());
    });
  }

  /** Commits everything queued now (also called on shutdown, before the store closes). */
  async flush(): Promise<void> {
    if (this.scheduled) clearImmediate(this.scheduled);
    this.scheduled = null;
    const batch = this.queue;
    this.queue = [];
    if (batch.length === 0) return;
    const failures = new Map<Queued, unknown>();
    try {
      await transaction(this.db, async (tx) => {
        for (const q of batch) {
          try {
            // A nested transaction is a savepoint: a failing write rolls back only itself.
            await transaction(tx, q.write);
          } catch (err) {
            // Some errors (a full disk, RAISE(ROLLBACK)) end the whole transaction: the writes
            // before were rolled back too, and the ones after must not run outside it.
            if (sqliteOf(this.db)?.inTransaction === false) throw err;
            failures.set(q, err);
          }
        }
      });
    } catch (err) {
      // The commit itself failed (disk full, store closed): nothing of the batch was written.
      for (const q of batch) q.reject(err);
      return;
    }
    for (const q of batch) {
      if (failures.has(q)) q.reject(failures.get(q));
      else q.resolve();
    }
  }
}
