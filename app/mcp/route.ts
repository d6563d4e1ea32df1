/** Gatehouse as an MCP server (streamable HTTP) for agents: see server/http/mcp-api.ts. */
export const dynamic = "force-dynamic";

export { DELETE, GET, POST } from "@/server/http/mcp-api";
