import "server-only";
import type { ServerView } from "@/lib/api-types";
import type { McpManager } from "../mcp/manager";
import { writeAudit } from "../store/audit";
import type { Db } from "../store/db";
import { type AuthViews, serverView } from "./status";

/**
 * The owner's "Reconnect": drops the server's connection and dials again now, records who asked
 * (`server.reconnect`), and returns the server's view right after. `not_found` for an unknown name.
 */
export async function reconnectServer(
  manager: McpManager,
  db: Db,
  params: { name: string; actor: string },
  signIns?: AuthViews,
): Promise<ServerView> {
  manager.get(params.name).reconnectNow();
  await writeAudit(db, { actor: params.actor, action: "server.reconnect", subject: params.name });
  return await serverView(manager, db, params.name, signIns);
}
