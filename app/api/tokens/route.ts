import { CreateTokenBody } from "@/lib/api-types";
import { tokenActivity } from "@/server/agents";
import { principalName } from "@/server/auth/access";
import { createToken, listTokens } from "@/server/auth/tokens";
import { json, route, who } from "@/server/http/route";

export const GET = route({ access: ["owner"] }, async ({ runtime }) => ({
  tokens: await listTokens(runtime.db),
  toolSets: runtime.toolSets.names(),
  activity: await tokenActivity(runtime.db),
}));

export const POST = route({ access: ["owner"], body: CreateTokenBody }, async (ctx) =>
  json(
    await createToken(ctx.runtime.db, {
      name: ctx.body.name,
      actor: principalName(who(ctx)),
      toolSet: ctx.body.toolSet ?? null,
      knownSets: ctx.runtime.toolSets.names(),
    }),
    201,
  ),
);
