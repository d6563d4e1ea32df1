/**
 * The independent-shape rows' tool server (bench/independent.ts), written the way a user writes
 * one: TypeScript run through `node --import tsx`, the SDK v1 `Server` with five tools. Stdio by
 * default; with `--http` it serves streamable HTTP on PORT (0: any free port; prints
 * "listening <port>") in the SDK's default, stateful mode, so every answer is an event stream
 * (`--json`: JSON answers).
 */
import { randomUUID } from "node:crypto";
import http from "node:http";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import {
  CallToolRequestSchema,
  isInitializeRequest,
  ListToolsRequestSchema,
} from "@modelcontextprotocol/sdk/types.js";

const text = { type: "object", properties: { text: { type: "string" } }, required: ["text"] } as const;
const TOOLS = [
  { name: "echo", description: "Returns its text.", inputSchema: text, annotations: { readOnlyHint: true } },
  {
    name: "upper",
    description: "Its text in capitals.",
    inputSchema: text,
    annotations: { readOnlyHint: true },
  },
  {
    name: "reverse",
    description: "Its text backwards.",
    inputSchema: text,
    annotations: { readOnlyHint: true },
  },
  {
    name: "length",
    description: "How long its text is.",
    inputSchema: text,
    annotations: { readOnlyHint: true },
  },
  { name: "note", description: "Keeps its text (a write: no annotations).", inputSchema: text },
];

function answer(name: string, value: string): string {
  switch (name) {
    case "upper":
      return value.toUpperCase();
    case "reverse":
      return [...value].reverse().join("");
    case "length":
      return String(value.length);
    default:
      return value;
  }
}

function makeServer(): Server {
  const server = new Server({ name: "echo-five", version: "1.0.0" }, { capabilities: { tools: {} } });
  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: TOOLS }));
  server.setRequestHandler(CallToolRequestSchema, async (req) => ({
    content: [{ type: "text", text: answer(req.params.name, String(req.params.arguments?.text ?? "")) }],
  }));
  return server;
}

async function readJson(req: http.IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return chunks.length > 0 ? JSON.parse(Buffer.concat(chunks).toString("utf8")) : undefined;
}

if (process.argv.includes("--http")) {
  // The SDK's stateful example: one transport per session, found by its Mcp-Session-Id.
  const sessions = new Map<string, StreamableHTTPServerTransport>();
  const httpServer = http.createServer(async (req, res) => {
    const id = req.headers["mcp-session-id"];
    const known = typeof id === "string" ? sessions.get(id) : undefined;
    const body = req.method === "POST" ? await readJson(req) : undefined;
    if (known) return known.handleRequest(req, res, body);
    if (req.method !== "POST" || !isInitializeRequest(body)) {
      res
        .writeHead(400)
        .end(JSON.stringify({ jsonrpc: "2.0", error: { code: -32000, message: "no session" } }));
      return;
    }
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      // `--json`: one JSON body per answer instead (what the friendly rows' echo does).
      enableJsonResponse: process.argv.includes("--json"),
      onsessioninitialized: (sid) => {
        sessions.set(sid, transport);
      },
    });
    transport.onclose = () => {
      if (transport.sessionId) sessions.delete(transport.sessionId);
    };
    await makeServer().connect(transport);
    await transport.handleRequest(req, res, body);
  });
  httpServer.listen(Number(process.env.PORT ?? 0), "127.0.0.1", () => {
    const addr = httpServer.address();
    console.log(`listening ${typeof addr === "object" && addr ? addr.port : 0}`);
  });
} else {
  await makeServer().connect(new StdioServerTransport());
}
