import "server-only";
import { and, count, desc, eq, gt, like, lt, max, or, type SQL } from "drizzle-orm";
import type {
  ChangeDetail,
  ChangeKind,
  ChangesPage,
  ChangeView,
  ToolActionView,
  ToolHistoryView,
} from "@/lib/api-types";
import { GatehouseError } from "@/lib/errors";
import { type Db, first, transaction } from "../store/db";
import { auditEvents, catalogueChanges, changeReads, tools } from "../store/schema";

/**
 * The catalogue change feed (PRODUCT.md §5, "Catalogue diffs"): rows are written by
 * `syncServerTools` in its own transaction; here they are read, newest first, with unread marks
 * per owner (`change_reads.last_seen_id`, which only moves forward).
 */

type ChangeRow = typeof catalogueChanges.$inferSelect;

/** A change-feed row as a refresh wrote it. */
export type RecordedChange = Omit<ChangeView, "unread">;

/**
 * A change as a refresh plans it, before the writer gives it an id and a time (its server is
 * the refresh's). `detail` is null rather than empty.
 */
export type NewChange = Omit<RecordedChange, "id" | "at" | "server">;

/** A row's `detail` column: null when empty or (never written so) not JSON. */
export function parseDetail(json: string | null): ChangeDetail | null {
  if (!json) return null;
  try {
    return JSON.parse(json) as ChangeDetail;
  } catch {
    return null;
  }
}

export function toChangeView(row: ChangeRow, lastSeenId: number): ChangeView {
  const detail = parseDetail(row.detail);
  return {
    id: row.id,
    at: row.at,
    server: row.server,
    kind: row.kind as ChangeKind,
    tool: row.tool,
    localName: row.localName,
    detail,
    unread: row.id > lastSeenId,
  };
}

/** The newest change id this user has read (0: none). */
export async function lastSeenIdOf(db: Db, userId: number): Promise<number> {
  const read = await first(
    db.select({ id: changeReads.lastSeenId }).from(changeReads).where(eq(changeReads.userId, userId)),
  );
  return read?.id ?? 0;
}

async function unreadAfter(db: Db, lastSeenId: number): Promise<number> {
  const unread = await first(
    db.select({ n: count() }).from(catalogueChanges).where(gt(catalogueChanges.id, lastSeenId)),
  );
  return unread?.n ?? 0;
}

/**
 * One page of the feed for `userId`, newest first: `limit` changes older than `before` (an id),
 * each marked unread when newer than what the user marked read, and the user's unread count.
 */
export async function listChanges(
  db: Db,
  params: { userId: number; limit: number; before?: number | undefined },
): Promise<ChangesPage> {
  const lastSeenId = await lastSeenIdOf(db, params.userId);
  const rows = await db
    .select()
    .from(catalogueChanges)
    .where(params.before !== undefined ? lt(catalogueChanges.id, params.before) : undefined)
    .orderBy(desc(catalogueChanges.id))
    .limit(params.limit + 1);
  const page = rows.slice(0, params.limit);
  const last = page[page.length - 1];
  return {
    changes: page.map((r) => toChangeView(r, lastSeenId)),
    unread: await unreadAfter(db, lastSeenId),
    lastSeenId,
    nextBefore: rows.length > params.limit && last ? last.id : null,
  };
}

/**
 * Marks every change up to `upTo` as read for `userId`. The mark never moves backwards (an old
 * tab cannot make read changes unread again) and never beyond the newest change (a made-up id
 * cannot pre-read changes that do not exist yet).
 */
export function markChangesRead(
  db: Db,
  params: { userId: number; upTo: number },
): Promise<{ lastSeenId: number; unread: number }> {
  return transaction(db, async (tx) => {
    const newest = (await first(tx.select({ id: max(catalogueChanges.id) }).from(catalogueChanges)))?.id ?? 0;
    const current = await lastSeenIdOf(tx, params.userId);
    const next = Math.max(current, Math.min(params.upTo, newest));
    if (next !== current) {
      await tx
        .insert(changeReads)
        .values({ userId: params.userId, lastSeenId: next })
        .onConflictDoUpdate({ target: changeReads.userId, set: { lastSeenId: next } });
    }
    return { lastSeenId: next, unread: await unreadAfter(tx, next) };
  });
}

/** How many tool events of one tool's history are returned at most. */
export const HISTORY_LIMIT = 200;

/**
 * A tool's own history: what its server did (including events from before it had a row, such
 * as being over the cap, matched by server and remote name) and what owners did to it.
 */
export async function toolHistory(
  db: Db,
  params: { localName: string; userId: number },
): Promise<ToolHistoryView> {
  const row = await first(
    db
      .select({ server: tools.server, remoteName: tools.remoteName })
      .from(tools)
      .where(eq(tools.localName, params.localName)),
  );
  if (!row) throw new GatehouseError("tool_not_found", `no tool named "${params.localName}"`);
  const lastSeenId = await lastSeenIdOf(db, params.userId);
  const match: SQL | undefined = or(
    eq(catalogueChanges.localName, params.localName),
    and(eq(catalogueChanges.server, row.server), eq(catalogueChanges.tool, row.remoteName)),
  );
  const changes = (
    await db
      .select()
      .from(catalogueChanges)
      .where(match)
      .orderBy(desc(catalogueChanges.id))
      .limit(HISTORY_LIMIT)
  ).map((r) => toChangeView(r, lastSeenId));
  const actions: ToolActionView[] = await db
    .select({
      id: auditEvents.id,
      at: auditEvents.at,
      actor: auditEvents.actor,
      action: auditEvents.action,
      detail: auditEvents.detail,
    })
    .from(auditEvents)
    .where(and(eq(auditEvents.subject, params.localName), like(auditEvents.action, "tool.%")))
    .orderBy(desc(auditEvents.id))
    .limit(HISTORY_LIMIT);
  return { changes, actions };
}
