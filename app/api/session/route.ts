import { SignInBody } from "@/lib/api-types";
import { TooManyAttempts } from "@/server/auth/access";
import { endSession, sessionCookie, sessionIdFrom } from "@/server/auth/sessions";
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

// The session and the cookie of this scheme's name: the one route() signed the request in by.
export const DELETE = route({ access: ["owner", "reviewer"] }, async ({ req, runtime }) => {
  const secure = isSecure(req);
  const sid = sessionIdFrom(req.headers.get("cookie"), secure);
  if (sid) await endSession(runtime.db, sid);
  return json(undefined, 204, { "Set-Cookie": sessionCookie("", null, secure) });
});
