import "server-only";
import type { AgentToolView } from "@/lib/api-types";
import { listEnabledTools } from "../catalogue/catalogue";
import type { Db } from "../store/db";
import type { SetHolder, ToolSets } from "./tool-sets";

/**
 * The enabled tools `who` may see: those its tool set holds, every one without a set (or
 * without `toolSets`/`who`: people, and callers that bound nothing).
 */
export async function enabledToolsFor(
  db: Db,
  toolSets: ToolSets | undefined,
  who: SetHolder | undefined,
): Promise<AgentToolView[]> {
  const all = await listEnabledTools(db);
  return toolSets && who ? toolSets.filter(who, all, (t) => t.name) : all;
}
