import "server-only";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import {
  type CallToolResult,
  ListRootsRequestSchema,
  type Root,
  ToolListChangedNotificationSchema,
} from "@modelcontextprotocol/sdk/types.js";
import { GatehouseError } from "@/lib/errors";

/**
 * The SDK client Gatehouse dials a tool server with. Roots: `roots/list` answers `roots` (the
 * server's configured `roots`, default none) and nothing else; each answer is a fresh copy, so
 * nothing a server does with one reaches the next. `listChanged: true` is kept without ever
 * sending `notifications/roots/list_changed`: the roots come from the config, which changes only
 * with a restart, so within one connection the list never changes, and a new connection (a new
 * process or session) asks afresh. Sampling and elicitation are not declared, so the SDK refuses
 * them with a JSON-RPC error. Each `notifications/tools/list_changed` calls `onToolsChanged`
 * (which must not throw).
 */
export function newClient(onToolsChanged: () => void, roots: readonly Root[] = []): Client {
  // Copied now: only the uri and name of each root, whatever else the objects passed in hold.
  const listed = roots.map(({ uri, name }) => (name === undefined ? { uri } : { uri, name }));
  const client = new Client(
    { name: "gatehouse", version: "0.1.0" },
    { capabilities: { roots: { listChanged: true } } },
  );
  client.setRequestHandler(ListRootsRequestSchema, async () => ({
    roots: listed.map((root) => ({ ...root })),
  }));
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
