import "server-only";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { AllowedPeers } from "../agent-mcp/guard";
import { authenticate } from "../auth/access";
import { INTERNAL_FORWARD_PATH, PROGRESS_STREAM } from "../replicas/forward";
import type { InternalAnswer, InternalRequest } from "../replicas/internal-route";
import { forwardedHttps } from "../request";
import type { Runtime } from "../runtime";
import * as callsApi from "./calls-api";
import { answerHealth, HEALTH_PATHS } from "./health";
import { answerHot, type HotPathOptions, type RouteHandler } from "./hot-path";
import * as mcpApi from "./mcp-api";
import { answerMetrics, METRICS_PATH } from "./metrics";
import {
  BRIDGE_MAX_BODY_BYTES,
  clientAddressStamper,
  headersOf,
  readBody,
  sendResponse,
} from "./node-bridge";
import { PAGE_URL_HEADER } from "./page-url";
import { edgePeers, refuseHost } from "./peers";
import securityHeaders from "./security-headers.json";

type Listener = (req: IncomingMessage, res: ServerResponse) => void;

export interface FrontDoorOptions {
  /** The Host allow-list (`edgePeers` in ./peers): the one `/mcp` uses. */
  peers: AllowedPeers;
  /** Paths answered without Next: per path, the handler module's export for each method. */
  hot: ReadonlyMap<string, Partial<Record<string, RouteHandler>>>;
  hotOptions: HotPathOptions;
  /** Everything else: Next's request handler. */
  next: (req: IncomingMessage, res: ServerResponse) => unknown;
  /** Applied to every request let in, before any handler reads it (`clientAddressStamper`). */
  stampClientAddress: (req: IncomingMessage) => void;
  /**
   * The internal route between replicas (`Runtime.answerInternal`), or null (SQLite). Not under
   * the Host check: replicas address each other by their registered addresses, and every request
   * is signed with their shared key, which is all that lets one in.
   */
  internal?: ((req: InternalRequest) => Promise<InternalAnswer>) | null;
  /**
   * The probes (`/healthz`, `/readyz`: ./health), or none. Not under the Host check either:
   * probes address a replica by its own address, and the answers say nothing but up or not.
   */
  health?: (path: string) => Promise<Response>;
  /**
   * `/metrics` (./metrics), or none. Not under the Host check: Prometheus scrapes each replica by
   * its own address. Its own credentials let a scrape in: the scrape token, or an owner's session
   * cookie (which a page reaching Gatehouse through DNS rebinding never has).
   */
  metrics?: (headers: Headers) => Promise<Response>;
}

/**
 * The production server's request listener (server/main.ts): first the `Host` check, for every
 * request, before Next, before any credential is looked at and before a byte of the body is
 * read, so a page that reached Gatehouse through DNS rebinding gets a refusal and nothing else
 * (no sign-in attempt counted, no cookie, no setup, not even whether a credential works). Then
 * the client's address is stamped, and the request goes to its hot-path handler or to Next.
 */
export function frontDoor(opts: FrontDoorOptions): Listener {
  return (req, res) => {
    const url = req.url ?? "/";
    const q = url.indexOf("?");
    const pathname = q === -1 ? url : url.slice(0, q);
    if (pathname === INTERNAL_FORWARD_PATH && opts.internal) {
      void serveInternal(req, res, opts.internal).catch(() => res.destroy());
      return;
    }
    if (opts.health && HEALTH_PATHS.has(pathname) && (req.method === "GET" || req.method === "HEAD")) {
      void opts
        .health(pathname)
        .then((answer) => sendResponse(res, answer, opts.hotOptions.extraHeaders))
        .catch(() => res.destroy());
      return;
    }
    if (opts.metrics && pathname === METRICS_PATH && (req.method === "GET" || req.method === "HEAD")) {
      void opts
        .metrics(headersOf(req))
        .then((answer) => sendResponse(res, answer, opts.hotOptions.extraHeaders))
        .catch(() => res.destroy());
      return;
    }
    const refusal = refuseHost(pathname, req.headers.host, opts.peers);
    if (refusal) {
      // The body stays unread, so the connection cannot carry another request.
      if (hasBody(req)) res.setHeader("Connection", "close");
      void sendResponse(res, refusal, opts.hotOptions.extraHeaders).catch(() => res.destroy());
      return;
    }
    opts.stampClientAddress(req);
    const handler = opts.hot.get(pathname)?.[req.method ?? ""];
    if (handler) void answerHot(req, res, handler, opts.hotOptions);
    else {
      // Ours, never the client's: a page reads it to send a visitor to sign-in and back.
      req.headers[PAGE_URL_HEADER] = url;
      void opts.next(req, res);
    }
  };
}

/** A request on the internal route, its body read whole (bounded) first. */
export async function serveInternal(
  req: IncomingMessage,
  res: ServerResponse,
  internal: (req: InternalRequest) => Promise<InternalAnswer>,
): Promise<void> {
  const body = await readBody(req, BRIDGE_MAX_BODY_BYTES);
  if (body === null) {
    res.writeHead(413, { "content-type": "application/json", connection: "close" });
    res.end(JSON.stringify({ error: { code: "payload_too_large", message: "forwarded request too large" } }));
    return;
  }
  const aborter = new AbortController();
  res.once("close", () => {
    if (!res.writableFinished) aborter.abort();
  });
  const url = req.url ?? "/";
  const q = url.indexOf("?");
  /** Whether progress went out ahead of the answer: then the answer is the stream's last line. */
  let streaming = false;
  const answer = await internal({
    method: req.method ?? "GET",
    path: q === -1 ? url : url.slice(0, q),
    headers: {
      get: (name) => {
        const value = req.headers[name.toLowerCase()];
        return typeof value === "string" ? value : null;
      },
    },
    body: body.toString("utf8"),
    signal: aborter.signal,
    progress(progress) {
      // Gone, or answered already (a late notification): nothing more goes out.
      if (res.destroyed || res.writableEnded) return;
      if (!streaming) {
        streaming = true;
        res.writeHead(200, { "content-type": PROGRESS_STREAM, "cache-control": "no-store" });
      }
      res.write(`${JSON.stringify({ progress })}\n`);
    },
  });
  if (res.destroyed) return;
  if (streaming) {
    res.end(`${answer.body}\n`);
    return;
  }
  res.writeHead(answer.status, {
    "content-type": "application/json",
    "content-length": Buffer.byteLength(answer.body),
  });
  res.end(answer.body);
}

function hasBody(req: IncomingMessage): boolean {
  return Number(req.headers["content-length"] ?? 0) > 0 || req.headers["transfer-encoding"] !== undefined;
}

/** Paths answered without Next: the handler module's export for the method, when it has one. */
const HOT_PATHS = new Map<string, Partial<Record<string, RouteHandler>>>([
  ["/api/calls", callsApi],
  ["/mcp", mcpApi],
]);

/**
 * The production server's listener, wired as server/main.ts runs it: {@link frontDoor} with the
 * runtime's allow-list ({@link edgePeers} over `env`), the hot paths `/api/calls` and `/mcp`
 * (credentials checked from the headers, the session cookie named for the scheme
 * `X-Forwarded-Proto` gives, which is the scheme of the hot path's request URL), the security
 * headers, and the client's address stamped per `GATEHOUSE_TRUST_PROXY` in `env`.
 *
 * @param listenHost `host:port` the server listens on (the hot path's request URLs).
 * @param env default `process.env`.
 */
export function gatehouseListener(
  runtime: Runtime,
  next: FrontDoorOptions["next"],
  listenHost: string,
  env: Readonly<Record<string, string | undefined>> = process.env,
): Listener {
  return frontDoor({
    peers: edgePeers(runtime, env),
    hot: HOT_PATHS,
    hotOptions: {
      listenHost,
      authenticate: async (headers) => authenticate(runtime.db, headers, forwardedHttps(headers)),
      extraHeaders: securityHeaders,
    },
    next,
    // The connection's address, for the sign-in throttle: written over any copy the client sent.
    stampClientAddress: clientAddressStamper(env),
    internal: runtime.answerInternal,
    health: (path) => answerHealth(path, runtime),
    metrics: (headers) =>
      answerMetrics(headers, {
        ...runtime,
        ...(runtime.config.metrics ? { scrapeToken: runtime.config.metrics.token } : {}),
      }),
  });
}
