import { route } from "@/server/http/route";
import { serverViews } from "@/server/servers/status";

export const GET = route({ access: ["owner"] }, ({ runtime }) => ({
  servers: serverViews(runtime.manager, runtime.db, runtime.signIns),
}));
