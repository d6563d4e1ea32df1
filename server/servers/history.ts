import "server-only";
import { and, asc, desc, eq, lte } from "drizzle-orm";
import type { ServerState } from "@/lib/api-types";
import { type Logger, redact } from "../log";
import type { HistoryEntry, HistoryStore } from "../mcp/supervision";
import { type Db, withoutWaiting } from "../store/db";
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
 * A change happens on the supervisor's path (a failing call's, too), so a write never waits for
 * another process's write lock: a busy store (a CLI command writing) fails it at once, and the
 * entry is written with the next change, or after {@link RETRY_MS}. Any other failure is logged
 * and the entry kept in memory only; nothing here throws.
 */
export class StoredServerHistory implements HistoryStore {
  private pending: Pending[] = [];
  private retryTimer: NodeJS.Timeout | null = null;

  constructor(
    private readonly db: Db,
    private readonly log: Logger,
  ) {}

  load(server: string, limit: number): HistoryEntry[] {
    try {
      const rows = this.db
        .select()
        .from(serverHistory)
        .where(eq(serverHistory.server, server))
        .orderBy(desc(serverHistory.id))
        .limit(limit)
        .all();
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
  rows(server: string): (typeof serverHistory.$inferSelect)[] {
    return this.db
      .select()
      .from(serverHistory)
      .where(eq(serverHistory.server, server))
      .orderBy(asc(serverHistory.id))
      .all();
  }

  /** Cancels a retry still waiting; entries not written by then are not written. */
  close(): void {
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = null;
  }

  private write(): void {
    if (this.retryTimer) {
      clearTimeout(this.retryTimer);
      this.retryTimer = null;
    }
    const batch = this.pending;
    if (batch.length === 0) return;
    try {
      withoutWaiting(this.db, () =>
        this.db.transaction((tx) => {
          for (const { server, entry, limit } of batch) {
            tx.insert(serverHistory)
              .values({
                server,
                at: entry.at,
                state: entry.state,
                detail: stored(entry.detail),
                started: entry.started === true,
              })
              .run();
            // The newest `limit` rows stay; the row just past them and everything older go.
            const cut = tx
              .select({ id: serverHistory.id })
              .from(serverHistory)
              .where(eq(serverHistory.server, server))
              .orderBy(desc(serverHistory.id))
              .limit(1)
              .offset(limit)
              .get();
            if (cut) {
              tx.delete(serverHistory)
                .where(and(eq(serverHistory.server, server), lte(serverHistory.id, cut.id)))
                .run();
            }
          }
        }),
      );
      this.pending = [];
    } catch (err) {
      if (busy(err)) {
        this.retryTimer = setTimeout(() => this.write(), RETRY_MS);
        this.retryTimer.unref();
        return;
      }
      this.pending = [];
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

function busy(err: unknown): boolean {
  const code = err instanceof Error && "code" in err ? String(err.code) : "";
  return code.startsWith("SQLITE_BUSY") || code.startsWith("SQLITE_LOCKED");
}
