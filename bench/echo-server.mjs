#!/usr/bin/env node
/**
 * The benchmark's tool server: a read-only `echo` tool and a `write` tool without annotations
 * (destructive, so it needs approval), both instant, so measurements see the cost of the path,
 * not of the tool. `node bench/echo-server.mjs` speaks stdio; with `--http` it serves
 * streamable HTTP on PORT (0 = any free port; prints "listening <port>"), answering with JSON,
 * or with `--event-stream` as the SDK's server transport does by default (a `text/event-stream`
 * of one event per answer).
 */
import http from "node:http";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js";

function makeServer() {
  const server = new Server({ name: "bench-echo", version: "1.0.0" }, { capabilities: { tools: {} } });
  server.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: [
      {
        name: "echo",
        description: "Returns its text.",
        inputSchema: { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
        annotations: { readOnlyHint: true },
      },
      {
        name: "write",
        description: "Returns its text; no annotations, so a gateway must hold it for approval.",
        inputSchema: { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
      },
    ],
  }));
  server.setRequestHandler(CallToolRequestSchema, async (req) => ({
    content: [{ type: "text", text: String(req.params.arguments?.text ?? "") }],
  }));
  return server;
}

if (process.argv.includes("--http")) {
  let requests = 0;
  const httpServer = http.createServer(async (req, res) => {
    requests++;
    if (req.url === "/stats") {
      res.end(JSON.stringify({ requests }));
      return;
    }
    // Stateless: one server and transport per request, as the SDK's stateless example does.
    const server = makeServer();
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: undefined,
      enableJsonResponse: !process.argv.includes("--event-stream"),
    });
    res.on("close", () => {
      void transport.close();
      void server.close();
    });
    await server.connect(transport);
    const chunks = [];
    for await (const c of req) chunks.push(c);
    const body = chunks.length > 0 ? JSON.parse(Buffer.concat(chunks).toString("utf8")) : undefined;
    await transport.handleRequest(req, res, body);
  });
  httpServer.keepAliveTimeout = 60_000;
  httpServer.listen(Number(process.env.PORT ?? 0), "127.0.0.1", () => {
    const addr = httpServer.address();
    process.stdout.write(`listening ${typeof addr === "object" && addr ? addr.port : 0}\n`);
  });
} else {
  await makeServer().connect(new StdioServerTransport());
}
