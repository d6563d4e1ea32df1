import { ResourceReadQuery } from "@/lib/api-types";
import { route } from "@/server/http/route";
import { readServerResource } from "@/server/servers/inspect";

export const GET = route({ access: ["owner"], query: ResourceReadQuery }, (ctx) =>
  readServerResource(ctx.runtime.manager.get(ctx.params.name ?? ""), ctx.query.uri),
);
