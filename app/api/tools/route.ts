import { listEnabledTools } from "@/server/catalogue/catalogue";
import { route } from "@/server/http/route";

export const GET = route({ access: ["agent", "owner"] }, ({ runtime }) => ({
  tools: listEnabledTools(runtime.db),
}));
