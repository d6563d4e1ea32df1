import "server-only";
import { and, asc, desc, eq, getTableColumns, gte, lt, lte, or, type SQL, sql } from "drizzle-orm";
import type { AuditEventView, CallStatus, CallView } from "@/lib/api-types";
import { GatehouseError } from "@/lib/errors";
import { type AuditParams, writeAudit } from "../store/audit";
import { type Db, dialectOf, first } from "../store/db";
import { pgStatement, prepared } from "../store/prepared";
import { auditEvents, calls, tools } from "../store/schema";
import { type CallRow, type OutcomeColumns, type Requester, toView } from "./call-row";

/**
 * The calls room's queries, db first. The ones every call runs are prepared once per store
 * (`prepared`); the rest are built when asked. Nothing here publishes or decides.
 */

/** The call row's columns, in one order: the PostgreSQL statement below binds them by position. */
const callColumns = Object.entries(getTableColumns(calls));

/**
 * The birth write on PostgreSQL: the call row and, in the same statement (a data-modifying
 * WITH), its first audit row: one round trip instead of two. Built from the table's columns.
 */
const INSERT_AUDITED_PG = `WITH born AS (INSERT INTO calls (${callColumns.map(([, c]) => `"${c.name}"`).join(", ")})
  VALUES (${callColumns.map((_, i) => `$${i + 1}`).join(", ")}) RETURNING id)
INSERT INTO audit_events (actor, action, subject, call_id, detail)
SELECT $${callColumns.length + 1}, $${callColumns.length + 2}, $${callColumns.length + 3}, born.id, $${callColumns.length + 4} FROM born`;

/**
 * Inserts a whole call row and, given `audit`, its first audit row (about this call). SQLite:
 * prepared statements, every column a placeholder, inside the caller's transaction. PostgreSQL
 * with `audit`: one statement (see {@link INSERT_AUDITED_PG}), each value encoded as its column
 * encodes it.
 */
export async function insertCall(
  db: Db,
  row: CallRow,
  audit?: Pick<AuditParams, "actor" | "action" | "subject" | "detail">,
): Promise<void> {
  if (audit && dialectOf(db) === "postgres") {
    const values = callColumns.map(([key, column]) => {
      const value = row[key as keyof CallRow];
      return value === null || value === undefined ? null : column.mapToDriverValue(value);
    });
    await pgStatement(db, "calls.insertAudited", INSERT_AUDITED_PG, [
      ...values,
      audit.actor,
      audit.action,
      audit.subject,
      audit.detail ?? null,
    ]);
    return;
  }
  const insert = prepared(db, "calls.insert", () => {
    const values = Object.fromEntries(callColumns.map(([k]) => [k, sql.placeholder(k)]));
    return db
      .insert(calls)
      .values(values as unknown as typeof calls.$inferInsert)
      .prepare();
  });
  await insert.execute(row);
  if (audit) await writeAudit(db, { ...audit, callId: row.id });
}

/** The audit row of a call's outcome (its call, actor and subject are the call's). */
export type OutcomeAudit = Pick<AuditParams, "actor" | "action" | "subject" | "detail" | "durationMs">;

/**
 * The outcome write on PostgreSQL: the conditional update and, only when it moved the row, the
 * audit row, in ONE statement (a data-modifying WITH): atomic on its own, so it needs no
 * transaction around it, and one round trip instead of four (BEGIN, two statements, COMMIT).
 */
const FINISH_AUDITED_PG = `WITH moved AS (
  UPDATE calls SET status = $1, started_at = $2, finished_at = $3, result = $4,
    result_truncated = $5, error_code = $6, error_message = $7
  WHERE id = $8 AND status = 'running' RETURNING id)
INSERT INTO audit_events (actor, action, subject, call_id, detail, duration_ms)
SELECT $9, $10, $11, moved.id, $12, $13 FROM moved RETURNING call_id`;

/**
 * Writes a running call's outcome and its audit row `audit`; a call that is no longer `running`
 * is left as it is, and gets no audit row (another replica, or a restart, marked it
 * `interrupted`). Returns whether the row moved. Exactly once on either store: one conditional
 * UPDATE (`status = 'running'`), which on PostgreSQL re-checks its WHERE on the row it locks.
 * On PostgreSQL both rows are written by one statement (see {@link FINISH_AUDITED_PG}), so
 * `db` may be the store itself; on SQLite they are two statements, to run in a transaction.
 */
export async function finishCall(
  db: Db,
  id: string,
  outcome: OutcomeColumns,
  audit: OutcomeAudit,
): Promise<boolean> {
  if (dialectOf(db) === "postgres") {
    const moved = await pgStatement(db, "calls.finishAudited", FINISH_AUDITED_PG, [
      outcome.status,
      outcome.startedAt,
      outcome.finishedAt,
      outcome.result,
      outcome.resultTruncated ? 1 : 0,
      outcome.errorCode,
      outcome.errorMessage,
      id,
      audit.actor,
      audit.action,
      audit.subject,
      audit.detail ?? null,
      audit.durationMs ?? null,
    ]);
    return moved.length > 0;
  }
  const finish = prepared(db, "calls.finish", () =>
    db
      .update(calls)
      // drizzle binds placeholders in set() through each column's encoder; its types only
      // list plain values, hence the cast.
      .set({
        status: sql.placeholder("status"),
        startedAt: sql.placeholder("startedAt"),
        finishedAt: sql.placeholder("finishedAt"),
        result: sql.placeholder("result"),
        resultTruncated: sql.placeholder("resultTruncated"),
        errorCode: sql.placeholder("errorCode"),
        errorMessage: sql.placeholder("errorMessage"),
      } as unknown as Partial<CallRow>)
      .where(and(eq(calls.id, sql.placeholder("id")), eq(calls.status, "running")))
      .returning({ id: calls.id })
      .prepare(),
  );
  const moved = await finish.execute({ ...outcome, id });
  if (moved.length === 0) return false;
  await writeAudit(db, { ...audit, callId: id });
  return true;
}

export async function findCall(db: Db, id: string): Promise<CallRow | null> {
  return (await first(db.select().from(calls).where(eq(calls.id, id)))) ?? null;
}

export async function getCall(db: Db, id: string): Promise<CallRow> {
  const row = await findCall(db, id);
  if (!row) throw new GatehouseError("call_not_found", `no call ${id}`);
  return row;
}

/** A call row with its tool's current description and hash: one left join, no extra lookups. */
const viewSelection = {
  call: calls,
  toolDescription: tools.description,
  toolHash: tools.definitionHash,
};

/** A call as its view, with its tool's current description; `fullResult` replaces a capped one. */
export async function callView(db: Db, id: string, fullResult?: unknown): Promise<CallView> {
  const query = prepared(db, "calls.view", () =>
    db
      .select(viewSelection)
      .from(calls)
      .leftJoin(tools, eq(tools.localName, calls.tool))
      .where(eq(calls.id, sql.placeholder("id")))
      .prepare(),
  );
  const [r] = await query.execute({ id });
  if (!r) throw new GatehouseError("call_not_found", `no call ${id}`);
  return toView(r.call, { description: r.toolDescription, definitionHash: r.toolHash }, fullResult);
}

/** Every audit row about one call, oldest first. */
export async function callAudit(db: Db, id: string): Promise<AuditEventView[]> {
  return await db
    .select({
      id: auditEvents.id,
      at: auditEvents.at,
      actor: auditEvents.actor,
      action: auditEvents.action,
      detail: auditEvents.detail,
      durationMs: auditEvents.durationMs,
    })
    .from(auditEvents)
    .where(eq(auditEvents.callId, id))
    .orderBy(asc(auditEvents.id));
}

/** Filters of {@link listCalls}; every field narrows the list. */
export interface CallListParams {
  status?: CallStatus;
  server?: string;
  /** Part of the tool's local name (case-insensitive). */
  tool?: string;
  /** A requester's name (agent token or person). */
  requesterName?: string;
  /** Only this requester's calls (an agent sees only its own). */
  requester?: Requester;
  /** Created at or after this ISO time. */
  from?: string;
  /** Created at or before this ISO time. */
  to?: string;
  /** Only calls older than this cursor (`callCursor`). */
  before?: string;
  limit: number;
}

/** `%`, `_` and the backslash in a search text match themselves (the query escapes with a backslash). */
function escapeLike(text: string): string {
  return text.replace(/[\\%_]/g, (c) => `\\${c}`);
}

/** Calls newest first (ties by id), narrowed by `params`; page on with `before`. */
export async function listCalls(db: Db, params: CallListParams): Promise<CallView[]> {
  const conds: (SQL | undefined)[] = [];
  if (params.status) conds.push(eq(calls.status, params.status));
  if (params.server) conds.push(eq(calls.server, params.server));
  // lower() on both sides: LIKE ignores ASCII case on SQLite, not on PostgreSQL.
  if (params.tool) {
    conds.push(sql`lower(${calls.tool}) LIKE lower(${`%${escapeLike(params.tool)}%`}) ESCAPE '\\'`);
  }
  if (params.requesterName) conds.push(eq(calls.requesterName, params.requesterName));
  if (params.requester) {
    conds.push(
      eq(calls.requesterKind, params.requester.kind),
      eq(calls.requesterName, params.requester.name),
    );
  }
  if (params.from) conds.push(gte(calls.createdAt, params.from));
  if (params.to) conds.push(lte(calls.createdAt, params.to));
  if (params.before) {
    const cut = params.before.lastIndexOf("|");
    const at = params.before.slice(0, cut);
    const id = params.before.slice(cut + 1);
    conds.push(or(lt(calls.createdAt, at), and(eq(calls.createdAt, at), lt(calls.id, id))));
  }
  const rows = await db
    .select(viewSelection)
    .from(calls)
    .leftJoin(tools, eq(tools.localName, calls.tool))
    .where(and(...conds))
    .orderBy(desc(calls.createdAt), desc(calls.id))
    .limit(params.limit);
  return rows.map((r) => toView(r.call, { description: r.toolDescription, definitionHash: r.toolHash }));
}
