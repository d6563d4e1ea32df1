import "server-only";
import type { ServerAuthView, ServerCapView, ServerView } from "@/lib/api-types";
import { GatehouseError } from "@/lib/errors";
import { toolCounts } from "../catalogue/catalogue";
import { describeTarget, type ServerConfig, shownConfigPath } from "../config";
import { redact } from "../log";
import type { McpManager } from "../mcp/manager";
import type { Db } from "../store/db";
import { serverCaps } from "./cap";
import { switchedOnServers, switchView } from "./switch";

/** Text that came from a server (its error texts, its stderr), as an owner may see it. */
const shown = (text: string | null): string | null => (text === null ? null : redact(text));

/**
 * Every configured server as the owner's status page shows it, in config order: the
 * supervisor's snapshot (never awaits a connection) joined with the catalogue's tool counts.
 * Everything a server may have written (last error, history details, stderr tail, the name and
 * version it gives) passes through redaction: a server may echo a credential it was sent.
 * `signIns` gives each server's OAuth part (the runtime's `OAuthSignIns`); without it none has one.
 */
export async function serverViews(manager: McpManager, db: Db, signIns?: AuthViews): Promise<ServerView[]> {
  const counts = await toolCounts(db);
  const listed = manager.list();
  const caps = await serverCaps(
    db,
    listed.map((s) => s.config),
  );
  const switched = await switchedOnServers(db);
  const holders = await manager.holders();
  const placed = new Set(manager.heldByOneReplica());
  return listed.map(({ config: c, status }) => {
    const n = counts.get(c.name) ?? { proposed: 0, enabled: 0, disabled: 0, overCap: 0 };
    return {
      name: c.name,
      transport: c.transport,
      target: describeTarget(c),
      enabled: c.enabled,
      state: status.state,
      lastError: shown(status.lastError),
      nextRetryAt: status.nextRetryAt,
      readySince: status.readySince,
      serverInfo: status.serverInfo && {
        name: redact(status.serverInfo.name),
        version: redact(status.serverInfo.version),
      },
      protocolVersion: status.protocolVersion,
      // Held by another replica, its stand-in lists nothing: what the holder listed last is what
      // the catalogue keeps of it.
      tools: {
        listed: status.elsewhere ? n.proposed + n.enabled + n.disabled + n.overCap : status.listedTools,
        ...n,
      },
      // The ring redacts as it captures (before its lines are cut); once more here costs little
      // and holds for any snapshot that did not come from it.
      stderrTail: status.stderrTail.map(redact),
      refreshNote: status.refreshNote,
      history: status.history.map((h) => ({ ...h, detail: shown(h.detail) })),
      auth: signIns?.view(c) ?? null,
      entry: c.source?.file
        ? { file: shownConfigPath(c.source.file), line: c.source.line, enabled: c.source.enabled }
        : null,
      // Every server has one: serverCaps is built from this very list.
      cap: caps.get(c.name) as ServerCapView,
      switch: switchView(c, switched.get(c.name)),
      replica:
        holders && placed.has(c.name)
          ? { label: holders.get(c.name) ?? null, here: status.elsewhere !== true }
          : null,
    };
  });
}

/** What the views need of the OAuth sign-ins. */
export interface AuthViews {
  view(config: ServerConfig): ServerAuthView | null;
}

/** One server's view; `not_found` when no server of that name is configured. */
export async function serverView(
  manager: McpManager,
  db: Db,
  name: string,
  signIns?: AuthViews,
): Promise<ServerView> {
  const view = (await serverViews(manager, db, signIns)).find((s) => s.name === name);
  if (!view) throw new GatehouseError("not_found", `no server named "${name}" is configured`);
  return view;
}
