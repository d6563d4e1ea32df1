import { SignInBody } from "@/lib/api-types";
import { endSession, readCookie, SESSION_COOKIE, sessionCookie } from "@/server/auth/sessions";
import { isSecure, signIn } from "@/server/auth/signin";
import { json, route } from "@/server/http/route";

export const POST = route({ access: ["public"], body: SignInBody }, async ({ req, runtime, body }) => {
  const { user, cookie } = await signIn(runtime.db, runtime.throttle, { ...body, secure: isSecure(req) });
  return json({ user }, 200, { "Set-Cookie": cookie });
});

export const DELETE = route({ access: ["owner", "reviewer"] }, ({ req, runtime }) => {
  const sid = readCookie(req.headers.get("cookie"), SESSION_COOKIE);
  if (sid) endSession(runtime.db, sid);
  return json(undefined, 204, { "Set-Cookie": sessionCookie("", null, isSecure(req)) });
});
