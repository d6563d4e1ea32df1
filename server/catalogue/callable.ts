import "server-only";
import type { ToolAvailability } from "@/lib/api-types";
import type { ErrorCode } from "@/lib/errors";
import type { tools } from "../store/schema";

type ToolRow = typeof tools.$inferSelect;

/** Why a tool cannot be called now: an error code and a sentence that names the tool. */
export interface CallProblem {
  code: ErrorCode;
  message: string;
}

/**
 * Whether a row's tool can be called as listed: `gone` (no longer listed by its server),
 * `unusable` (its local name or definition cannot be served), `changed` (enabled, but its
 * definition is no longer the one an owner pinned), else `ok`.
 */
export function availabilityOf(row: ToolRow): ToolAvailability {
  if (!row.present) return "gone";
  if (row.unusableReason) return "unusable";
  if (row.status === "enabled" && row.pinnedHash !== row.definitionHash) return "changed";
  return "ok";
}

/**
 * The one answer to "may this tool be called now?", or null when it may: it exists, is enabled,
 * and is still listed, usable and unchanged since it was enabled. A call's request, its
 * approval and the agent's tool list all ask here, so they can never disagree.
 *
 * `name` is what the caller asked for, used when there is no row.
 */
export function callProblem(row: ToolRow | null, name: string): CallProblem | null {
  if (!row) return { code: "tool_not_found", message: `no tool named "${name}"` };
  if (row.status !== "enabled")
    return { code: "tool_not_enabled", message: `${row.localName} is not enabled` };
  switch (availabilityOf(row)) {
    case "changed":
      return {
        code: "tool_changed",
        message: `${row.localName} changed on its server and must be re-enabled by an owner`,
      };
    case "gone":
      return { code: "tool_gone", message: `${row.localName} is no longer listed by its server` };
    case "unusable":
      return { code: "tool_unusable", message: `${row.localName} is unusable: ${row.unusableReason}` };
    case "ok":
      return null;
  }
}
