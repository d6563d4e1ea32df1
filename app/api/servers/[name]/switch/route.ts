import { SwitchServerBody } from "@/lib/api-types";
import { principalName } from "@/server/auth/access";
import { json, route, who } from "@/server/http/route";
import { serverView } from "@/server/servers/status";
import { switchServer } from "@/server/servers/switch";

/** `POST {"on": true|false}`: an owner switches a server without `enabled` in its entry on or off. */
export const POST = route({ access: ["owner"], body: SwitchServerBody }, async (ctx) => {
  const { manager, db, signIns } = ctx.runtime;
  const name = ctx.params.name ?? "";
  await switchServer(manager, db, { name, on: ctx.body.on, actor: principalName(who(ctx)) });
  return json({ server: await serverView(manager, db, name, signIns) });
});
