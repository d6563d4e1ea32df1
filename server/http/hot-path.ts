import "server-only";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Principal } from "../auth/access";
import { forwardedHttps } from "../request";
import { inSpan, tracing } from "../tracing";
import { BRIDGE_MAX_BODY_BYTES, headersOf, readBody, sendResponse, webRequest } from "./node-bridge";
import { errorResponse, type HandlerContext, payloadTooLarge, type RouteHandlerFn } from "./route";

/** A route module's handler, as Next would call it, or as the hot path does with the principal it found. */
export type RouteHandler = (req: Request, ctx: HandlerContext) => Promise<Response>;

export interface HotPathOptions {
  /** `host:port` the server listens on; the scheme follows `X-Forwarded-Proto`, as in Next. */
  listenHost: string;
  /**
   * Who the request's credentials authenticate, or null. The body of a request nobody is
   * authenticated by is never read: the handler refuses it from its headers alone. Whatever
   * this answers is handed to the handler as `principal`, so it is asked once per request.
   * It reads the store: a failure (the store busy or unreachable) is answered as any other.
   */
  authenticate(headers: Headers): Promise<Principal | null>;
  /** Headers every answer carries (the security headers Next adds to its own). */
  extraHeaders: readonly { key: string; value: string }[];
}

const noParams = Promise.resolve({});
const EMPTY = Buffer.alloc(0);

/**
 * Answers one request with a route handler, without Next (server/main.ts): credentials first,
 * then the body (at most {@link BRIDGE_MAX_BODY_BYTES}), then the handler, with the principal
 * found, whose `Response` is streamed back. Nobody can make the server hold a body without a
 * working credential. An unexpected failure is answered 500 (and logged by `errorResponse`)
 * while the client is still there; a client that left gets nothing.
 */
export function answerHot(
  req: IncomingMessage,
  res: ServerResponse,
  handler: RouteHandler,
  opts: HotPathOptions,
): Promise<void> {
  if (!tracing()) return answer(req, res, handler, opts);
  // One span per agent request, continuing the trace the agent sent.
  const path = (req.url ?? "/").split("?")[0] ?? "/";
  const method = req.method ?? "GET";
  return inSpan(
    `${method} ${path}`,
    {
      kind: "server",
      traceparent: typeof req.headers.traceparent === "string" ? req.headers.traceparent : null,
      attributes: { "http.request.method": method, "url.path": path },
    },
    async (span) => {
      await answer(req, res, handler, opts, span.traceparent);
      span.setAttribute("http.response.status_code", res.statusCode);
    },
  );
}

async function answer(
  req: IncomingMessage,
  res: ServerResponse,
  handler: RouteHandler,
  opts: HotPathOptions,
  /** The request's span: the parent of the spans under it, handed on as the `traceparent` header. */
  traceparent: string | null = null,
): Promise<void> {
  try {
    const headers = headersOf(req);
    if (traceparent) headers.set("traceparent", traceparent);
    let body: Buffer | null = Buffer.alloc(0);
    const principal = traceparent
      ? await inSpan("authenticate", { traceparent }, async (span) => {
          const found = await opts.authenticate(headers);
          span.setAttribute("gatehouse.authenticated", found?.kind ?? "nobody");
          return found;
        })
      : await opts.authenticate(headers);
    if (principal === null) {
      // The body stays unread, so the connection cannot carry another request.
      if (hasBody(req)) res.setHeader("Connection", "close");
    } else {
      body = await readBody(req, BRIDGE_MAX_BODY_BYTES);
    }
    if (body === null) {
      res.setHeader("Connection", "close");
      await sendResponse(res, errorResponse(payloadTooLarge()), opts.extraHeaders);
      return;
    }
    const origin = `${forwardedHttps(headers) ? "https" : "http"}://${opts.listenHost}`;
    // A route() handler takes the body as read: the web Request then carries none, which spares
    // it the stream a body needs, and the handler reading that stream back.
    const handsBody = (handler as Partial<RouteHandlerFn>).bodyFromContext === true;
    const request = webRequest(req, res, origin, handsBody ? EMPTY : body, headers);
    const ctx = handsBody ? { params: noParams, principal, body } : { params: noParams, principal };
    const response = await handler(request, ctx);
    await sendResponse(res, response, opts.extraHeaders);
  } catch (err) {
    if (res.headersSent || res.destroyed) res.destroy();
    else await sendResponse(res, errorResponse(err), opts.extraHeaders);
  }
}

function hasBody(req: IncomingMessage): boolean {
  return Number(req.headers["content-length"] ?? 0) > 0 || req.headers["transfer-encoding"] !== undefined;
}
