import { listGrants } from "@/server/grants";
import { route } from "@/server/http/route";

/** `GET /api/grants`: live grants (newest first), then recently ended ones with why they ended. */
export const GET = route({ access: ["owner", "reviewer"] }, async ({ runtime }) => ({
  grants: await listGrants(runtime.db),
}));
