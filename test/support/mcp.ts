/**
 * An MCP client for `/mcp` without a web server: the SDK's `StreamableHTTPClientTransport`
 * with a `fetch` that builds real `Request` objects and hands them to the route's handlers (or
 * to any `(req) => Promise<Response>`), the way Next.js would.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { LATEST_PROTOCOL_VERSION } from "@modelcontextprotocol/sdk/types.js";
import * as mcpRoute from "@/app/mcp/route";
import { ORIGIN } from "./runtime";

export const MCP_URL = `${ORIGIN}/mcp`;

export type McpHandler = (req: Request) => Promise<Response>;

/** The handlers of app/mcp/route.ts, chosen by method as Next.js does. */
export const routeHandler: McpHandler = (req) => {
  const handler = (mcpRoute as Record<string, unknown>)[req.method];
  if (typeof handler !== "function") return Promise.resolve(new Response(null, { status: 405 }));
  return (handler as McpHandler)(req);
};

/** A `fetch` that never touches the network: `Host` is the URL's, as a real client would send it. */
export function fetchVia(handler: McpHandler): typeof fetch {
  return async (input, init) => {
    const url = new URL(input instanceof Request ? input.url : String(input));
    const headers = new Headers(init?.headers);
    if (!headers.has("host")) headers.set("host", url.host);
    return handler(new Request(url, { ...init, headers }));
  };
}

export interface ConnectOptions {
  token: string;
  handler?: McpHandler;
  /** Extra headers on every request (e.g. a bad Origin). */
  headers?: Record<string, string>;
  /** Options of the SDK Client (e.g. `listChanged`). */
  clientOptions?: ConstructorParameters<typeof Client>[1];
}

export interface Connected {
  client: Client;
  transport: StreamableHTTPClientTransport;
  /** Closes the client; with `terminate`, ends the session with DELETE first. */
  close(opts?: { terminate?: boolean }): Promise<void>;
}

/** Connects an SDK client to `/mcp` with a bearer token and completes `initialize`. */
export async function connectMcp(opts: ConnectOptions): Promise<Connected> {
  const client = new Client(
    { name: "test-agent", version: "1.0.0" },
    opts.clientOptions ?? { capabilities: {} },
  );
  const transport = new StreamableHTTPClientTransport(new URL(MCP_URL), {
    fetch: fetchVia(opts.handler ?? routeHandler),
    requestInit: { headers: { Authorization: `Bearer ${opts.token}`, ...opts.headers } },
  });
  await client.connect(transport);
  return {
    client,
    transport,
    async close(closeOpts = {}) {
      if (closeOpts.terminate) await transport.terminateSession();
      await client.close();
    },
  };
}

/** A raw `initialize` request to `/mcp`, for cases the SDK client would not send. */
export function initializeRequest(headers: Record<string, string> = {}): Request {
  const url = new URL(MCP_URL);
  return new Request(url, {
    method: "POST",
    headers: {
      host: url.host,
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      ...headers,
    },
    body: JSON.stringify({
      jsonrpc: "2.0",
      id: 1,
      method: "initialize",
      params: {
        protocolVersion: LATEST_PROTOCOL_VERSION,
        capabilities: {},
        clientInfo: { name: "raw-test", version: "1.0.0" },
      },
    }),
  });
}
