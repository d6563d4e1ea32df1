import { ChangePasswordBody } from "@/lib/api-types";
import { TooManyAttempts } from "@/server/auth/access";
import { requestSessionId } from "@/server/auth/signin";
import { changeOwnPassword } from "@/server/auth/user-admin";
import { errorResponse, route, who } from "@/server/http/route";
import { clientAddress } from "@/server/request";

/**
 * `POST /api/me/password {current, password}`: the signed-in person changes their own password.
 * The current one is checked like a sign-in (and throttled like one: 429 with `Retry-After`);
 * their other sessions end, this one stays. Answers `{user, sessionsEnded}`.
 */
export const POST = route({ access: ["owner", "reviewer"], body: ChangePasswordBody }, async (ctx) => {
  const p = who(ctx);
  const name = p.kind === "user" ? p.user.name : "";
  try {
    return await changeOwnPassword(ctx.runtime.db, ctx.runtime.throttle, {
      name,
      current: ctx.body.current,
      password: ctx.body.password,
      keepSession: requestSessionId(ctx.req),
      address: clientAddress(ctx.req.headers),
    });
  } catch (err) {
    if (!(err instanceof TooManyAttempts)) throw err;
    const res = errorResponse(err);
    res.headers.set("Retry-After", String(err.retryAfterSeconds));
    return res;
  }
});
