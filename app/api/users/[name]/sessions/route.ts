import { principalName } from "@/server/auth/access";
import { signedOutCookie } from "@/server/auth/signin";
import { endUserSessions } from "@/server/auth/user-admin";
import { json, route, who } from "@/server/http/route";

/**
 * `DELETE /api/users/:name/sessions`: signs a person out everywhere (every session ends; nothing
 * else changes). Answers `{ended}`; doing it to yourself signs this browser out too.
 */
export const DELETE = route({ access: ["owner"] }, async (ctx) => {
  const actor = principalName(who(ctx));
  const name = ctx.params.name ?? "";
  const ended = await endUserSessions(ctx.runtime.db, { name, actor });
  return json({ ended }, 200, name === actor ? { "Set-Cookie": signedOutCookie(ctx.req) } : undefined);
});
