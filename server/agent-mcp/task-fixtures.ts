/**
 * A task-aware 2026-07-28 client for `/mcp`, for tests (vitest, through the route module in
 * process, and the e2e spec, over real HTTP): SDK v2's `Client` pinned to 2026-07-28 for
 * `server/discover`, and `@modelcontextprotocol/ext-tasks`' session on it for `tools/call` and
 * `tasks/*`. The SDK client cannot carry those itself (it refuses a `resultType: "task"` answer,
 * and sends no `tasks/*`), so ext-tasks asks the host for a raw dispatch: here one JSON-RPC POST
 * per request with the headers the SDK's transport would send (`MCP-Protocol-Version`,
 * `Mcp-Method`, `Mcp-Name`), answered as JSON or as an event stream. No imports from the product:
 * the e2e spec uses it as it is.
 */
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import {
  createTaskSessionFromClient,
  DispatchError,
  type JsonRpcResponse,
  type RawClientDispatch,
  type TaskEnabledSession,
} from "@modelcontextprotocol/ext-tasks/client";
import type { JsonValue } from "@modelcontextprotocol/ext-tasks/core";

export const TASKS_REVISION = "2026-07-28";

export interface TaskClientOptions {
  /** `/mcp`'s URL. */
  url: string;
  token: string;
  /** How requests reach Gatehouse; default the global `fetch`. */
  fetch?: typeof fetch;
}

export interface TaskClient {
  client: Client;
  session: TaskEnabledSession;
  /**
   * One request sent as the session sends its own (the same headers), with `_meta` as given:
   * without the extension declared unless `params._meta` declares it.
   */
  raw(method: string, params: Record<string, unknown>): Promise<JsonRpcResponse>;
  /** The JSON-RPC methods of every POST this client sent (its SDK client's, its session's, {@link raw}'s), in order. */
  sent: string[];
  close(): Promise<void>;
}

const CLIENT_INFO = { name: "test-task-agent", version: "1.0.0" };

/** The envelope of a 2026-07-28 request that declares nothing. */
export function plainEnvelope(): Record<string, unknown> {
  return {
    "io.modelcontextprotocol/protocolVersion": TASKS_REVISION,
    "io.modelcontextprotocol/clientInfo": CLIENT_INFO,
    "io.modelcontextprotocol/clientCapabilities": {},
  };
}

/** The JSON-RPC response with `id` in an answer: one JSON message, or an event stream's. */
async function answerOf(res: Response, id: string): Promise<JsonRpcResponse> {
  const text = await res.text();
  const type = res.headers.get("content-type") ?? "";
  const bodies = type.startsWith("text/event-stream")
    ? text
        .split(/\r?\n\r?\n/)
        .map((event) =>
          event
            .split(/\r?\n/)
            .filter((line) => line.startsWith("data:"))
            .map((line) => line.slice(5).trimStart())
            .join("\n"),
        )
        .filter((data) => data !== "")
    : [text];
  for (const body of bodies) {
    let message: { id?: unknown; result?: JsonValue; error?: { code: number; message: string } };
    try {
      message = JSON.parse(body) as typeof message;
    } catch {
      continue;
    }
    if (message.id !== id && message.id !== null) continue;
    if (message.error) return { kind: "error", error: message.error };
    if (message.result !== undefined) return { kind: "result", result: message.result };
  }
  throw new DispatchError(`no answer to ${id} (HTTP ${res.status}): ${text.slice(0, 200)}`);
}

/** Connects to `/mcp` as a task-aware 2026-07-28 client (see the top of this file). */
export async function connectTaskClient(opts: TaskClientOptions): Promise<TaskClient> {
  const sent: string[] = [];
  const given = opts.fetch ?? fetch;
  // Every POST's JSON-RPC method, the SDK client's own (server/discover) included.
  const doFetch: typeof fetch = (input, init) => {
    if (init?.method === "POST" && typeof init.body === "string") {
      const method = (JSON.parse(init.body) as { method?: unknown }).method;
      if (typeof method === "string") sent.push(method);
    }
    return given(input, init);
  };
  let next = 0;
  const post = async (message: Record<string, unknown>, headers: Record<string, string> = {}) => {
    const method = String(message.method);
    const params = (message.params ?? {}) as Record<string, unknown>;
    const name = method === "tools/call" ? params.name : params.taskId;
    const sending = new Headers({
      authorization: `Bearer ${opts.token}`,
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      "mcp-protocol-version": TASKS_REVISION,
      "mcp-method": method,
    });
    if (typeof name === "string") sending.set("mcp-name", name);
    // ext-tasks names the task itself (`Mcp-Name`): set, not appended, so the header is one value.
    for (const [key, value] of Object.entries(headers)) sending.set(key, value);
    const res = await doFetch(opts.url, { method: "POST", headers: sending, body: JSON.stringify(message) });
    return answerOf(res, String(message.id));
  };
  const rawDispatch: RawClientDispatch = (request, options) => {
    next += 1;
    return post(
      { ...(request as Record<string, unknown>), jsonrpc: "2.0", id: `task-client-${next}` },
      options?.context?.headers,
    );
  };

  const client = new Client(CLIENT_INFO, {
    capabilities: {},
    versionNegotiation: { mode: { pin: TASKS_REVISION } },
  });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(opts.url), {
      fetch: doFetch,
      requestInit: { headers: { Authorization: `Bearer ${opts.token}` } },
    }),
  );
  const session = createTaskSessionFromClient(client, {
    endpointId: `gatehouse ${opts.url}`,
    rawDispatch,
    v2RequestFraming: {
      protocolVersion: TASKS_REVISION,
      clientInfo: CLIENT_INFO,
      clientCapabilities: {},
    },
  });
  return {
    client,
    session,
    sent,
    raw(method, params) {
      next += 1;
      return post({
        jsonrpc: "2.0",
        id: `task-client-${next}`,
        method,
        params: { _meta: plainEnvelope(), ...params },
      });
    },
    async close() {
      await session.close();
      await client.close();
    },
  };
}
