import { UpdateToolBody } from "@/lib/api-types";
import { principalName } from "@/server/auth/access";
import { updateTool } from "@/server/catalogue/catalogue";
import { route, who } from "@/server/http/route";

export const PATCH = route({ access: ["owner"], body: UpdateToolBody }, async (ctx) => {
  const tool = await updateTool(ctx.runtime.db, {
    localName: ctx.params.name ?? "",
    ...ctx.body,
    actor: principalName(who(ctx)),
  });
  ctx.runtime.bus.publish({ type: "catalogue", server: tool.server });
  return { tool };
});
