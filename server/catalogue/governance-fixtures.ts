/** What the catalogue governance tests share: reading the feed, rows, views and audit rows back. */
import { and, asc, eq } from "drizzle-orm";
import type { Db } from "../store/db";
import { auditEvents, catalogueChanges, users } from "../store/schema";
import { getToolRow, type ToolRow } from "./rows";
import { toCatalogueView } from "./views";

/** A user row to hang read marks on (the password hash is never checked here). */
export function addUser(d: Db, name: string): number {
  return d.insert(users).values({ name, passwordHash: "x", roles: "owner" }).returning().get().id;
}

/** The change feed in id order, its detail parsed. */
export function feed(d: Db) {
  return d
    .select()
    .from(catalogueChanges)
    .orderBy(asc(catalogueChanges.id))
    .all()
    .map((r) => ({
      kind: r.kind,
      tool: r.tool,
      localName: r.localName,
      detail: r.detail ? JSON.parse(r.detail) : null,
    }));
}

/** The feed as "kind tool" lines, in id order. */
export const kinds = (d: Db) => feed(d).map((c) => `${c.kind} ${c.tool}`);

export function row(d: Db, localName: string): ToolRow {
  const r = getToolRow(d, localName);
  if (!r) throw new Error(`no row ${localName}`);
  return r;
}

export function view(d: Db, localName: string) {
  return toCatalogueView(row(d, localName));
}

/** Audit rows of one action on one subject, in id order. */
export function audit(d: Db, action: string, subject: string) {
  return d
    .select()
    .from(auditEvents)
    .where(and(eq(auditEvents.action, action), eq(auditEvents.subject, subject)))
    .all();
}
