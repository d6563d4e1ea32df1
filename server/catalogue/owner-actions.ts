import "server-only";
import { eq } from "drizzle-orm";
import type { CatalogueToolView } from "@/lib/api-types";
import { type ErrorCode, GatehouseError } from "@/lib/errors";
import type { Db } from "../store/db";
import { auditEvents, tools } from "../store/schema";
import { vouchProblem } from "./approval";
import { parseDefinition, rowOrThrow, type ToolRow, type Tx } from "./rows";
import { toCatalogueView } from "./views";

/** What owners do to tools: enable and disable (one or in bulk), vouch, always confirm. */

/** Why `row` cannot get `status`, or null when it can. */
function statusProblem(
  row: ToolRow,
  status: "enabled" | "disabled",
): { code: ErrorCode; message: string } | null {
  if (status !== "enabled") return null;
  if (row.unusableReason) {
    return { code: "tool_unusable", message: `${row.localName} cannot be enabled: ${row.unusableReason}` };
  }
  if (!row.present) {
    return {
      code: "tool_gone",
      message: `${row.localName} cannot be enabled: its server no longer lists it`,
    };
  }
  return null;
}

/** Sets the status of a row that may have it; enabling pins the current definition (hash and JSON). */
function applyStatus(tx: Tx, row: ToolRow, status: "enabled" | "disabled", actor: string): ToolRow {
  const problem = statusProblem(row, status);
  if (problem) throw new GatehouseError(problem.code, problem.message);
  const pin =
    status === "enabled"
      ? { pinnedHash: row.definitionHash, pinnedDefinition: row.definition }
      : { pinnedHash: row.pinnedHash, pinnedDefinition: row.pinnedDefinition };
  const updated = tx
    .update(tools)
    .set({ status, ...pin, updatedAt: new Date().toISOString() })
    .where(eq(tools.localName, row.localName))
    .returning()
    .get();
  tx.insert(auditEvents)
    .values({
      actor,
      action: status === "enabled" ? "tool.enable" : "tool.disable",
      subject: row.localName,
      detail: status === "enabled" ? `pinned ${row.definitionHash.slice(0, 12)}` : null,
    })
    .run();
  return updated ?? row;
}

/**
 * The owner's decision on a tool. Enabling pins the current definition; a tool that is gone or
 * unusable cannot be enabled.
 */
export function setToolStatus(
  db: Db,
  params: { localName: string; status: "enabled" | "disabled"; actor: string },
): CatalogueToolView {
  return db.transaction((tx) =>
    toCatalogueView(applyStatus(tx, rowOrThrow(tx, params.localName), params.status, params.actor)),
  );
}

export interface UpdateToolParams {
  localName: string;
  actor: string;
  status?: "enabled" | "disabled" | undefined;
  /** true: vouch the current definition read-only; false: withdraw a vouch. */
  vouch?: boolean | undefined;
  alwaysConfirm?: boolean | undefined;
}

/**
 * An owner's changes to one tool, applied together or not at all, in this order: status (so
 * "Accept change" re-pins first), vouch, always-confirm. Each real change is an audit row
 * (`tool.enable`/`tool.disable`, `tool.vouch`/`tool.unvouch`, `tool.always_confirm`); asking for
 * what already holds changes nothing. A vouch is pinned to the current definition hash and is
 * refused (`conflict`) for a tool whose server says `readOnlyHint` either way or
 * `destructiveHint: true`.
 */
export function updateTool(db: Db, params: UpdateToolParams): CatalogueToolView {
  return db.transaction((tx) => {
    let row = rowOrThrow(tx, params.localName);
    const audit = (action: string, detail: string | null) =>
      tx.insert(auditEvents).values({ actor: params.actor, action, subject: row.localName, detail }).run();
    const set = (values: Partial<ToolRow>) => {
      row =
        tx
          .update(tools)
          .set({ ...values, updatedAt: new Date().toISOString() })
          .where(eq(tools.localName, row.localName))
          .returning()
          .get() ?? row;
    };

    if (params.status !== undefined) row = applyStatus(tx, row, params.status, params.actor);
    if (params.vouch === true) {
      const problem = vouchProblem(parseDefinition(row).annotations);
      if (problem) {
        throw new GatehouseError("conflict", `${row.localName} cannot be vouched read-only: ${problem}`);
      }
      if (row.vouchedHash !== row.definitionHash) {
        set({
          vouchedHash: row.definitionHash,
          vouchedBy: params.actor,
          vouchedAt: new Date().toISOString(),
        });
        audit("tool.vouch", `read-only for definition ${row.definitionHash.slice(0, 12)}`);
      }
    } else if (params.vouch === false && row.vouchedHash !== null) {
      set({ vouchedHash: null, vouchedBy: null, vouchedAt: null });
      audit("tool.unvouch", null);
    }
    if (params.alwaysConfirm !== undefined && params.alwaysConfirm !== row.alwaysConfirm) {
      set({ alwaysConfirm: params.alwaysConfirm });
      audit("tool.always_confirm", params.alwaysConfirm ? "on" : "off");
    }
    return toCatalogueView(row);
  });
}

/** Most names listed in the error of a refused bulk change. */
const BULK_NAMES_SHOWN = 5;

/**
 * One status for many tools in one transaction: all of them change, or — when any is unknown,
 * gone or unusable — none does, and the error names the ones that cannot.
 */
export function bulkSetToolStatus(
  db: Db,
  params: { names: readonly string[]; status: "enabled" | "disabled"; actor: string },
): CatalogueToolView[] {
  return db.transaction((tx) => {
    const names = [...new Set(params.names)];
    const rows: ToolRow[] = [];
    const problems: { name: string; code: ErrorCode; why: string }[] = [];
    for (const name of names) {
      const row = tx.select().from(tools).where(eq(tools.localName, name)).get();
      if (!row) {
        problems.push({ name, code: "tool_not_found", why: "no such tool" });
        continue;
      }
      const problem = statusProblem(row, params.status);
      if (problem) {
        problems.push({
          name,
          code: problem.code,
          why: row.unusableReason ?? "its server no longer lists it",
        });
      } else rows.push(row);
    }
    const first = problems[0];
    if (first) {
      const shown = problems.slice(0, BULK_NAMES_SHOWN).map((p) => `${p.name} (${p.why})`);
      const more =
        problems.length > BULK_NAMES_SHOWN ? ` and ${problems.length - BULK_NAMES_SHOWN} more` : "";
      const verb = params.status === "enabled" ? "enabled" : "disabled";
      throw new GatehouseError(
        first.code,
        `nothing was changed: ${problems.length === 1 ? "1 tool" : `${problems.length} tools`} cannot be ${verb}: ${shown.join(", ")}${more}`,
      );
    }
    return rows.map((row) => toCatalogueView(applyStatus(tx, row, params.status, params.actor)));
  });
}
