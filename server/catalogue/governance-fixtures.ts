/** What the catalogue governance tests share: reading the feed, rows, views and audit rows back. */
import { and, asc, eq } from "drizzle-orm";
import type { Db } from "../store/db";
import { auditEvents, catalogueChanges, users } from "../store/schema";
import { getToolRow, type ToolRow } from "./rows";
import { toCatalogueView } from "./views";

/** A user row to hang read marks on (the password hash is never checked here). */
export async function addUser(d: Db, name: string): Promise<number> {
  const [user] = await d.insert(users).values({ name, passwordHash: "x", roles: "owner" }).returning();
  if (!user) throw new Error(`user ${name} was not added`);
  return user.id;
}

/** The change feed in id order, its detail parsed. */
export async function feed(d: Db) {
  const rows = await d.select().from(catalogueChanges).orderBy(asc(catalogueChanges.id));
  return rows.map((r) => ({
    kind: r.kind,
    tool: r.tool,
    localName: r.localName,
    detail: r.detail ? JSON.parse(r.detail) : null,
  }));
}

/** The feed as "kind tool" lines, in id order. */
export const kinds = async (d: Db) => (await feed(d)).map((c) => `${c.kind} ${c.tool}`);

export async function row(d: Db, localName: string): Promise<ToolRow> {
  const r = await getToolRow(d, localName);
  if (!r) throw new Error(`no row ${localName}`);
  return r;
}

export async function view(d: Db, localName: string) {
  return toCatalogueView(await row(d, localName));
}

/** Audit rows of one action on one subject, in id order. */
export async function audit(d: Db, action: string, subject: string) {
  return await d
    .select()
    .from(auditEvents)
    .where(and(eq(auditEvents.action, action), eq(auditEvents.subject, subject)))
    .orderBy(asc(auditEvents.id));
}
