import "server-only";
import type { Tool } from "@modelcontextprotocol/client";
import { and, asc, eq, gt, gte, inArray, like, max, notLike, sql } from "drizzle-orm";
import type { ChangeKind } from "@/lib/api-types";
import { type ServerConfig, shownConfigPath } from "../config";
import type { Db } from "../store/db";
import { auditEvents, calls, catalogueChanges, grants, overCapTools, tools } from "../store/schema";
import { parseDetail, type RecordedChange } from "./changes";
import type { Tx } from "./rows";
import {
  COALESCE_WINDOW_MS,
  COALESCED_KINDS,
  coalesceKey,
  planRefresh,
  type RecentChange,
  type RefreshPlan,
  type SyncSummary,
} from "./sync-plan";

/**
 * Records one complete tool list from `server` (see {@link planRefresh} for what changes): the
 * rows, the over-cap list, the change feed and the audit rows are read and written in one
 * transaction, so a refresh that fails leaves no trace, and one that changes nothing writes no
 * feed entry. The summary is the plan's, with the ids and the one time given to its feed rows.
 *
 * A tool that keeps changing keeps one feed row: a change within `coalesceWithinMs` of the tool's
 * latest row of the same family replaces that row by a new one (a new id, so unread for every
 * owner, whatever they had read), unless an owner acted on the tool since (see planRefresh).
 *
 * `alsoWrite`, when given, runs inside that transaction with the feed rows just written (none when
 * nothing changed): writes that must stand or fall with the refresh (the notification outbox).
 */
export function syncServerTools(
  db: Db,
  server: ServerConfig,
  listed: Tool[],
  opts: {
    descriptionMaxChars: number;
    alsoWrite?: (changes: readonly RecordedChange[]) => void;
    /** Default {@link COALESCE_WINDOW_MS}; 0: every change gets its own row. */
    coalesceWithinMs?: number;
    /** The refresh's time; default now. */
    now?: Date;
  },
): SyncSummary {
  const at = opts.now ?? new Date();
  const now = at.toISOString();
  const windowMs = opts.coalesceWithinMs ?? COALESCE_WINDOW_MS;
  return db.transaction((tx) => {
    const plan = planRefresh({
      server,
      listed,
      rows: tx.select().from(tools).where(eq(tools.server, server.name)).all(),
      overCapBefore: overCapBefore(tx, server.name),
      // Only allowTools excludes anything, so without it the feed need not be asked.
      excludedBefore: server.allowTools ? excludedBefore(tx, server.name) : new Set(),
      descriptionMaxChars: opts.descriptionMaxChars,
      recent:
        windowMs > 0
          ? recentChanges(tx, server.name, new Date(at.getTime() - windowMs).toISOString())
          : undefined,
    });
    const changes = applyRefresh(tx, plan, now, capOf(server));
    opts.alsoWrite?.(changes);
    return { ...plan.summary, changes };
  });
}

function overCapBefore(tx: Tx, server: string): Set<string> {
  return new Set(
    tx
      .select({ name: overCapTools.remoteName })
      .from(overCapTools)
      .where(eq(overCapTools.server, server))
      .all()
      .map((r) => r.name),
  );
}

/** Remote names whose latest entry in `server`'s change feed is `excluded`. */
function excludedBefore(tx: Tx, server: string): Set<string> {
  // SQLite returns the bare columns of the row that holds max(id).
  const latest = tx.all<{ tool: string; kind: string }>(
    sql`SELECT ${catalogueChanges.tool} AS tool, ${catalogueChanges.kind} AS kind, max(${catalogueChanges.id})
        FROM ${catalogueChanges} WHERE ${catalogueChanges.server} = ${server}
        GROUP BY ${catalogueChanges.tool}`,
  );
  return new Set(latest.filter((r) => r.kind === "excluded").map((r) => r.tool));
}

/**
 * The latest row of each tool and family (see {@link coalesceKey}) written since `since`, but
 * for tools an owner acted on (any `tool.*` audit row not written by a server) after their row.
 */
function recentChanges(tx: Tx, server: string, since: string): Map<string, RecentChange> {
  const rows = tx
    .select({
      id: catalogueChanges.id,
      at: catalogueChanges.at,
      kind: catalogueChanges.kind,
      tool: catalogueChanges.tool,
      localName: catalogueChanges.localName,
      detail: catalogueChanges.detail,
    })
    .from(catalogueChanges)
    .where(
      and(
        eq(catalogueChanges.server, server),
        gte(catalogueChanges.at, since),
        inArray(catalogueChanges.kind, [...COALESCED_KINDS]),
      ),
    )
    .orderBy(asc(catalogueChanges.id))
    .all();
  const latest = new Map<string, (typeof rows)[number]>();
  for (const r of rows) latest.set(coalesceKey(r.kind as ChangeKind, r.tool), r);
  const recent = new Map<string, RecentChange>();
  if (latest.size === 0) return recent;
  const acted = new Map(
    tx
      .select({ subject: auditEvents.subject, at: max(auditEvents.at) })
      .from(auditEvents)
      .where(
        and(
          gt(auditEvents.at, since),
          like(auditEvents.action, "tool.%"),
          notLike(auditEvents.actor, "server:%"),
        ),
      )
      .groupBy(auditEvents.subject)
      .all()
      .map((a) => [a.subject, a.at]),
  );
  for (const [key, r] of latest) {
    // Times are ISO strings to the millisecond: an owner's act in the very millisecond of the
    // row counts as before it.
    const ownerAt = r.localName ? acted.get(r.localName) : undefined;
    if (ownerAt && ownerAt > r.at) continue;
    recent.set(key, { id: r.id, kind: r.kind as ChangeKind, detail: parseDetail(r.detail) });
  }
  return recent;
}

/** What an over-cap tool's row records of the cap: its value, and where the entry is to raise it. */
function capOf(server: ServerConfig): { maxTools: number; entryAt: string | null } {
  const { file, line } = server.source ?? { file: "", line: null };
  const entryAt = file === "" ? null : `${shownConfigPath(file)}${line === null ? "" : ` line ${line}`}`;
  return { maxTools: server.maxTools, entryAt };
}

/** Writes `plan` inside `tx`; returns its feed rows as written, in id order. */
function applyRefresh(
  tx: Tx,
  plan: RefreshPlan,
  now: string,
  cap: { maxTools: number; entryAt: string | null },
): RecordedChange[] {
  const server = plan.summary.server;
  for (const { localName, set, rehashedFrom } of plan.update) {
    tx.update(tools)
      .set({ ...set, updatedAt: now })
      .where(eq(tools.localName, localName))
      .run();
    if (rehashedFrom !== undefined && set.definitionHash !== rehashedFrom) {
      // The same content under its new hash: what was bound to the old one stays bound.
      tx.update(grants)
        .set({ definitionHash: set.definitionHash })
        .where(and(eq(grants.tool, localName), eq(grants.definitionHash, rehashedFrom)))
        .run();
      tx.update(calls)
        .set({ definitionHash: set.definitionHash })
        .where(
          and(eq(calls.tool, localName), eq(calls.status, "pending"), eq(calls.definitionHash, rehashedFrom)),
        )
        .run();
    }
  }
  for (const row of plan.insert) tx.insert(tools).values(row).run();
  for (const localName of plan.summary.gone) {
    tx.update(tools).set({ present: false, updatedAt: now }).where(eq(tools.localName, localName)).run();
  }
  for (const { localName, excluded } of plan.exclusion) {
    tx.update(tools).set({ excluded }).where(eq(tools.localName, localName)).run();
  }

  tx.delete(overCapTools).where(eq(overCapTools.server, server)).run();
  for (const name of plan.summary.overCap)
    tx.insert(overCapTools)
      .values({ server, remoteName: name, ...cap })
      .run();

  const changes: RecordedChange[] = [];
  for (const { replaces, ...change } of plan.feed) {
    // The replaced row goes and the new one gets a new id: unread for every owner, read or not before.
    if (replaces !== undefined) tx.delete(catalogueChanges).where(eq(catalogueChanges.id, replaces)).run();
    const { id } = tx
      .insert(catalogueChanges)
      .values({ at: now, server, ...change, detail: change.detail ? JSON.stringify(change.detail) : null })
      .returning({ id: catalogueChanges.id })
      .get();
    changes.push({ id, at: now, server, ...change });
  }

  for (const audit of plan.audit)
    tx.insert(auditEvents)
      .values({ actor: `server:${server}`, ...audit })
      .run();
  return changes;
}
