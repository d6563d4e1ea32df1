import "server-only";
import type { IncomingMessage, ServerResponse } from "node:http";
import { GatehouseError } from "@/lib/errors";
import {
  BRIDGE_MAX_BODY_BYTES,
  headersOf,
  MAX_REQUEST_BODY_BYTES,
  readBody,
  sendResponse,
  webRequest,
} from "./node-bridge";
import { errorResponse } from "./route";

/** A route module's handler, as Next would call it. */
export type RouteHandler = (
  req: Request,
  ctx: { params: Promise<Record<string, string>> },
) => Promise<Response>;

export interface HotPathOptions {
  /** `host:port` the server listens on; the scheme follows `X-Forwarded-Proto`, as in Next. */
  listenHost: string;
  /**
   * Whether the request's credentials authenticate someone. The body of a request that does
   * not is never read: the handler refuses it from its headers alone.
   */
  authenticated(headers: Headers): boolean;
  /** Headers every answer carries (the security headers Next adds to its own). */
  extraHeaders: readonly { key: string; value: string }[];
}

const noParams = { params: Promise.resolve({}) };

/**
 * Answers one request with a route handler, without Next (server/main.ts): credentials first,
 * then the body (at most {@link BRIDGE_MAX_BODY_BYTES}), then the handler, whose `Response` is
 * streamed back. Nobody can make the server hold a body without a working credential. An
 * unexpected failure is answered 500 (and logged by `errorResponse`) while the client is still
 * there; a client that left gets nothing.
 */
export async function answerHot(
  req: IncomingMessage,
  res: ServerResponse,
  handler: RouteHandler,
  opts: HotPathOptions,
): Promise<void> {
  try {
    const headers = headersOf(req);
    let body: Buffer | null = Buffer.alloc(0);
    if (!opts.authenticated(headers)) {
      // The body stays unread, so the connection cannot carry another request.
      if (hasBody(req)) res.setHeader("Connection", "close");
    } else {
      body = await readBody(req, BRIDGE_MAX_BODY_BYTES);
    }
    if (body === null) {
      res.setHeader("Connection", "close");
      const tooLarge = new GatehouseError(
        "payload_too_large",
        `request bodies are limited to ${MAX_REQUEST_BODY_BYTES} bytes`,
      );
      await sendResponse(res, errorResponse(tooLarge), opts.extraHeaders);
      return;
    }
    const forwarded = headers.get("x-forwarded-proto")?.split(",")[0]?.trim();
    const origin = `${forwarded === "https" ? "https" : "http"}://${opts.listenHost}`;
    const response = await handler(webRequest(req, res, origin, body, headers), noParams);
    await sendResponse(res, response, opts.extraHeaders);
  } catch (err) {
    if (res.headersSent || res.destroyed) res.destroy();
    else await sendResponse(res, errorResponse(err), opts.extraHeaders);
  }
}

function hasBody(req: IncomingMessage): boolean {
  return Number(req.headers["content-length"] ?? 0) > 0 || req.headers["transfer-encoding"] !== undefined;
}
