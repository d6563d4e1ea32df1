/**
 * The production server (`npm start`, the e2e suite, the benchmark): one Node HTTP server in
 * front of Next.js. The agent hot paths, `/api/calls` and `/mcp`, go straight to their handlers
 * in server/http (the same functions their route files export to Next), skipping Next's
 * per-request routing and request/response wrapping, which cost more CPU than the whole call
 * (docs/PERFORMANCE.md); every other request, pages and the rest of the API, is Next's.
 *
 * `npm run build` bundles it (scripts/build-server.mjs) and scripts/server-command.mjs runs the
 * bundle with plain Node; HOST (default 127.0.0.1) and PORT (default 3000) say where it listens.
 */
import http from "node:http";
import next from "next";
import { authenticate } from "./auth/access";
import { baseUrlFromEnv, boot } from "./boot";
import * as callsApi from "./http/calls-api";
import { answerHot, type HotPathOptions, type RouteHandler } from "./http/hot-path";
import * as mcpApi from "./http/mcp-api";
import { clientAddressStamper } from "./http/node-bridge";
import { PAGE_URL_HEADER } from "./http/page-url";
import securityHeaders from "./http/security-headers.json";
import { announceSetup } from "./runtime";

/** Paths answered without Next: the handler module's export for the method, when it has one. */
const hot = new Map<string, Partial<Record<string, RouteHandler>>>([
  ["/api/calls", callsApi],
  ["/mcp", mcpApi],
]);

const host = process.env.HOST ?? "127.0.0.1";
const port = Number(process.env.PORT ?? "3000");
const runtime = boot({ announce: false });
const app = next({ dev: false, dir: process.cwd(), hostname: host, port });
await app.prepare();
const nextHandler = app.getRequestHandler();
const listenHost = `${host.includes(":") ? `[${host}]` : host}:${port}`;
const self = `http://${listenHost}`;
const hotOptions: HotPathOptions = {
  listenHost,
  authenticate: (headers) => authenticate(runtime.db, headers),
  extraHeaders: securityHeaders,
};

// The connection's address, for the sign-in throttle: written over any copy the client sent.
const stampClientAddress = clientAddressStamper();

const server = http.createServer((req, res) => {
  stampClientAddress(req);
  const url = req.url ?? "/";
  const q = url.indexOf("?");
  const handler = hot.get(q === -1 ? url : url.slice(0, q))?.[req.method ?? ""];
  if (handler) void answerHot(req, res, handler, hotOptions);
  else {
    // Ours, never the client's: a page reads it to send a visitor to sign-in and back.
    req.headers[PAGE_URL_HEADER] = url;
    void nextHandler(req, res);
  }
});

/** Pages asked for once at start, without credentials: see {@link warmUp}. */
const WARM_PATHS = [
  "/login",
  "/servers",
  "/tools",
  "/changes",
  "/approvals",
  "/activity",
  "/grants",
  "/rules",
  "/settings",
];

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
