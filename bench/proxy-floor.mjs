#!/usr/bin/env node
/**
 * The minimal proxy floor: what any MCP gateway must pay. Streamable HTTP in (the SDK's
 * web-standard server transport), an SDK Client out to the stdio echo server, and nothing else:
 * no auth, no store, no checks. Prints "listening <port>".
 */
import http from "node:http";
import path from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js";
import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const echo = path.join(path.dirname(new URL(import.meta.url).pathname), "echo-server.mjs");
const upstream = new Client({ name: "proxy-floor", version: "1.0.0" });
await upstream.connect(new StdioClientTransport({ command: process.execPath, args: [echo] }));

function makeServer() {
  const server = new Server({ name: "proxy-floor", version: "1.0.0" }, { capabilities: { tools: {} } });
  server.setRequestHandler(ListToolsRequestSchema, () => upstream.listTools());
  server.setRequestHandler(CallToolRequestSchema, (req) => upstream.callTool(req.params));
  return server;
}

const httpServer = http.createServer(async (req, res) => {
  const chunks = [];
  for await (const c of req) chunks.push(c);
  const headers = new Headers();
  for (const [k, v] of Object.entries(req.headers)) if (typeof v === "string") headers.set(k, v);
  const request = new Request(`http://127.0.0.1${req.url}`, {
    method: req.method,
    headers,
    body: chunks.length > 0 ? Buffer.concat(chunks) : undefined,
  });
  const server = makeServer();
  const transport = new WebStandardStreamableHTTPServerTransport({
    sessionIdGenerator: undefined,
    enableJsonResponse: true,
  });
  await server.connect(transport);
  const response = await transport.handleRequest(request);
  res.writeHead(response.status, Object.fromEntries(response.headers));
  res.end(Buffer.from(await response.arrayBuffer()));
  void transport.close();
  void server.close();
});
httpServer.keepAliveTimeout = 60_000;
httpServer.listen(Number(process.env.PORT ?? 0), "127.0.0.1", () => {
  const addr = httpServer.address();
  process.stdout.write(`listening ${typeof addr === "object" && addr ? addr.port : 0}\n`);
});
