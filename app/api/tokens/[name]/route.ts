import { principalName } from "@/server/auth/access";
import { route, who } from "@/server/http/route";

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
