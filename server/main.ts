/**
 * The production server (`npm start`, the e2e suite, the benchmark): one Node HTTP server in
 * front of Next.js. The agent hot paths, `/api/calls` and `/mcp`, go straight to their handlers
 * in server/http (the same functions their route files export to Next), skipping Next's
 * per-request routing and request/response wrapping, which cost more CPU than the whole call
 * (docs/PERFORMANCE.md); every other request, pages and the rest of the API, is Next's.
 *
 * Every request first passes the `Host` check of server/http/front-door.ts (DNS-rebinding
 * protection for pages, the API and `/mcp` alike).
 *
 * `npm run build` bundles it (scripts/build-server.mjs) and scripts/server-command.mjs runs the
 * bundle with plain Node; HOST (default 127.0.0.1) and PORT (default 3000) say where it listens.
 */
import http from "node:http";
import next from "next";
import { baseUrlFromEnv, boot } from "./boot";
import { gatehouseListener } from "./http/front-door";
import { announceSetup } from "./runtime";

const host = process.env.HOST ?? "127.0.0.1";
const port = Number(process.env.PORT ?? "3000");
const runtime = await boot({ announce: false });
const app = next({ dev: false, dir: process.cwd(), hostname: host, port });
await app.prepare();
const nextHandler = app.getRequestHandler();
const listenHost = `${host.includes(":") ? `[${host}]` : host}:${port}`;
const self = `http://${listenHost}`;
const server = http.createServer(gatehouseListener(runtime, nextHandler, listenHost));

/**
 * Where the warm-up asks: the listen address, or loopback when that is a wildcard (0.0.0.0, ::),
 * which is not a name any client sends as Host, so the front door would refuse it.
 */
const warmBase = ["0.0.0.0", "::", "[::]"].includes(host) ? `http://127.0.0.1:${port}` : self;

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
      const res = await fetch(`${warmBase}${path}`, { redirect: "manual" });
      await res.arrayBuffer();
    } catch {
      // A failed warm-up costs only the first visitor's wait.
    }
  }
}

server.listen(port, host, () => {
  process.stdout.write(`Gatehouse listening on ${self}\n`);
  void announceSetup(runtime, baseUrlFromEnv())
    .catch((err: unknown) => process.stderr.write(`the setup link could not be made: ${String(err)}\n`))
    .then(warmUp);
});
