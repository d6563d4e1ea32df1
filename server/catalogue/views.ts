import "server-only";
import { asc, eq } from "drizzle-orm";
import type { AgentToolView, CatalogueToolView, ToolChangeView, ToolStatus } from "@/lib/api-types";
import type { Db } from "../store/db";
import { tools } from "../store/schema";
import { approvalNeed, vouchProblem } from "./approval";
import { availabilityOf, callProblem } from "./callable";
import { cleanDefinition, cleanDescription, type ToolDefinition } from "./definition";
import { diffDefinitions } from "./diff";
import { parseDefinition, type ToolRow } from "./rows";

/**
 * What owners and agents see of catalogue rows. A refresh stores definitions cleaned (see
 * `definitionOf`); what is read is cleaned again, which changes nothing for those, so that a row
 * stored before the cleaning was what it is now (a dark server's, not refreshed since) is
 * served clean too. A pinned definition is shown as it was pinned: the before of a change.
 */

/** The enabled (pinned) definition against the current one, for the owner's review. */
export function changeOf(row: ToolRow, current: ToolDefinition = parseDefinition(row)): ToolChangeView {
  let before: ToolDefinition | null = null;
  if (row.pinnedDefinition) {
    try {
      before = parseDefinition({ definition: row.pinnedDefinition });
    } catch {
      before = null;
    }
  }
  return { before, after: current, diff: before ? diffDefinitions(before, current) : null };
}

export function toCatalogueView(row: ToolRow): CatalogueToolView {
  const def = cleanDefinition(parseDefinition(row));
  const need = approvalNeed(row, def.annotations);
  const availability = availabilityOf(row);
  return {
    localName: row.localName,
    server: row.server,
    // The row keeps the name as listed, to call the tool by; people are shown it clean.
    remoteName: cleanDescription(row.remoteName),
    status: row.status as ToolStatus,
    availability,
    unusableReason: row.unusableReason,
    definitionHash: row.definitionHash,
    title: def.title ?? null,
    description: cleanDescription(row.description),
    inputSchema: def.inputSchema,
    outputSchema: def.outputSchema,
    annotations: def.annotations,
    icons: def.icons ?? [],
    destructive: need.destructive,
    updatedAt: row.updatedAt,
    approvalReason: need.reason,
    readOnlyBy: need.readOnlyBy,
    alwaysConfirm: row.alwaysConfirm,
    vouch:
      need.readOnlyBy === "vouch" && row.vouchedBy && row.vouchedAt
        ? { by: row.vouchedBy, at: row.vouchedAt }
        : null,
    vouchProblem: vouchProblem(def.annotations),
    change: availability === "changed" ? changeOf(row, def) : null,
  };
}

export async function listCatalogue(db: Db): Promise<CatalogueToolView[]> {
  const rows = await db.select().from(tools).orderBy(asc(tools.server), asc(tools.remoteName));
  return rows.map(toCatalogueView);
}

/**
 * The tools an agent may call, by local name: those {@link callProblem} lets through (enabled,
 * present, usable and unchanged since enabled). A title, an output schema and icons are there
 * only when the tool has them.
 */
export async function listEnabledTools(db: Db): Promise<AgentToolView[]> {
  const rows = await db.select().from(tools).where(eq(tools.status, "enabled")).orderBy(asc(tools.localName));
  return rows
    .filter((r) => callProblem(r, r.localName) === null)
    .map((r) => {
      const def = cleanDefinition(parseDefinition(r));
      return {
        name: r.localName,
        ...(def.title !== undefined ? { title: def.title } : {}),
        description: cleanDescription(r.description),
        inputSchema: def.inputSchema,
        ...(def.outputSchema !== null && def.outputSchema !== undefined
          ? { outputSchema: def.outputSchema }
          : {}),
        annotations: def.annotations,
        ...(def.icons !== undefined ? { icons: def.icons } : {}),
        destructive: approvalNeed(r, def.annotations).destructive,
      };
    });
}
