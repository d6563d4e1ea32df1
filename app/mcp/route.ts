import { handleAgentMcp } from "@/server/agent-mcp/handler";

/** Gatehouse as an MCP server (streamable HTTP) for agents: see server/agent-mcp/endpoint.ts. */
export const dynamic = "force-dynamic";

export const GET = (req: Request) => handleAgentMcp(req);
export const POST = (req: Request) => handleAgentMcp(req);
export const DELETE = (req: Request) => handleAgentMcp(req);
