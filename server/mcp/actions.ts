import "server-only";
import type { ServerView } from "@/lib/api-types";
import { GatehouseError } from "@/lib/errors";
import type { Runtime } from "../runtime";
import { auditEvents } from "../store/schema";

/** The owner's "Reconnect": drops the server's connection and dials again now. */
export function reconnectServer(runtime: Runtime, name: string, actor: string): ServerView {
  runtime.manager.get(name).reconnectNow();
  runtime.db.insert(auditEvents).values({ actor, action: "server.reconnect", subject: name }).run();
  const view = runtime.servers().find((s) => s.name === name);
  if (!view) throw new GatehouseError("not_found", `no server named "${name}" is configured`);
  return view;
}
