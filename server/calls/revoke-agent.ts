import "server-only";
import type { TokenView } from "@/lib/api-types";
import { revokeToken } from "../auth/tokens";
import type { EventBus } from "../events";
import type { Db } from "../store/db";
import { nowIso, pendingMs } from "./call-row";
import { transition } from "./transition";

/**
 * Revokes an agent's token (`revokeToken`, which ends its grants) and, in the same transaction,
 * withdraws its pending calls: nobody can approve a call for an agent that may no longer call.
 * Each withdrawn call gets its `call.withdrawn` audit row ("its token was revoked"). Its `/mcp`
 * sessions end at the endpoint's next sweep (a revoked token is refused at once anyway). Used by
 * the API and the CLI alike (the CLI's bus has no listener: the server's pages learn of it at
 * their next fetch).
 */
export function revokeAgent(
  db: Db,
  bus: EventBus,
  params: { name: string; actor: string },
): { token: TokenView; withdrawn: number } {
  return db.transaction(() => {
    const token = revokeToken(db, params);
    const moved = transition(db, bus, {
      from: "pending",
      to: "withdrawn",
      requester: { kind: "agent", name: params.name },
      set: {
        finishedAt: nowIso(),
        errorCode: "withdrawn",
        errorMessage: "the agent's token was revoked before anyone decided",
      },
      actor: params.actor,
      audit: (c) => ({ detail: "its token was revoked", durationMs: pendingMs(c) }),
    });
    return { token, withdrawn: moved.length };
  });
}
