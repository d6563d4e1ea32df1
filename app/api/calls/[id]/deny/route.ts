import { DenyBody } from "@/lib/api-types";
import { principalName } from "@/server/auth/access";
import { route, who } from "@/server/http/route";

export const POST = route({ access: ["reviewer"], body: DenyBody }, async (ctx) => ({
  call: await ctx.runtime.broker.deny(principalName(who(ctx)), ctx.params.id ?? "", ctx.body.reason),
}));
