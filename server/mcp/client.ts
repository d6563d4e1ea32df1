import "server-only";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import {
  type CallToolResult,
  ListRootsRequestSchema,
  ToolListChangedNotificationSchema,
} from "@modelcontextprotocol/sdk/types.js";
import { GatehouseError } from "@/lib/errors";

/**
 * The SDK client Gatehouse dials a tool server with. Roots: Gatehouse exposes no filesystem to
 * tool servers, so `roots/list` answers none. Sampling and elicitation are not declared, so the
 * SDK refuses them with a JSON-RPC error. Each `notifications/tools/list_changed` calls
 * `onToolsChanged` (which must not throw).
 */
export function newClient(onToolsChanged: () => void): Client {
  const client = new Client(
    { name: "gatehouse", version: "0.1.0" },
    { capabilities: { roots: { listChanged: false } } },
  );
  client.setRequestHandler(ListRootsRequestSchema, async () => ({ roots: [] }));
  client.setNotificationHandler(ToolListChangedNotificationSchema, async () => onToolsChanged());
  return client;
}

/**
 * `result`, unless it holds no answer: the SDK fills in `content: []` when a result has none, and
 * that is no answer, not an empty success (`upstream_error`).
 */
export function answerOf(server: string, result: CallToolResult): CallToolResult {
  if (result.content.length === 0 && result.structuredContent === undefined) {
    throw new GatehouseError("upstream_error", `server ${server}: the server returned an empty result`);
  }
  return result;
}
