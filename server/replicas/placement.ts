import "server-only";
import type { EventBus } from "../events";
import type { Logger } from "../log";
import type { McpManager } from "../mcp/manager";
import type { Db } from "../store/db";
import { StdioHolding } from "./holding";

/**
 * Places this replica's stdio servers among the replicas ({@link StdioHolding}: the ones whose
 * lock it takes run here, the others' calls are forwarded) and keeps its view of the others
 * current from their server events: a holder's state reaches its stand-ins here, and a switch
 * made on another replica (any server event may follow one) is put in place by `follow` (the
 * runtime's `followSwitches`), run once at a time, once more if events came meanwhile.
 */
export async function placeStdioServers(opts: {
  db: Db;
  url: string;
  bus: EventBus;
  manager: McpManager;
  replica: string;
  leaseMs: number;
  log: Logger;
  follow(): Promise<unknown>;
}): Promise<StdioHolding> {
  const { manager, log } = opts;
  let following: Promise<void> | null = null;
  let again = false;
  const follow = () => {
    if (following) {
      again = true;
      return;
    }
    following = opts
      .follow()
      .then(
        () => undefined,
        (err: unknown) =>
          log.warn("a switch made on another replica was not followed", { error: String(err) }),
      )
      .finally(() => {
        following = null;
        if (again) {
          again = false;
          follow();
        }
      });
  };
  opts.bus.subscribe((e) => {
    if (e.type !== "server") return;
    manager.heard(e.name, e.state);
    follow();
  });
  return StdioHolding.start({
    db: opts.db,
    url: opts.url,
    replica: opts.replica,
    leaseMs: opts.leaseMs,
    log,
    servers: () => manager.heldByOneReplica(),
    take: (server) => manager.hold(server),
    lose: (server) => manager.release(server),
  });
}
