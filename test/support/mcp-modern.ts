/**
 * A 2026-07-28 MCP client for `/mcp` without a web server: SDK v2's `Client` and
 * `StreamableHTTPClientTransport` over the same in-process `fetch` as the 2025 client of
 * mcp.ts, which records every request the route saw (HTTP method and JSON-RPC method), so a
 * test can tell a modern connection from one that fell back to `initialize`.
 */
import {
  Client,
  StreamableHTTPClientTransport,
  type VersionNegotiationMode,
} from "@modelcontextprotocol/client";
import { fetchVia, MCP_URL, type McpHandler, routeHandler } from "./mcp";

/** The revision a pinned client speaks. */
export const MODERN_REVISION = "2026-07-28";

/** One request as the route saw it. */
export interface SeenRequest {
  http: string;
  /** The JSON-RPC method of a POST body (null for a body that is not one message with a method). */
  rpc: string | null;
}

export interface ModernConnectOptions {
  token: string;
  /** Where requests go; default the real route module (`app/mcp/route.ts`). */
  handler?: McpHandler;
  /** Negotiation: pinned to 2026-07-28 (default), or `auto` (probe, fall back to 2025). */
  mode?: "pin" | "auto";
  /** Extra headers on every request (e.g. a bad Origin). */
  headers?: Record<string, string>;
}

export interface ModernConnected {
  client: Client;
  /** Every request the route saw from this client, in order. */
  seen: SeenRequest[];
  /** The JSON-RPC methods of {@link seen}'s POSTs, in order. */
  methods(): (string | null)[];
  close(): Promise<void>;
}

/** Wraps `handler` so each request is recorded in `seen` before it is answered. */
export function recording(handler: McpHandler, seen: SeenRequest[]): McpHandler {
  return async (req) => {
    let rpc: string | null = null;
    if (req.method === "POST") {
      try {
        const body = JSON.parse(await req.clone().text()) as { method?: unknown };
        rpc = typeof body.method === "string" ? body.method : null;
      } catch {
        rpc = null;
      }
    }
    seen.push({ http: req.method, rpc });
    return handler(req);
  };
}

/** Connects an SDK v2 client to `/mcp` with a bearer token (`server/discover` on a modern connection). */
export async function connectModern(opts: ModernConnectOptions): Promise<ModernConnected> {
  const seen: SeenRequest[] = [];
  const mode: VersionNegotiationMode = opts.mode === "auto" ? "auto" : { pin: MODERN_REVISION };
  const client = new Client(
    { name: "test-agent-2026", version: "1.0.0" },
    { capabilities: {}, versionNegotiation: { mode } },
  );
  const transport = new StreamableHTTPClientTransport(new URL(MCP_URL), {
    fetch: fetchVia(recording(opts.handler ?? routeHandler, seen)),
    requestInit: { headers: { Authorization: `Bearer ${opts.token}`, ...opts.headers } },
  });
  await client.connect(transport);
  return {
    client,
    seen,
    methods: () => seen.filter((s) => s.http === "POST").map((s) => s.rpc),
    close: () => client.close(),
  };
}

/**
 * A raw 2026-07-28 request to `/mcp` (its envelope in `_meta` and its standard headers, as the
 * SDK client sends them), for cases where the client would not send it or a test wants the
 * HTTP answer itself.
 */
export function modernRequest(
  method: string,
  params: Record<string, unknown> = {},
  headers: Record<string, string> = {},
): Request {
  const url = new URL(MCP_URL);
  return new Request(url, {
    method: "POST",
    headers: {
      host: url.host,
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      "mcp-protocol-version": MODERN_REVISION,
      "mcp-method": method,
      ...headers,
    },
    body: JSON.stringify({
      jsonrpc: "2.0",
      id: 1,
      method,
      params: {
        ...params,
        _meta: {
          "io.modelcontextprotocol/protocolVersion": MODERN_REVISION,
          "io.modelcontextprotocol/clientInfo": { name: "raw-test", version: "1.0.0" },
          "io.modelcontextprotocol/clientCapabilities": {},
        },
      },
    }),
  });
}
