/**
 * The production server (`npm start`, the e2e suite, the benchmark): one Node HTTP server in
 * front of Next.js. The agent hot paths, `/api/calls` and `/mcp`, go straight to their route
 * handlers (the same exported functions Next would call), skipping Next's per-request routing
 * and request/response wrapping, which cost more CPU than the whole call (docs/PERFORMANCE.md);
 * every other request, pages and the rest of the API, is Next's.
 *
 * `npm run build` bundles it (scripts/build-server.mjs) and scripts/server-command.mjs runs the
 * bundle with plain Node; HOST (default 127.0.0.1) and PORT (default 3000) say where it listens.
 */
import http from "node:http";
import next from "next";
import { GatehouseError } from "@/lib/errors";
import * as callsRoute from "../app/api/calls/route";
import * as mcpRoute from "../app/mcp/route";
import { baseUrlFromEnv, boot } from "./boot";
import {
  BRIDGE_MAX_BODY_BYTES,
  MAX_REQUEST_BODY_BYTES,
  readBody,
  sendResponse,
  webRequest,
} from "./http/node-bridge";
import { errorResponse } from "./http/route";
import securityHeaders from "./http/security-headers.json";
import { announceSetup } from "./runtime";

type Handler = (req: Request, ctx: { params: Promise<Record<string, string>> }) => Promise<Response>;

/** Paths answered without Next: the route module's export for the method, when it has one. */
const hot = new Map<string, Partial<Record<string, Handler>>>([
  ["/api/calls", callsRoute],
  ["/mcp", mcpRoute],
]);
const noParams = { params: Promise.resolve({}) };

const host = process.env.HOST ?? "127.0.0.1";
const port = Number(process.env.PORT ?? "3000");
const runtime = boot({ announce: false });
const app = next({ dev: false, dir: process.cwd(), hostname: host, port });
await app.prepare();
const nextHandler = app.getRequestHandler();
// The URL the hot handlers see; only its path and query are read (Origin checks use Host).
const self = `http://${host.includes(":") ? `[${host}]` : host}:${port}`;

async function answerHot(
  req: http.IncomingMessage,
  res: http.ServerResponse,
  handler: Handler,
): Promise<void> {
  const body = await readBody(req, BRIDGE_MAX_BODY_BYTES);
  if (body === null) {
    // The rest of the body is never read: the connection cannot carry another request.
    res.setHeader("Connection", "close");
    const tooLarge = new GatehouseError(
      "payload_too_large",
      `request bodies are limited to ${MAX_REQUEST_BODY_BYTES} bytes`,
    );
    await sendResponse(res, errorResponse(tooLarge), securityHeaders);
    return;
  }
  await sendResponse(res, await handler(webRequest(req, res, self, body), noParams), securityHeaders);
}

const server = http.createServer((req, res) => {
  const url = req.url ?? "/";
  const q = url.indexOf("?");
  const handler = hot.get(q === -1 ? url : url.slice(0, q))?.[req.method ?? ""];
  if (!handler) {
    void nextHandler(req, res);
    return;
  }
  answerHot(req, res, handler).catch((err: unknown) => {
    // A client that went away mid-request needs no answer; anything else is logged by errorResponse.
    if (req.destroyed || res.headersSent) res.destroy();
    else void sendResponse(res, errorResponse(err), securityHeaders);
  });
});
/** Pages asked for once at start, without credentials: see {@link warmUp}. */
const WARM_PATHS = ["/login", "/servers", "/tools", "/changes", "/approvals", "/activity", "/settings"];

/**
 * Next loads a route's server code, and the renderer's own code paths warm up, on first use:
 * the first person to open a console page after a start waited ~170 ms longer for it
 * (docs/PERFORMANCE.md). One anonymous GET per page at start moves that off their visit; each
 * is answered with a redirect to sign-in, so nothing is read or changed.
 */
async function warmUp(): Promise<void> {
  for (const path of WARM_PATHS) {
    try {
      const res = await fetch(`${self}${path}`, { redirect: "manual" });
      await res.arrayBuffer();
    } catch {
      // A failed warm-up costs only the first visitor's wait.
    }
  }
}

server.listen(port, host, () => {
  process.stdout.write(`Gatehouse listening on ${self}\n`);
  announceSetup(runtime, baseUrlFromEnv());
  void warmUp();
});
