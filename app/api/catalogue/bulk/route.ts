import { BulkToolStatusBody } from "@/lib/api-types";
import { principalName } from "@/server/auth/access";
import { bulkSetToolStatus } from "@/server/catalogue/catalogue";
import { route, who } from "@/server/http/route";

/** One status for many tools in one transaction (all or nothing); one event per server touched. */
export const POST = route({ access: ["owner"], body: BulkToolStatusBody }, async (ctx) => {
  const changed = await bulkSetToolStatus(ctx.runtime.db, { ...ctx.body, actor: principalName(who(ctx)) });
  for (const server of new Set(changed.map((t) => t.server)))
    ctx.runtime.bus.publish({ type: "catalogue", server });
  return { tools: changed };
});
