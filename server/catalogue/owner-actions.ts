import "server-only";
import { eq } from "drizzle-orm";
import type { CatalogueToolView } from "@/lib/api-types";
import { type ErrorCode, GatehouseError } from "@/lib/errors";
import { type Db, first, transaction } from "../store/db";
import { auditEvents, tools } from "../store/schema";
import { vouchProblem } from "./approval";
import { parseDefinition, rowOrThrow, type ToolRow, type Tx } from "./rows";
import { toCatalogueView } from "./views";

/** What owners do to tools: enable and disable (one or in bulk), vouch, always confirm. */

/** Why `row` cannot get `status`, in words that follow "cannot be enabled: ", or null when it can. */
function statusProblem(
  row: ToolRow,
  status: "enabled" | "disabled",
): { code: ErrorCode; why: string } | null {
  if (status !== "enabled") return null;
  if (row.unusableReason) return { code: "tool_unusable", why: row.unusableReason };
  if (!row.present) return { code: "tool_gone", why: "its server no longer lists it" };
  return null;
}

const CHANGED_SINCE_SEEN = "its definition changed since the page showed it; review it again";

/**
 * Whether the definition an owner reviewed (`expectedHash`, the `definitionHash` their page
 * showed) is no longer the row's: enabling and vouching bind to the definition, so they must bind
 * to the one the owner saw, not to whatever a server that flips its tools listed a moment before
 * the request arrived. Absent: nothing to compare (callers inside the process, which pin what they
 * just read; the HTTP API requires it).
 */
function changedSinceSeen(row: ToolRow, expectedHash: string | undefined): boolean {
  return expectedHash !== undefined && expectedHash !== row.definitionHash;
}

/** `tool_changed`: the row's definition is no longer the one the owner reviewed. */
function changedError(row: ToolRow): GatehouseError {
  return new GatehouseError(
    "tool_changed",
    `the definition of ${row.localName} changed since the page showed it; nothing was changed: review it again`,
  );
}

/**
 * Sets the status of a row that may have it; enabling pins the current definition (hash and
 * JSON), and only when it is `expectedHash` if that is given; disabling ignores it.
 */
async function applyStatus(
  tx: Tx,
  row: ToolRow,
  status: "enabled" | "disabled",
  actor: string,
  expectedHash?: string,
): Promise<ToolRow> {
  if (status === "enabled" && changedSinceSeen(row, expectedHash)) throw changedError(row);
  const problem = statusProblem(row, status);
  if (problem) throw new GatehouseError(problem.code, `${row.localName} cannot be enabled: ${problem.why}`);
  const pin =
    status === "enabled"
      ? { pinnedHash: row.definitionHash, pinnedDefinition: row.definition }
      : { pinnedHash: row.pinnedHash, pinnedDefinition: row.pinnedDefinition };
  const updated = await first(
    tx
      .update(tools)
      .set({ status, ...pin, updatedAt: new Date().toISOString() })
      .where(eq(tools.localName, row.localName))
      .returning(),
  );
  await tx.insert(auditEvents).values({
    actor,
    action: status === "enabled" ? "tool.enable" : "tool.disable",
    subject: row.localName,
    detail: status === "enabled" ? `pinned ${row.definitionHash.slice(0, 12)}` : null,
  });
  return updated ?? row;
}

/**
 * The owner's decision on a tool. Enabling pins the current definition — refused (`tool_changed`)
 * when `expectedHash` is given and is not it; a tool that is gone or unusable cannot be enabled.
 */
export function setToolStatus(
  db: Db,
  params: {
    localName: string;
    status: "enabled" | "disabled";
    actor: string;
    expectedHash?: string | undefined;
  },
): Promise<CatalogueToolView> {
  return transaction(db, async (tx) =>
    toCatalogueView(
      await applyStatus(
        tx,
        await rowOrThrow(tx, params.localName),
        params.status,
        params.actor,
        params.expectedHash,
      ),
    ),
  );
}

export interface UpdateToolParams {
  localName: string;
  actor: string;
  status?: "enabled" | "disabled" | undefined;
  /** true: vouch the current definition read-only; false: withdraw a vouch. */
  vouch?: boolean | undefined;
  alwaysConfirm?: boolean | undefined;
  /**
   * The `definitionHash` the owner reviewed. When given, enabling (or accepting a change) and
   * vouching are refused with `tool_changed`, changing nothing, if the tool's definition is no
   * longer this one; disabling, withdrawing a vouch and "always confirm" ignore it. Absent: no
   * check (the HTTP API requires it for enabling and vouching).
   */
  expectedHash?: string | undefined;
}

/**
 * An owner's changes to one tool, applied together or not at all, in this order: status (so
 * "Accept change" re-pins first), vouch, always-confirm. Each real change is an audit row
 * (`tool.enable`/`tool.disable`, `tool.vouch`/`tool.unvouch`, `tool.always_confirm`); asking for
 * what already holds changes nothing. A vouch is pinned to the current definition hash and is
 * refused (`conflict`) for a tool whose server says `readOnlyHint` either way or
 * `destructiveHint: true`. Enabling and vouching bind to `expectedHash` when it is given: a tool
 * changed since is refused as a whole (`tool_changed`), before anything is written.
 */
export function updateTool(db: Db, params: UpdateToolParams): Promise<CatalogueToolView> {
  return transaction(db, async (tx) => {
    let row = await rowOrThrow(tx, params.localName);
    const audit = async (action: string, detail: string | null) => {
      await tx.insert(auditEvents).values({ actor: params.actor, action, subject: row.localName, detail });
    };
    const set = async (values: Partial<ToolRow>) => {
      row =
        (await first(
          tx
            .update(tools)
            .set({ ...values, updatedAt: new Date().toISOString() })
            .where(eq(tools.localName, row.localName))
            .returning(),
        )) ?? row;
    };

    const binds = params.status === "enabled" || params.vouch === true;
    if (binds && changedSinceSeen(row, params.expectedHash)) throw changedError(row);
    if (params.status !== undefined) row = await applyStatus(tx, row, params.status, params.actor);
    if (params.vouch === true) {
      const problem = vouchProblem(parseDefinition(row).annotations);
      if (problem) {
        throw new GatehouseError("conflict", `${row.localName} cannot be vouched read-only: ${problem}`);
      }
      if (row.vouchedHash !== row.definitionHash) {
        await set({
          vouchedHash: row.definitionHash,
          vouchedBy: params.actor,
          vouchedAt: new Date().toISOString(),
        });
        await audit("tool.vouch", `read-only for definition ${row.definitionHash.slice(0, 12)}`);
      }
    } else if (params.vouch === false && row.vouchedHash !== null) {
      await set({ vouchedHash: null, vouchedBy: null, vouchedAt: null });
      await audit("tool.unvouch", null);
    }
    if (params.alwaysConfirm !== undefined && params.alwaysConfirm !== row.alwaysConfirm) {
      await set({ alwaysConfirm: params.alwaysConfirm });
      await audit("tool.always_confirm", params.alwaysConfirm ? "on" : "off");
    }
    return toCatalogueView(row);
  });
}

/** Most names listed in the error of a refused bulk change. */
const BULK_NAMES_SHOWN = 5;

export interface BulkStatusParams {
  names: readonly string[];
  status: "enabled" | "disabled";
  actor: string;
  /**
   * Per name, the `definitionHash` the owner reviewed: enabling a tool whose definition is no
   * longer that one is refused like a gone one (`tool_changed`). A name without one is not
   * compared (the HTTP API requires one per name to enable); disabling ignores them.
   */
  expectedHashes?: Readonly<Record<string, string>> | undefined;
}

/**
 * One status for many tools in one transaction: all of them change, or — when any is unknown,
 * gone, unusable or changed since the owner saw it — none does, and the error names the ones
 * that cannot (its code is the first one's).
 */
export function bulkSetToolStatus(db: Db, params: BulkStatusParams): Promise<CatalogueToolView[]> {
  return transaction(db, async (tx) => {
    const names = [...new Set(params.names)];
    const rows: ToolRow[] = [];
    const problems: { name: string; code: ErrorCode; why: string }[] = [];
    for (const name of names) {
      const row = await first(tx.select().from(tools).where(eq(tools.localName, name)));
      if (!row) {
        problems.push({ name, code: "tool_not_found", why: "no such tool" });
        continue;
      }
      const expected =
        params.expectedHashes && Object.hasOwn(params.expectedHashes, name)
          ? params.expectedHashes[name]
          : undefined;
      const problem =
        params.status === "enabled" && changedSinceSeen(row, expected)
          ? { code: "tool_changed" as const, why: CHANGED_SINCE_SEEN }
          : statusProblem(row, params.status);
      if (problem) problems.push({ name, ...problem });
      else rows.push(row);
    }
    const firstProblem = problems[0];
    if (firstProblem) {
      const shown = problems.slice(0, BULK_NAMES_SHOWN).map((p) => `${p.name} (${p.why})`);
      const more =
        problems.length > BULK_NAMES_SHOWN ? ` and ${problems.length - BULK_NAMES_SHOWN} more` : "";
      const verb = params.status === "enabled" ? "enabled" : "disabled";
      throw new GatehouseError(
        firstProblem.code,
        `nothing was changed: ${problems.length === 1 ? "1 tool" : `${problems.length} tools`} cannot be ${verb}: ${shown.join(", ")}${more}`,
      );
    }
    const views: CatalogueToolView[] = [];
    // One after another: the statements of one transaction run in turn.
    for (const row of rows)
      views.push(toCatalogueView(await applyStatus(tx, row, params.status, params.actor)));
    return views;
  });
}
