import "server-only";
import { type Placeholder, type SQL, sql } from "drizzle-orm";
import type { AnySQLiteColumn } from "drizzle-orm/sqlite-core";
import { agentTokens, users } from "../store/schema";

/** The columns of `grants` (or of an alias of it) that decide whether a grant is live. */
export interface GrantColumns {
  endedAt: AnySQLiteColumn;
  expiresAt: AnySQLiteColumn;
  usesAllowed: AnySQLiteColumn;
  uses: AnySQLiteColumn;
  requesterKind: AnySQLiteColumn;
  requesterName: AnySQLiteColumn;
  createdBy: AnySQLiteColumn;
  madeAs: AnySQLiteColumn;
}

/** `now` as an ISO string, or a placeholder of a prepared statement. */
export type Now = string | Placeholder;

/** The grant's own limits hold: not ended, not expired, uses left. */
export function limitsHold(t: GrantColumns, now: Now): SQL {
  return sql`(${t.endedAt} IS NULL AND ${t.expiresAt} > ${now} AND (${t.usesAllowed} IS NULL OR ${t.uses} < ${t.usesAllowed}))`;
}

/**
 * `roles` (comma-separated text) holds `role` (a role name, or a column holding one). Role names
 * are lower-case words without `%` or `_`, so LIKE matches them exactly on both stores (it is
 * case-sensitive on PostgreSQL, not on SQLite).
 */
export function holdsRole(roles: AnySQLiteColumn | SQL, role: string | AnySQLiteColumn): SQL {
  return sql`((',' || ${roles} || ',') LIKE ('%,' || ${role} || ',%'))`;
}

/**
 * Whose calls it covers still stands: an unrevoked token of that name, or a user of that name.
 * A truth value on both stores: every branch is one (`FALSE`, not `0`: PostgreSQL refuses a
 * CASE mixing boolean and integer; SQLite reads `FALSE` as 0).
 */
export function requesterStands(t: GrantColumns): SQL {
  return sql`(CASE ${t.requesterKind}
    WHEN 'agent' THEN EXISTS (SELECT 1 FROM ${agentTokens} WHERE ${agentTokens.name} = ${t.requesterName} AND ${agentTokens.revokedAt} IS NULL)
    WHEN 'user' THEN EXISTS (SELECT 1 FROM ${users} WHERE ${users.name} = ${t.requesterName})
    ELSE FALSE END)`;
}

/** The person who made it still holds the role they granted under (`madeAs`). */
export function reviewerStands(t: GrantColumns): SQL {
  return sql`EXISTS (SELECT 1 FROM ${users} WHERE ${users.name} = ${t.createdBy} AND ${holdsRole(users.roles, t.madeAs)})`;
}

/**
 * Live, as far as covering a call goes (PRODUCT.md §11): its limits hold and both people still
 * stand. Checked on every use, so a grant whose eager ending was missed still covers nothing.
 * The definition hash is not here: a cover query matches it against the tool's current hash.
 */
export function liveWhere(t: GrantColumns, now: Now): SQL {
  return sql`(${limitsHold(t, now)} AND ${requesterStands(t)} AND ${reviewerStands(t)})`;
}
