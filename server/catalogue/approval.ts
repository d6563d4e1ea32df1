import "server-only";
import type { tools } from "../store/schema";

type ToolRow = typeof tools.$inferSelect;

/** The columns {@link approvalNeed} reads; a whole `tools` row will do. */
export type ApprovalInput = Pick<ToolRow, "definition" | "definitionHash" | "vouchedHash" | "alwaysConfirm">;

export interface ApprovalNeed {
  /** A call waits for a reviewer's approval. */
  destructive: boolean;
  /**
   * Why it waits, as reviewers read it: "owner requires confirmation", "destructiveHint: true",
   * "readOnlyHint: false" or "no readOnlyHint"; null when the call runs at once.
   */
  reason: string | null;
  /** What makes the tool read-only, whatever "Always confirm" says: its annotation, or a vouch. */
  readOnlyBy: "annotation" | "vouch" | null;
}

function annotationsOf(definitionJson: string): Record<string, unknown> {
  try {
    const def = JSON.parse(definitionJson) as { annotations?: unknown };
    const a = def?.annotations;
    return typeof a === "object" && a !== null && !Array.isArray(a) ? (a as Record<string, unknown>) : {};
  } catch {
    // A row always holds JSON we wrote; were it damaged, the safe reading is "no annotations".
    return {};
  }
}

/**
 * Why a tool with these annotations cannot be vouched read-only, or null when it can: only a
 * tool whose server says nothing either way may be vouched (PRODUCT.md §5).
 */
export function vouchProblem(annotations: Record<string, unknown> | null): string | null {
  const a = annotations ?? {};
  if (a.readOnlyHint === true) return "its server already marks it read-only (readOnlyHint: true)";
  if (a.readOnlyHint === false) return "its server says readOnlyHint: false";
  if (a.destructiveHint === true) return "its server says destructiveHint: true";
  return null;
}

/**
 * Whether a call of this tool needs a reviewer's approval, and why — the one place that decides
 * it (catalogue views, the agent's tool list and the call broker all ask here).
 *
 * A tool is destructive unless its server says `readOnlyHint: true`, or an owner vouched it
 * read-only for exactly its current definition (`vouchedHash === definitionHash`; a vouch on a
 * tool whose server says `readOnlyHint: false` or `destructiveHint: true` never counts).
 * "Always confirm" makes any tool need approval. The server's own reason wins over "owner
 * requires confirmation" when both apply. `annotations`, when given, are the row's definition's
 * (already parsed); otherwise they are read from `row.definition`.
 */
export function approvalNeed(row: ApprovalInput, annotations?: Record<string, unknown> | null): ApprovalNeed {
  // Callers that already parsed the definition pass its annotations, so it is parsed once.
  const a = annotations === undefined ? annotationsOf(row.definition) : (annotations ?? {});
  if (a.readOnlyHint === true) {
    return row.alwaysConfirm
      ? { destructive: true, reason: "owner requires confirmation", readOnlyBy: "annotation" }
      : { destructive: false, reason: null, readOnlyBy: "annotation" };
  }
  const vouched =
    row.vouchedHash !== null && row.vouchedHash === row.definitionHash && vouchProblem(a) === null;
  if (vouched) {
    return row.alwaysConfirm
      ? { destructive: true, reason: "owner requires confirmation", readOnlyBy: "vouch" }
      : { destructive: false, reason: null, readOnlyBy: "vouch" };
  }
  const reason =
    a.destructiveHint === true
      ? "destructiveHint: true"
      : a.readOnlyHint === false
        ? "readOnlyHint: false"
        : "no readOnlyHint";
  return { destructive: true, reason, readOnlyBy: null };
}
