import { listEnabledTools } from "@/server/catalogue/catalogue";
import { route } from "@/server/http/route";

export const GET = route({ access: ["agent", "owner"] }, async ({ runtime }) => ({
  tools: await listEnabledTools(runtime.db),
}));
