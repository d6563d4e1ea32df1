import "server-only";
import { and, asc, desc, eq, lte } from "drizzle-orm";
import type { ServerState } from "@/lib/api-types";
import { type Logger, redact } from "../log";
import type { HistoryEntry, HistoryStore } from "../mcp/supervision";
import { type Db, first, transaction } from "../store/db";
import { errorCode } from "../store/pg-driver";
import { serverHistory } from "../store/schema";

/** Longest `detail` stored; a server's error text can be long, and 50 rows a server must stay small. */
export const STORED_DETAIL_CHARS = 2000;
/** Wait before writing again the entries a store locked by another process refused. */
const RETRY_MS = 1000;
/** Most entries held back while the store is locked; the oldest go first beyond it. */
const MAX_PENDING = 500;

interface Pending {
  server: string;
  entry: HistoryEntry;
  limit: number;
}

/**
 * Servers' state changes in the store (`server_history`), so the owner's view of a server's
 * history outlives a restart. Each change is one insert, and the server's rows beyond `limit`
 * are deleted in the same transaction: the table never holds more than `limit` rows a server.
 *
 * Details are redacted as they are written (with the secrets registered by then, which is every
 * configured one: the runtime registers them before any server is dialled) and cut to
 * {@link STORED_DETAIL_CHARS}: a server may echo a credential in its error text, and nothing
 * holds such text in clear elsewhere (`lastError` lives in memory only).
 *
 * A change happens on the supervisor's path (a failing call's, too), so `append` returns at once
 * and the entries are written behind it, one write at a time and in order (what arrives during a
 * write goes into the next). A write never waits for another process's write lock on SQLite: a
 * busy store (a CLI command writing) fails it at once, and the entries are written with the next
 * change, or after {@link RETRY_MS}. Any other failure is logged and the entries kept in memory
 * only; nothing here throws.
 */
export class StoredServerHistory implements HistoryStore {
  private pending: Pending[] = [];
  private retryTimer: NodeJS.Timeout | null = null;
  /** The write under way, if any. */
  private writing: Promise<void> | null = null;
  /** Entries arrived during the write under way: write again when it ends. */
  private again = false;
  private closed = false;

  constructor(
    private readonly db: Db,
    private readonly log: Logger,
  ) {}

  async load(server: string, limit: number): Promise<HistoryEntry[]> {
    try {
      const rows = await this.db
        .select()
        .from(serverHistory)
        .where(eq(serverHistory.server, server))
        .orderBy(desc(serverHistory.id))
        .limit(limit);
      return rows.reverse().map((row) => ({
        at: row.at,
        state: row.state as ServerState,
        detail: row.detail,
        ...(row.started ? { started: true as const } : {}),
      }));
    } catch (err) {
      this.log.warn(`history of server ${server} could not be read; it starts empty`, { error: String(err) });
      return [];
    }
  }

  append(server: string, entry: HistoryEntry, limit: number): void {
    this.pending.push({ server, entry, limit });
    if (this.pending.length > MAX_PENDING) this.pending.splice(0, this.pending.length - MAX_PENDING);
    this.write();
  }

  /** The server's stored rows, oldest first (tests, and a look at what the table holds). */
  async rows(server: string): Promise<(typeof serverHistory.$inferSelect)[]> {
    return await this.db
      .select()
      .from(serverHistory)
      .where(eq(serverHistory.server, server))
      .orderBy(asc(serverHistory.id));
  }

  /** Resolves once the entries appended so far are written (or have failed); tests, and stop. */
  async settled(): Promise<void> {
    while (this.writing) await this.writing;
  }

  /**
   * Cancels a retry still waiting (and any later one); entries a busy store refused are not
   * written. Resolves once the writes under way have ended, so the store can be closed after it.
   */
  async close(): Promise<void> {
    this.closed = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = null;
    await this.settled();
  }

  /** Starts writing what is pending, or, during a write, has it written when that one ends. */
  private write(): void {
    if (this.retryTimer) {
      clearTimeout(this.retryTimer);
      this.retryTimer = null;
    }
    if (this.writing) {
      this.again = true;
      return;
    }
    this.writing = this.writeBatch().finally(() => {
      this.writing = null;
      if (this.again) {
        this.again = false;
        this.write();
      }
    });
  }

  /** Writes the pending entries in one transaction; never rejects. */
  private async writeBatch(): Promise<void> {
    const batch = this.pending;
    this.pending = [];
    if (batch.length === 0) return;
    try {
      await transaction(
        this.db,
        async (tx) => {
          for (const { server, entry, limit } of batch) {
            await tx.insert(serverHistory).values({
              server,
              at: entry.at,
              state: entry.state,
              detail: stored(entry.detail),
              started: entry.started === true,
            });
            // The newest `limit` rows stay; the row just past them and everything older go.
            const cut = await first(
              tx
                .select({ id: serverHistory.id })
                .from(serverHistory)
                .where(eq(serverHistory.server, server))
                .orderBy(desc(serverHistory.id))
                .limit(1)
                .offset(limit),
            );
            if (cut) {
              await tx
                .delete(serverHistory)
                .where(and(eq(serverHistory.server, server), lte(serverHistory.id, cut.id)));
            }
          }
        },
        { wait: false },
      );
    } catch (err) {
      if (busy(err)) {
        // Back in front of what arrived meanwhile, so the order stays; the oldest go beyond the bound.
        this.pending = [...batch, ...this.pending];
        if (this.pending.length > MAX_PENDING) this.pending.splice(0, this.pending.length - MAX_PENDING);
        if (!this.closed && !this.again) {
          this.retryTimer = setTimeout(() => this.write(), RETRY_MS);
          this.retryTimer.unref();
        }
        return;
      }
      this.log.warn(
        `${batch.length} server history entr${batch.length === 1 ? "y" : "ies"} could not be stored`,
        {
          error: String(err),
        },
      );
    }
  }
}

function stored(detail: string | null): string | null {
  if (detail === null) return null;
  const shown = redact(detail);
  return shown.length > STORED_DETAIL_CHARS ? `${shown.slice(0, STORED_DETAIL_CHARS - 1)}…` : shown;
}

/**
 * Whether `err` is SQLite's "another process holds the write lock" (drizzle wraps a statement's
 * error: its `cause` chain is searched). Only SQLite's own codes match: PostgreSQL's are
 * five-character SQLSTATEs, and a PostgreSQL failure is logged like any other.
 */
function busy(err: unknown): boolean {
  const code = errorCode(err);
  return code.startsWith("SQLITE_BUSY") || code.startsWith("SQLITE_LOCKED");
}
