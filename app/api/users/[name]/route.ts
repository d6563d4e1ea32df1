import { UpdateUserBody } from "@/lib/api-types";
import { principalName } from "@/server/auth/access";
import { updateUser } from "@/server/auth/users";
import { route, who } from "@/server/http/route";

/**
 * `PATCH /api/users/:name {email?, roles?}`: sets a person's address ("" clears it) and/or roles.
 * A role taken may end grants: open grant lists are told.
 */
export const PATCH = route({ access: ["owner"], body: UpdateUserBody }, (ctx) => {
  const user = updateUser(ctx.runtime.db, {
    name: ctx.params.name ?? "",
    email: ctx.body.email,
    roles: ctx.body.roles,
    actor: principalName(who(ctx)),
  });
  if (ctx.body.roles) ctx.runtime.bus.publish({ type: "grants" });
  return { user };
});
