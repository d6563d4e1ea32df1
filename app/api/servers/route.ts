import { route } from "@/server/http/route";
import { serverViews } from "@/server/servers/status";

export const GET = route({ access: ["owner"] }, async ({ runtime }) => ({
  servers: await serverViews(runtime.manager, runtime.db, runtime.signIns),
}));
