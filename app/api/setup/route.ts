import { SetupBody } from "@/lib/api-types";
import { isSecure, setupOwner } from "@/server/auth/signin";
import { json, route } from "@/server/http/route";

export const POST = route({ access: ["public"], body: SetupBody }, async ({ req, runtime, body }) => {
  const { user, cookie } = await setupOwner(runtime.db, { ...body, secure: isSecure(req) });
  return json({ user }, 201, { "Set-Cookie": cookie });
});
