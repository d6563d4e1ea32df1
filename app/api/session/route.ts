import { SignInBody } from "@/lib/api-types";
import { TooManyAttempts } from "@/server/auth/access";
import { endSession, readCookie, SESSION_COOKIE, sessionCookie } from "@/server/auth/sessions";
import { isSecure, signIn } from "@/server/auth/signin";
import { errorResponse, json, route } from "@/server/http/route";
import { clientAddress } from "@/server/request";

export const POST = route({ access: ["public"], body: SignInBody }, async ({ req, runtime, body }) => {
  try {
    const { user, cookie } = await signIn(runtime.db, runtime.throttle, {
      ...body,
      address: clientAddress(req.headers),
      secure: isSecure(req),
    });
    return json({ user }, 200, { "Set-Cookie": cookie });
  } catch (err) {
    if (!(err instanceof TooManyAttempts)) throw err;
    const res = errorResponse(err);
    res.headers.set("Retry-After", String(err.retryAfterSeconds));
    return res;
  }
});

export const DELETE = route({ access: ["owner", "reviewer"] }, ({ req, runtime }) => {
  const sid = readCookie(req.headers.get("cookie"), SESSION_COOKIE);
  if (sid) endSession(runtime.db, sid);
  return json(undefined, 204, { "Set-Cookie": sessionCookie("", null, isSecure(req)) });
});
