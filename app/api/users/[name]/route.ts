import { UpdateUserBody } from "@/lib/api-types";
import { principalName } from "@/server/auth/access";
import { setUserEmail } from "@/server/auth/users";
import { route, who } from "@/server/http/route";

/** `PATCH /api/users/:name {email}`: sets a person's address; "" clears it. */
export const PATCH = route({ access: ["owner"], body: UpdateUserBody }, (ctx) => ({
  user: setUserEmail(ctx.runtime.db, {
    name: ctx.params.name ?? "",
    email: ctx.body.email,
    actor: principalName(who(ctx)),
  }),
}));
