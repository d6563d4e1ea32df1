import "server-only";
import { eq, sql } from "drizzle-orm";
import { GatehouseError } from "@/lib/errors";
import { type Db, first } from "../store/db";
import { prepared } from "../store/prepared";
import { overCapTools, tools } from "../store/schema";
import type { ToolDefinition } from "./definition";

/** The catalogue's rows and the queries that read them. */

export type ToolRow = typeof tools.$inferSelect;

/** The handle a `transaction` callback gets: a `Db` whose statements run inside it. */
export type Tx = Db;

/** A row's definition, parsed (rows always hold JSON the catalogue wrote). */
export function parseDefinition(row: Pick<ToolRow, "definition">): ToolDefinition {
  return JSON.parse(row.definition) as ToolDefinition;
}

export async function getToolRow(db: Db, localName: string): Promise<ToolRow | null> {
  const query = prepared(db, "tools.byLocalName", () =>
    db
      .select()
      .from(tools)
      .where(eq(tools.localName, sql.placeholder("name")))
      .prepare(),
  );
  return (await query.execute({ name: localName }))[0] ?? null;
}

/** The row named `localName`, read inside `tx`; `tool_not_found` when there is none. */
export async function rowOrThrow(tx: Tx, localName: string): Promise<ToolRow> {
  const row = await first(tx.select().from(tools).where(eq(tools.localName, localName)));
  if (!row) throw new GatehouseError("tool_not_found", `no tool named "${localName}"`);
  return row;
}

/** Counts per server for the status page. */
export async function toolCounts(
  db: Db,
): Promise<Map<string, { proposed: number; enabled: number; disabled: number; overCap: number }>> {
  const out = new Map<string, { proposed: number; enabled: number; disabled: number; overCap: number }>();
  const get = (s: string) => {
    let c = out.get(s);
    if (!c) {
      c = { proposed: 0, enabled: 0, disabled: 0, overCap: 0 };
      out.set(s, c);
    }
    return c;
  };
  for (const r of await db.select({ server: tools.server, status: tools.status }).from(tools)) {
    const c = get(r.server);
    if (r.status === "proposed" || r.status === "enabled" || r.status === "disabled") c[r.status]++;
  }
  for (const r of await db.select({ server: overCapTools.server }).from(overCapTools))
    get(r.server).overCap++;
  return out;
}
