import "server-only";
import { and, eq } from "drizzle-orm";
import type { ToolAvailability } from "@/lib/api-types";
import type { ErrorCode } from "@/lib/errors";
import { type Db, first } from "../store/db";
import { overCapTools, type tools } from "../store/schema";

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
 * `name` is what the caller asked for, used when there is no row. With `db`, a name without a
 * row that its server lists over `maxTools` is `tool_over_cap` (with where to raise the cap)
 * rather than `tool_not_found`; the answer is then a promise (the store is asked). A row
 * `allowTools` leaves out is `tool_excluded`, whatever its status: the config, not the server,
 * keeps it from agents.
 */
export function callProblem(row: ToolRow | null, name: string): CallProblem | null;
export function callProblem(row: ToolRow | null, name: string, db: Db): Promise<CallProblem | null>;
export function callProblem(
  row: ToolRow | null,
  name: string,
  db?: Db,
): CallProblem | null | Promise<CallProblem | null> {
  if (!row) {
    const notFound: CallProblem = { code: "tool_not_found", message: `no tool named "${name}"` };
    return db ? overCapProblem(db, name).then((over) => over ?? notFound) : notFound;
  }
  const problem = rowProblem(row);
  return db ? Promise.resolve(problem) : problem;
}

/** {@link callProblem} of a row that exists. */
function rowProblem(row: ToolRow): CallProblem | null {
  if (!row.present && row.excluded) {
    return {
      code: "tool_excluded",
      message:
        `${row.localName} is left out by its server's "allowTools" (mcpServers.${row.server}.allowTools in ` +
        `gatehouse.json), though the server may list it; an owner can add it there to offer it`,
    };
  }
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

/**
 * `tool_over_cap` when `name` (`<server>_<tool>`) is a tool its server lists beyond its `maxTools`:
 * it has no catalogue row, so agents are told where the cap is set, not that no such tool exists.
 */
export async function overCapProblem(db: Db, name: string): Promise<CallProblem | null> {
  // Server names never hold "_" (see SERVER_NAME_PATTERN): the first one ends the server's name.
  const cut = name.indexOf("_");
  if (cut <= 0) return null;
  const server = name.slice(0, cut);
  const over = await first(
    db
      .select({ maxTools: overCapTools.maxTools, entryAt: overCapTools.entryAt })
      .from(overCapTools)
      .where(and(eq(overCapTools.server, server), eq(overCapTools.remoteName, name.slice(cut + 1)))),
  );
  if (!over) return null;
  return {
    code: "tool_over_cap",
    message: `${name} is listed by its server but over its cap: ${capHint(server, over)}`,
  };
}

/** Where and how to raise a server's cap, as owners and agents are told it. */
export function capHint(server: string, cap: { maxTools: number; entryAt: string | null }): string {
  const where = cap.entryAt
    ? `in ${cap.entryAt} ("${server}" entry)`
    : `in the "${server}" entry of gatehouse.json`;
  return `"maxTools" is ${cap.maxTools}; raise "maxTools" ${where} and restart Gatehouse, then enable the tool`;
}
