import { UpdateTokenBody } from "@/lib/api-types";
import { principalName } from "@/server/auth/access";
import { setTokenToolSet } from "@/server/auth/tokens";
import { route, who } from "@/server/http/route";

/** Moves a token into another tool set (audited); its next request, REST or `/mcp`, is judged by it. */
export const PATCH = route({ access: ["owner"], body: UpdateTokenBody }, async (ctx) => {
  const token = await setTokenToolSet(ctx.runtime.db, {
    name: ctx.params.name ?? "",
    toolSet: ctx.body.toolSet,
    actor: principalName(who(ctx)),
    knownSets: ctx.runtime.toolSets.names(),
  });
  // Its open /mcp sessions, on every replica, are told to list again; browsers refetch the tokens.
  ctx.runtime.bus.publish({ type: "token", name: token.name });
  return { token };
});

/**
 * Revokes an agent token: its pending calls are withdrawn and its grants end with it (one
 * transaction), its `/mcp` sessions end, and open grant lists are told.
 */
export const DELETE = route({ access: ["owner"] }, async (ctx) => {
  const { token, withdrawn } = await ctx.runtime.broker.revokeAgent({
    name: ctx.params.name ?? "",
    actor: principalName(who(ctx)),
  });
  await ctx.runtime.agentMcp.endRevokedSessions();
  ctx.runtime.bus.publish({ type: "grants" });
  return { token, withdrawn };
});
