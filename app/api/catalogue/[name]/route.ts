import { SetToolStatusBody } from "@/lib/api-types";
import { principalName } from "@/server/auth/access";
import { setToolStatus } from "@/server/catalogue/catalogue";
import { route, who } from "@/server/http/route";

export const PATCH = route({ access: ["owner"], body: SetToolStatusBody }, (ctx) => {
  const tool = setToolStatus(ctx.runtime.db, {
    localName: ctx.params.name ?? "",
    status: ctx.body.status,
    actor: principalName(who(ctx)),
  });
  ctx.runtime.bus.publish({ type: "catalogue", server: tool.server });
  return { tool };
});
