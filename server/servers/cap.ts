import "server-only";
import { and, asc, eq } from "drizzle-orm";
import type { ServerCapView } from "@/lib/api-types";
import { capHint } from "../catalogue/callable";
import { cleanDescription } from "../catalogue/definition";
import { type ServerConfig, shownConfigPath } from "../config";
import type { Db } from "../store/db";
import { overCapTools, tools } from "../store/schema";

/**
 * A server's `maxTools` as owners see it: the tools it lists beyond the cap, by name, with where
 * the cap is raised; and a warning when more of its tools are enabled than the cap allows (the
 * cap was lowered: stable trimming keeps them, so nothing changes but what is admitted next).
 */

/** `<config file> line <n>` of the server's entry; null when the config came from no file. */
export function entryAt(server: ServerConfig): string | null {
  const file = server.source?.file ?? "";
  if (file === "") return null;
  const line = server.source?.line ?? null;
  return `${shownConfigPath(file)}${line === null ? "" : ` line ${line}`}`;
}

/** The warning for a server with `enabled` tools (not excluded) above its `maxTools`, or null. */
export function capWarning(server: ServerConfig, enabled: number): string | null {
  if (enabled <= server.maxTools) return null;
  const where = entryAt(server);
  return (
    `${server.name}: ${enabled} tools are enabled but "maxTools" is ${server.maxTools}` +
    `${where ? ` (${where})` : ""}; the enabled ones keep their place and no new tool is admitted ` +
    `until fewer than ${server.maxTools} are listed; raise "maxTools" to at least ${enabled} or disable tools`
  );
}

async function enabledCounts(db: Db): Promise<Map<string, number>> {
  const counts = new Map<string, number>();
  const rows = await db
    .select({ server: tools.server })
    .from(tools)
    .where(and(eq(tools.status, "enabled"), eq(tools.excluded, false)));
  for (const r of rows) counts.set(r.server, (counts.get(r.server) ?? 0) + 1);
  return counts;
}

/** Every server's {@link ServerCapView}, by name. */
export async function serverCaps(
  db: Db,
  servers: readonly ServerConfig[],
): Promise<Map<string, ServerCapView>> {
  const over = new Map<string, string[]>();
  const rows = await db
    .select({ server: overCapTools.server, name: overCapTools.remoteName })
    .from(overCapTools)
    .orderBy(asc(overCapTools.server), asc(overCapTools.remoteName));
  // A listed name is the server's text: shown clean, like every name in the catalogue.
  for (const r of rows) over.set(r.server, [...(over.get(r.server) ?? []), cleanDescription(r.name)]);
  const enabled = await enabledCounts(db);
  return new Map(
    servers.map((s) => {
      const at = entryAt(s);
      return [
        s.name,
        {
          maxTools: s.maxTools,
          overCapTools: over.get(s.name) ?? [],
          entryAt: at,
          hint: capHint(s.name, { maxTools: s.maxTools, entryAt: at }),
          warning: capWarning(s, enabled.get(s.name) ?? 0),
        },
      ];
    }),
  );
}

/** The warnings of {@link capWarning} for every server, for the start's log. */
export async function capWarnings(db: Db, servers: readonly ServerConfig[]): Promise<string[]> {
  const enabled = await enabledCounts(db);
  return servers.flatMap((s) => capWarning(s, enabled.get(s.name) ?? 0) ?? []);
}
