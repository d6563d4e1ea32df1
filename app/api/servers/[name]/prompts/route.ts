import { route } from "@/server/http/route";
import { listServerPrompts } from "@/server/mcp/inspect";

export const GET = route({ access: ["owner"] }, (ctx) =>
  listServerPrompts(ctx.runtime, ctx.params.name ?? ""),
);
