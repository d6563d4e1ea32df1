import "server-only";
import type { Tool } from "@modelcontextprotocol/client";
import { and, asc, eq, gt, gte, inArray, like, max, notLike, sql } from "drizzle-orm";
import type { ChangeKind } from "@/lib/api-types";
import { type ServerConfig, shownConfigPath } from "../config";
import { type Db, dialectOf, rows, transaction } from "../store/db";
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
 * `alsoWrite`, when given, runs inside that transaction, given its `tx` and the feed rows just
 * written (none when nothing changed), and is awaited: writes that must stand or fall with the
 * refresh (the notification outbox), made on that `tx` only. On PostgreSQL the transaction may run
 * more than once (see `transaction`), `alsoWrite` with it.
 */
export function syncServerTools(
  db: Db,
  server: ServerConfig,
  listed: Tool[],
  opts: {
    descriptionMaxChars: number;
    alsoWrite?: (tx: Tx, changes: readonly RecordedChange[]) => Promise<void>;
    /** Default {@link COALESCE_WINDOW_MS}; 0: every change gets its own row. */
    coalesceWithinMs?: number;
    /** The refresh's time; default now. */
    now?: Date;
  },
): Promise<SyncSummary> {
  const at = opts.now ?? new Date();
  const now = at.toISOString();
  const windowMs = opts.coalesceWithinMs ?? COALESCE_WINDOW_MS;
  return transaction(db, async (tx) => {
    await oneRefreshAtATime(tx, server.name);
    const plan = planRefresh({
      server,
      listed,
      rows: await tx.select().from(tools).where(eq(tools.server, server.name)),
      overCapBefore: await overCapBefore(tx, server.name),
      // Only allowTools excludes anything, so without it the feed need not be asked.
      excludedBefore: server.allowTools ? await excludedBefore(tx, server.name) : new Set(),
      descriptionMaxChars: opts.descriptionMaxChars,
      recent:
        windowMs > 0
          ? await recentChanges(tx, server.name, new Date(at.getTime() - windowMs).toISOString())
          : undefined,
    });
    const changes = await applyRefresh(tx, plan, now, capOf(server));
    await opts.alsoWrite?.(tx, changes);
    return { ...plan.summary, changes };
  });
}

/**
 * On PostgreSQL, makes the refreshes of `server` from every replica run one after another: each
 * holds a transaction-scoped advisory lock keyed by the server's name, so a second refresh reads
 * the rows after the first has committed them and finds nothing changed, instead of planning the
 * same change and colliding with the first's rows (a duplicate tool row is no serialization
 * failure: it would fail the refresh). The transaction is SERIALIZABLE and its snapshot is taken
 * at its first statement, this one: a refresh that had to wait for the lock would read from
 * before the other's commit. So it only tries the lock; when another holds it, it waits for it
 * to be released and then fails as a serialization failure (SQLSTATE 40001), which `transaction`
 * runs again with a fresh snapshot. Nothing on SQLite, where one writer runs at a time anyway.
 */
async function oneRefreshAtATime(tx: Tx, server: string): Promise<void> {
  if (dialectOf(tx) !== "postgres") return;
  const key = sql`hashtext(${`gatehouse catalogue ${server}`})`;
  const [got] = await rows<{ locked: boolean }>(tx, sql`SELECT pg_try_advisory_xact_lock(${key}) AS locked`);
  if (got?.locked) return;
  await rows(tx, sql`SELECT pg_advisory_xact_lock(${key}) AS locked`);
  throw new RefreshWaited(server);
}

/** A refresh that waited for another replica's refresh of its server: run again (see {@link oneRefreshAtATime}). */
class RefreshWaited extends Error {
  /** What `transaction` takes for a serialization failure, to run again. */
  readonly code = "40001";
  constructor(server: string) {
    super(`another replica refreshed the catalogue of ${server} meanwhile`);
  }
}

async function overCapBefore(tx: Tx, server: string): Promise<Set<string>> {
  const rows = await tx
    .select({ name: overCapTools.remoteName })
    .from(overCapTools)
    .where(eq(overCapTools.server, server));
  return new Set(rows.map((r) => r.name));
}

/** Remote names whose latest entry in `server`'s change feed is `excluded`. */
async function excludedBefore(tx: Tx, server: string): Promise<Set<string>> {
  // Each tool's newest row (the highest id), then only those that are `excluded`.
  const latest = tx
    .select({ id: max(catalogueChanges.id).as("latest_id") })
    .from(catalogueChanges)
    .where(eq(catalogueChanges.server, server))
    .groupBy(catalogueChanges.tool)
    .as("latest");
  const rows = await tx
    .select({ tool: catalogueChanges.tool })
    .from(catalogueChanges)
    .innerJoin(latest, eq(catalogueChanges.id, latest.id))
    .where(eq(catalogueChanges.kind, "excluded"));
  return new Set(rows.map((r) => r.tool));
}

/**
 * The latest row of each tool and family (see {@link coalesceKey}) written since `since`, but
 * for tools an owner acted on (any `tool.*` audit row not written by a server) after their row.
 */
async function recentChanges(tx: Tx, server: string, since: string): Promise<Map<string, RecentChange>> {
  const rows = await tx
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
    .orderBy(asc(catalogueChanges.id));
  const latest = new Map<string, (typeof rows)[number]>();
  for (const r of rows) latest.set(coalesceKey(r.kind as ChangeKind, r.tool), r);
  const recent = new Map<string, RecentChange>();
  if (latest.size === 0) return recent;
  const acts = await tx
    .select({ subject: auditEvents.subject, at: max(auditEvents.at) })
    .from(auditEvents)
    .where(
      and(
        gt(auditEvents.at, since),
        like(auditEvents.action, "tool.%"),
        notLike(auditEvents.actor, "server:%"),
      ),
    )
    .groupBy(auditEvents.subject);
  const acted = new Map(acts.map((a) => [a.subject, a.at]));
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
async function applyRefresh(
  tx: Tx,
  plan: RefreshPlan,
  now: string,
  cap: { maxTools: number; entryAt: string | null },
): Promise<RecordedChange[]> {
  const server = plan.summary.server;
  for (const { localName, set, rehashedFrom } of plan.update) {
    await tx
      .update(tools)
      .set({ ...set, updatedAt: now })
      .where(eq(tools.localName, localName));
    if (rehashedFrom !== undefined && set.definitionHash !== rehashedFrom) {
      // The same content under its new hash: what was bound to the old one stays bound.
      await tx
        .update(grants)
        .set({ definitionHash: set.definitionHash })
        .where(and(eq(grants.tool, localName), eq(grants.definitionHash, rehashedFrom)));
      await tx
        .update(calls)
        .set({ definitionHash: set.definitionHash })
        .where(
          and(eq(calls.tool, localName), eq(calls.status, "pending"), eq(calls.definitionHash, rehashedFrom)),
        );
    }
  }
  for (const row of plan.insert) await tx.insert(tools).values(row);
  for (const localName of plan.summary.gone) {
    await tx.update(tools).set({ present: false, updatedAt: now }).where(eq(tools.localName, localName));
  }
  for (const { localName, excluded } of plan.exclusion) {
    await tx.update(tools).set({ excluded }).where(eq(tools.localName, localName));
  }

  await tx.delete(overCapTools).where(eq(overCapTools.server, server));
  for (const name of plan.summary.overCap) {
    await tx.insert(overCapTools).values({ server, remoteName: name, ...cap });
  }

  const changes: RecordedChange[] = [];
  for (const { replaces, ...change } of plan.feed) {
    // The replaced row goes and the new one gets a new id: unread for every owner, read or not before.
    if (replaces !== undefined) await tx.delete(catalogueChanges).where(eq(catalogueChanges.id, replaces));
    const [written] = await tx
      .insert(catalogueChanges)
      .values({ at: now, server, ...change, detail: change.detail ? JSON.stringify(change.detail) : null })
      .returning({ id: catalogueChanges.id });
    if (!written) throw new Error("the change feed row was not written");
    changes.push({ id: written.id, at: now, server, ...change });
  }

  for (const audit of plan.audit) {
    await tx.insert(auditEvents).values({ actor: `server:${server}`, ...audit });
  }
  return changes;
}
