import "server-only";
import { ProtocolError } from "@modelcontextprotocol/server";
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

/**
 * The refusal of a session past a token's cap of `max`: 429, not 503, since the limit is this
 * token's own and Gatehouse itself is fine.
 */
export function tooManySessions(max: number): Response {
  return rpcError(
    429,
    -32000,
    `Too many sessions: this token has too many open sessions (${max}), each with an open event stream or a request in flight (a call waiting for approval, say); end one with DELETE /mcp, or retry once one of them is over`,
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

/**
 * A JSON-RPC error for a request handler of `/mcp` to throw: the SDK's `Server` answers with
 * `code`, `message` and `data` as they are (a v1 client then shows `MCP error <code>: <message>`,
 * the prefix once).
 */
export function rpcFailure(code: number, message: string, data?: unknown): ProtocolError {
  return new ProtocolError(code, message, data);
}

/**
 * `err` with every leading `MCP error <code>: ` taken off its message, as a `ProtocolError` with
 * the same code and data; anything else is returned as it is. Such a prefix comes from upstream:
 * a tool server on the v1 SDK writes its `McpError`'s message, prefix included, on the wire, and
 * passed on as it is a v1 client would show it twice (`MCP error -32002: MCP error -32002: …`).
 */
export function withoutPrefix(err: unknown): unknown {
  if (!(err instanceof Error)) return err;
  const { code, data } = err as { code?: unknown; data?: unknown };
  if (typeof code !== "number" || !Number.isSafeInteger(code)) return err;
  const message = err.message.replace(/^(?:MCP error -?\d+:\s*)+/, "");
  return message === err.message ? err : new ProtocolError(code, message, data);
}

/** `handler`, with whatever it throws passed through {@link withoutPrefix}. */
export function answersOnce<A extends unknown[], R>(
  handler: (...args: A) => R | Promise<R>,
): (...args: A) => Promise<R> {
  return async (...args) => {
    try {
      return await handler(...args);
    } catch (err) {
      throw withoutPrefix(err);
    }
  };
}
