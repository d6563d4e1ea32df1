import { principalName } from "@/server/auth/access";
import { revokeGrant } from "@/server/grants";
import { route, who } from "@/server/http/route";

/** `DELETE /api/grants/:id`: any reviewer or owner ends a grant now ("revoked by <name>"). */
export const DELETE = route({ access: ["owner", "reviewer"] }, async (ctx) => {
  const grant = await revokeGrant(ctx.runtime.db, ctx.params.id ?? "", principalName(who(ctx)));
  ctx.runtime.bus.publish({ type: "grants" });
  return { grant };
});
