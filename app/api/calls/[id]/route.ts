import { WaitQuery } from "@/lib/api-types";
import { assertMaySee } from "@/server/calls/access";
import { route, who } from "@/server/http/route";

export const GET = route({ access: ["agent", "reviewer"], query: WaitQuery }, async (ctx) => {
  const id = ctx.params.id ?? "";
  const p = who(ctx);
  assertMaySee(p, await ctx.runtime.broker.get(id), id);
  return ctx.runtime.broker.wait(id, ctx.query.wait ?? 0, ctx.req.signal, ctx.req.headers.get("traceparent"));
});
