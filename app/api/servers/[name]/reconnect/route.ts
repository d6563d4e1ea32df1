import { principalName } from "@/server/auth/access";
import { json, route, who } from "@/server/http/route";
import { reconnectServer } from "@/server/servers/reconnect";

export const POST = route({ access: ["owner"] }, async (ctx) => {
  const { manager, db } = ctx.runtime;
  const params = { name: ctx.params.name ?? "", actor: principalName(who(ctx)) };
  return json({ server: await reconnectServer(manager, db, params, ctx.runtime.signIns) }, 202);
});
