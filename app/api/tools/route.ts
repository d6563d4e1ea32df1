import { enabledToolsFor } from "@/server/agents";
import { requesterOf } from "@/server/calls/access";
import { route } from "@/server/http/route";

// An agent sees the enabled tools its token's tool set holds; an owner sees them all.
export const GET = route({ access: ["agent", "owner"] }, async ({ runtime, principal }) => ({
  tools: await enabledToolsFor(runtime.db, runtime.toolSets, principal ? requesterOf(principal) : undefined),
}));
