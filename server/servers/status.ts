import "server-only";
import type { ServerView } from "@/lib/api-types";
import { GatehouseError } from "@/lib/errors";
import { toolCounts } from "../catalogue/catalogue";
import { describeTarget } from "../config";
import type { McpManager } from "../mcp/manager";
import type { Db } from "../store/db";

/**
 * Every configured server as the owner's status page shows it, in config order: the
 * supervisor's snapshot (never awaits a connection) joined with the catalogue's tool counts.
 */
export function serverViews(manager: McpManager, db: Db): ServerView[] {
  const counts = toolCounts(db);
  return manager.list().map(({ config: c, status }) => {
    const n = counts.get(c.name) ?? { proposed: 0, enabled: 0, disabled: 0, overCap: 0 };
    return {
      name: c.name,
      transport: c.transport,
      target: describeTarget(c),
      enabled: c.enabled,
      state: status.state,
      lastError: status.lastError,
      nextRetryAt: status.nextRetryAt,
      readySince: status.readySince,
      serverInfo: status.serverInfo,
      tools: { listed: status.listedTools, ...n },
      stderrTail: status.stderrTail,
      history: status.history,
    };
  });
}

/** One server's view; `not_found` when no server of that name is configured. */
export function serverView(manager: McpManager, db: Db, name: string): ServerView {
  const view = serverViews(manager, db).find((s) => s.name === name);
  if (!view) throw new GatehouseError("not_found", `no server named "${name}" is configured`);
  return view;
}
