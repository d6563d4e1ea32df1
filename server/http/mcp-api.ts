import "server-only";
import { rpcError } from "../agent-mcp/rpc";
import { logger } from "../log";
import { getRuntime } from "../runtime";
import type { HandlerContext } from "./route";

const log = logger("agent-mcp");

/**
 * `/mcp` at the edge: exported by app/mcp/route.ts for Next, and called directly by
 * server/main.ts. Host/Origin check, bearer authentication (unless the hot path hands over
 * the principal it found) and the session's SDK transport all happen in the runtime's
 * `AgentMcpEndpoint`; an unexpected failure becomes a JSON-RPC internal error without its
 * details.
 */
async function answer(req: Request, ctx?: HandlerContext): Promise<Response> {
  try {
    return await getRuntime().agentMcp.handle(req, ctx?.principal);
  } catch (err) {
    log.error("unhandled error in /mcp", {
      error: err instanceof Error ? (err.stack ?? err.message) : String(err),
    });
    return rpcError(500, -32603, "Internal error");
  }
}

export const GET = answer;
export const POST = answer;
export const DELETE = answer;
