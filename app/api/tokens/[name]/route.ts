import { principalName } from "@/server/auth/access";
import { revokeToken } from "@/server/auth/tokens";
import { route, who } from "@/server/http/route";

export const DELETE = route({ access: ["owner"] }, (ctx) => ({
  token: revokeToken(ctx.runtime.db, { name: ctx.params.name ?? "", actor: principalName(who(ctx)) }),
}));
