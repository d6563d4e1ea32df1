import { route } from "@/server/http/route";
import { listServerPrompts } from "@/server/servers/inspect";

export const GET = route({ access: ["owner"] }, (ctx) =>
  listServerPrompts(ctx.runtime.manager.get(ctx.params.name ?? "")),
);
