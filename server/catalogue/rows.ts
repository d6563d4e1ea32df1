import "server-only";
import { eq, sql } from "drizzle-orm";
import { GatehouseError } from "@/lib/errors";
import type { Db } from "../store/db";
import { prepared } from "../store/prepared";
import { overCapTools, tools } from "../store/schema";
import type { ToolDefinition } from "./definition";

/** The catalogue's rows and the queries that read them. */

export type ToolRow = typeof tools.$inferSelect;

/** The handle a `db.transaction` callback gets. */
export type Tx = Parameters<Parameters<Db["transaction"]>[0]>[0];

/** A row's definition, parsed (rows always hold JSON the catalogue wrote). */
export function parseDefinition(row: Pick<ToolRow, "definition">): ToolDefinition {
  return JSON.parse(row.definition) as ToolDefinition;
}

export function getToolRow(db: Db, localName: string): ToolRow | null {
  const query = prepared(db, "tools.byLocalName", () =>
    db
      .select()
      .from(tools)
      .where(eq(tools.localName, sql.placeholder("name")))
      .prepare(),
  );
  return query.get({ name: localName }) ?? null;
}

/** The row named `localName`, read inside `tx`; `tool_not_found` when there is none. */
export function rowOrThrow(tx: Tx, localName: string): ToolRow {
  const row = tx.select().from(tools).where(eq(tools.localName, localName)).get();
  if (!row) throw new GatehouseError("tool_not_found", `no tool named "${localName}"`);
  return row;
}

/** Counts per server for the status page. */
export function toolCounts(
  db: Db,
): Map<string, { proposed: number; enabled: number; disabled: number; overCap: number }> {
  const out = new Map<string, { proposed: number; enabled: number; disabled: number; overCap: number }>();
  const get = (s: string) => {
    let c = out.get(s);
    if (!c) {
      c = { proposed: 0, enabled: 0, disabled: 0, overCap: 0 };
      out.set(s, c);
    }
    return c;
  };
  for (const r of db.select({ server: tools.server, status: tools.status }).from(tools).all()) {
    const c = get(r.server);
    if (r.status === "proposed" || r.status === "enabled" || r.status === "disabled") c[r.status]++;
  }
  for (const r of db.select({ server: overCapTools.server }).from(overCapTools).all())
    get(r.server).overCap++;
  return out;
}
