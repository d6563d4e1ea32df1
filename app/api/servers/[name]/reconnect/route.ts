import { principalName } from "@/server/auth/access";
import { json, route, who } from "@/server/http/route";
import { reconnectServer } from "@/server/mcp/actions";

export const POST = route({ access: ["owner"] }, (ctx) =>
  json({ server: reconnectServer(ctx.runtime, ctx.params.name ?? "", principalName(who(ctx))) }, 202),
);
