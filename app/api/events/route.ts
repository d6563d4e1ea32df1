import { authenticate } from "@/server/auth/access";
import { isSecure } from "@/server/auth/signin";
import { route, who } from "@/server/http/route";
import { eventStream } from "@/server/http/sse";

export const dynamic = "force-dynamic";

/** The live-event stream of a signed-in person; it ends once their session does. */
export const GET = route({ access: ["owner", "reviewer"] }, (ctx) => {
  const { runtime, req } = ctx;
  const reader = who(ctx);
  const stillSignedIn = async () => {
    const now = await authenticate(runtime.db, req.headers, isSecure(req));
    return now?.kind === "user" && reader.kind === "user" && now.user.id === reader.user.id;
  };
  return eventStream(runtime.bus, req.signal, stillSignedIn);
});
