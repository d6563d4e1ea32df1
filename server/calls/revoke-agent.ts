import "server-only";
import type { TokenView } from "@/lib/api-types";
import { revokeToken } from "../auth/tokens";
import { type EventBus, holdingBus } from "../events";
import { type Db, transaction } from "../store/db";
import { nowIso, pendingMs } from "./call-row";
import { transition } from "./transition";

/**
 * Revokes an agent's token (`revokeToken`, which ends its grants) and, in the same transaction,
 * withdraws its pending calls: nobody can approve a call for an agent that may no longer call.
 * Each withdrawn call gets its `call.withdrawn` audit row ("its token was revoked"). Its `/mcp`
 * sessions end at the endpoint's next sweep (a revoked token is refused at once anyway). Used by
 * the API and the CLI alike (the CLI's bus has no listener: the server's pages learn of it at
 * their next fetch).
 *
 * The withdrawal is `transition`'s conditional update, nested in this transaction: a call a
 * reviewer decided meanwhile (on any replica) is not withdrawn. Its calls are published once the
 * whole transaction committed.
 */
export async function revokeAgent(
  db: Db,
  bus: EventBus,
  params: { name: string; actor: string },
): Promise<{ token: TokenView; withdrawn: number }> {
  // `transition` publishes when its own (nested) transaction resolves, before this outer one
  // commits; so it is given a bus that holds the events (and the metrics' facts) until then (a
  // retried attempt's are dropped with it).
  const holding = holdingBus();
  const out = await transaction(db, async (tx) => {
    holding.clear();
    const token = await revokeToken(tx, params);
    const moved = await transition(tx, holding.bus, {
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
  holding.release(bus);
  return out;
}
