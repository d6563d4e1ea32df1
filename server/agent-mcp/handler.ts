import "server-only";
import { logger } from "../log";
import { getRuntime } from "../runtime";

const log = logger("agent-mcp");

/**
 * `/mcp` for the route file: Host/Origin check, bearer authentication and the session's SDK
 * transport all happen in the runtime's `AgentMcpEndpoint`; an unexpected failure becomes
 * a JSON-RPC internal error without its details.
 */
export async function handleAgentMcp(req: Request): Promise<Response> {
  try {
    return await getRuntime().agentMcp.handle(req);
  } catch (err) {
    log.error("unhandled error in /mcp", {
      error: err instanceof Error ? (err.stack ?? err.message) : String(err),
    });
    return Response.json(
      { jsonrpc: "2.0", error: { code: -32603, message: "Internal error" }, id: null },
      { status: 500, headers: { "Cache-Control": "no-store" } },
    );
  }
}
