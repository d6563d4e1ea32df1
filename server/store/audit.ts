import "server-only";
import { and, desc, inArray, lt, sql } from "drizzle-orm";
import type { Db } from "./db";
import { prepared } from "./prepared";
import { auditEvents } from "./schema";

/** One `audit_events` row. `callId`, `detail` and `durationMs` default to null; `at` to now. */
export interface AuditParams {
  actor: string;
  action: string;
  subject: string;
  callId?: string | null;
  detail?: string | null;
  durationMs?: number | null;
}

/**
 * Appends one audit row. Prepared once per store, since the call path writes one on every
 * transition; it runs on the store's connection, so inside a transaction it is part of it.
 */
export async function writeAudit(db: Db, params: AuditParams): Promise<void> {
  const insert = prepared(db, "audit.write", () =>
    db
      .insert(auditEvents)
      .values({
        actor: sql.placeholder("actor"),
        action: sql.placeholder("action"),
        subject: sql.placeholder("subject"),
        callId: sql.placeholder("callId"),
        detail: sql.placeholder("detail"),
        durationMs: sql.placeholder("durationMs"),
      })
      .prepare(),
  );
  await insert.execute({
    actor: params.actor,
    action: params.action,
    subject: params.subject,
    callId: params.callId ?? null,
    detail: params.detail ?? null,
    durationMs: params.durationMs ?? null,
  });
}

/** One audit row as {@link listAuditByActions} returns it. */
export interface AuditRow {
  id: number;
  at: string;
  actor: string;
  action: string;
  subject: string;
  detail: string | null;
  durationMs: number | null;
}

/**
 * Audit rows with one of `actions` (e.g. `resource.read`, `resource.refused`: reads that are no
 * call), newest first, at most `limit`; page on with `beforeId`, the last row's id.
 */
export async function listAuditByActions(
  db: Db,
  params: { actions: readonly string[]; limit: number; beforeId?: number },
): Promise<AuditRow[]> {
  if (params.actions.length === 0) return [];
  return await db
    .select({
      id: auditEvents.id,
      at: auditEvents.at,
      actor: auditEvents.actor,
      action: auditEvents.action,
      subject: auditEvents.subject,
      detail: auditEvents.detail,
      durationMs: auditEvents.durationMs,
    })
    .from(auditEvents)
    .where(
      and(
        inArray(auditEvents.action, [...params.actions]),
        params.beforeId === undefined ? undefined : lt(auditEvents.id, params.beforeId),
      ),
    )
    .orderBy(desc(auditEvents.id))
    .limit(params.limit);
}
