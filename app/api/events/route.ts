import { route } from "@/server/http/route";
import { eventStream } from "@/server/http/sse";

export const dynamic = "force-dynamic";

export const GET = route({ access: ["owner", "reviewer"] }, ({ runtime, req }) =>
  eventStream(runtime.bus, req.signal),
);
