import "server-only";
import { MAX_REQUEST_BODY_BYTES, readJsonBody } from "../request";

/** JSON-RPC on `/mcp` outside a session's transport: refusals, and reading a POST's message. */

/** A JSON-RPC error response, as the SDK's transport writes its own. */
export function rpcError(
  status: number,
  code: number,
  message: string,
  headers?: Record<string, string>,
): Response {
  return Response.json(
    { jsonrpc: "2.0", error: { code, message }, id: null },
    { status, headers: { "Cache-Control": "no-store", ...headers } },
  );
}

/** A POST body as parsed JSON, or the JSON-RPC error answering a body too large or not JSON. */
export async function readMessage(req: Request): Promise<{ parsed: unknown } | Response> {
  const body = await readJsonBody(req);
  if (body.ok) return { parsed: body.value };
  if (body.problem === "too_large") {
    return rpcError(413, -32000, `Payload Too Large: at most ${MAX_REQUEST_BODY_BYTES} bytes`);
  }
  return rpcError(400, -32700, "Parse error: Invalid JSON");
}

/**
 * Whether a POST body is one JSON-RPC request that can hear nothing but its response: the
 * only messages Gatehouse sends about a request before answering it are progress
 * notifications, and those need a progress token.
 */
export function expectsOnlyItsResponse(body: unknown): boolean {
  if (typeof body !== "object" || body === null || Array.isArray(body)) return false;
  const m = body as { id?: unknown; method?: unknown; params?: { _meta?: { progressToken?: unknown } } };
  return m.id !== undefined && typeof m.method === "string" && m.params?._meta?.progressToken === undefined;
}
