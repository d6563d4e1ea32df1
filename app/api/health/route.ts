import { route } from "@/server/http/route";
import { healthPanel } from "@/server/servers/health-panel";

export const GET = route({ access: ["owner"] }, async ({ runtime }) =>
  healthPanel(runtime.db, { expireAfterSeconds: runtime.config.approvals.expireAfterSeconds }),
);
