import { route } from "@/server/http/route";
import { listServerResources } from "@/server/mcp/inspect";

export const GET = route({ access: ["owner"] }, (ctx) =>
  listServerResources(ctx.runtime, ctx.params.name ?? ""),
);
