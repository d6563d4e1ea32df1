import { principalName } from "@/server/auth/access";
import { route, who } from "@/server/http/route";

export const POST = route({ access: ["reviewer"] }, (ctx) => ({
  call: ctx.runtime.broker.approve(principalName(who(ctx)), ctx.params.id ?? ""),
}));
