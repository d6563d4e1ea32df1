import { route } from "@/server/http/route";
import { listServerResources } from "@/server/servers/inspect";

export const GET = route({ access: ["owner"] }, (ctx) =>
  listServerResources(ctx.runtime.manager.get(ctx.params.name ?? "")),
);
