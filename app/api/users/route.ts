import { CreateUserBody } from "@/lib/api-types";
import { principalName } from "@/server/auth/access";
import { createUser, listUsers } from "@/server/auth/users";
import { json, route, who } from "@/server/http/route";

export const GET = route({ access: ["owner"] }, async ({ runtime }) => ({
  users: await listUsers(runtime.db),
}));

export const POST = route({ access: ["owner"], body: CreateUserBody }, async (ctx) => {
  const user = await createUser(ctx.runtime.db, { ...ctx.body, actor: principalName(who(ctx)) });
  return json({ user }, 201);
});
