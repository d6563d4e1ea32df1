import { ResourceReadsQuery } from "@/lib/api-types";
import { listResourceReads } from "@/server/agent-mcp/reads";
import { route } from "@/server/http/route";

/** `GET /api/resource-reads` (reviewers, owners): agents' resource reads and refusals through `/mcp`, newest first. */
export const GET = route({ access: ["owner", "reviewer"], query: ResourceReadsQuery }, ({ runtime, query }) =>
  listResourceReads(runtime.db, query),
);
