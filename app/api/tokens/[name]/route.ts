import { principalName } from "@/server/auth/access";
import { revokeToken } from "@/server/auth/tokens";
import { route, who } from "@/server/http/route";

/** Revokes an agent token; its grants end with it, and open grant lists are told. */
export const DELETE = route({ access: ["owner"] }, (ctx) => {
  const token = revokeToken(ctx.runtime.db, { name: ctx.params.name ?? "", actor: principalName(who(ctx)) });
  ctx.runtime.bus.publish({ type: "grants" });
  return { token };
});
