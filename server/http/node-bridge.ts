import "server-only";
import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from "node:http";
import { logger } from "../log";
import {
  CLIENT_ADDRESS_HEADER,
  clientAddressOf,
  MAX_REQUEST_BODY_BYTES,
  trustClientAddressHeader,
  trustedProxyCount,
} from "../request";
import { JsonResponse } from "./json-response";

const log = logger("http");

/**
 * What server/main.ts buffers at most before a handler runs: a backstop a little above
 * {@link MAX_REQUEST_BODY_BYTES}, so a handler's own limit answers first and in its own format.
 */
export const BRIDGE_MAX_BODY_BYTES = MAX_REQUEST_BODY_BYTES + 64 * 1024;

/**
 * Reads a Node request's body into one buffer, or `null` once it passes `max` bytes (a
 * `Content-Length` over `max` is refused before a byte is read). Reading stops there without
 * destroying the socket, so the caller can still answer 413 (with `Connection: close`).
 * Methods without a body resolve to an empty buffer. This is the bridge's backstop on raw
 * bytes; the handlers read the web `Request` it builds with `readJsonBody` (server/request.ts).
 */
export function readBody(req: IncomingMessage, max: number): Promise<Buffer | null> {
  if (req.method === "GET" || req.method === "HEAD") return Promise.resolve(Buffer.alloc(0));
  const declared = Number(req.headers["content-length"]);
  if (Number.isFinite(declared) && declared > max) return Promise.resolve(null);
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > max) {
        req.off("data", onData).off("end", onEnd).off("error", reject);
        resolve(null);
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = () => resolve(chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, size));
    req.on("data", onData).once("end", onEnd).once("error", reject);
  });
}

/**
 * What server/main.ts applies to every request before anything reads it: sets
 * `CLIENT_ADDRESS_HEADER` (server/request.ts) to the client's address, per `clientAddressOf`
 * with `GATEHOUSE_TRUST_PROXY` from `env`, replacing any copy the client sent, or removes it
 * when the socket has no address. Creating one also tells this process's handlers to believe
 * that header. A `GATEHOUSE_TRUST_PROXY` it cannot read trusts no proxy, with a warning; so does
 * the first `X-Forwarded-For` seen while no proxy is trusted (everyone behind that proxy then
 * shares its sign-in bucket).
 */
export function clientAddressStamper(
  env: Record<string, string | undefined> = process.env,
): (req: IncomingMessage) => void {
  const parsed = trustedProxyCount(env.GATEHOUSE_TRUST_PROXY);
  if (parsed === null)
    log.warn("GATEHOUSE_TRUST_PROXY is not a number of proxies, true or false: no proxy is trusted");
  const hops = parsed ?? 0;
  let warned = false;
  trustClientAddressHeader();
  return (req) => {
    const raw = req.headers["x-forwarded-for"];
    const forwardedFor = Array.isArray(raw) ? raw.join(", ") : (raw ?? null);
    if (hops === 0 && forwardedFor !== null && !warned) {
      warned = true;
      log.warn(
        "a request carried X-Forwarded-For but GATEHOUSE_TRUST_PROXY is not set: behind a proxy, set it, or every client shares the proxy's sign-in throttle",
      );
    }
    const address = clientAddressOf(req.socket.remoteAddress, forwardedFor, hops);
    if (address === null) delete req.headers[CLIENT_ADDRESS_HEADER];
    else req.headers[CLIENT_ADDRESS_HEADER] = address;
  };
}

/** A Node request's headers as web `Headers` (a repeated header keeps every value). */
export function headersOf(req: IncomingMessage): Headers {
  const headers = new Headers();
  for (const [name, value] of Object.entries(req.headers)) {
    if (value === undefined) continue;
    if (Array.isArray(value)) for (const v of value) headers.append(name, v);
    else headers.set(name, value);
  }
  return headers;
}

/**
 * The web `Request` for a Node request whose body was read already. Its `signal` aborts when
 * the client goes away before the response is finished (what long-polls and held MCP calls
 * listen to). `origin` is `scheme://host:port` as the client addressed us; `headers` default to
 * the request's own ({@link headersOf}).
 */
export function webRequest(
  req: IncomingMessage,
  res: ServerResponse,
  origin: string,
  body: Buffer,
  headers: Headers = headersOf(req),
): Request {
  const aborter = new AbortController();
  res.once("close", () => {
    if (!res.writableFinished) aborter.abort();
  });
  return new Request(`${origin}${req.url ?? "/"}`, {
    method: req.method,
    headers,
    // Node buffers sit on plain ArrayBuffers; the DOM typing only wants that said.
    body: body.length > 0 ? (body as Uint8Array<ArrayBuffer>) : undefined,
    signal: aborter.signal,
  });
}

/**
 * Writes a web `Response` to a Node response: status, headers (each `Set-Cookie` on its own
 * line), then the body: an event stream as it is produced, so it reaches the client unbuffered
 * (a client that goes away cancels it); any other body whole, with its `Content-Length`.
 * `extraHeaders` are set unless the response sets the same header itself.
 */
export async function sendResponse(
  res: ServerResponse,
  response: Response,
  extraHeaders: readonly { key: string; value: string }[] = [],
): Promise<void> {
  if (res.destroyed) {
    // The client left while the handler worked (a held call it gave up on): nobody to write to,
    // and 'close' has fired already, so the body's producer is released here.
    await response.body?.cancel().catch(() => {});
    return;
  }
  const headers: OutgoingHttpHeaders = {};
  for (const { key, value } of extraHeaders) headers[key.toLowerCase()] = value;
  for (const [name, value] of response.headers) if (name !== "set-cookie") headers[name] = value;
  const cookies = response.headers.getSetCookie();
  if (cookies.length > 0) headers["set-cookie"] = cookies;
  if (response instanceof JsonResponse && !response.bodyUsed) {
    // Our own JSON answers carry their text: no web stream is made or read for them.
    const body = Buffer.from(response.jsonText);
    headers["content-length"] = body.byteLength;
    res.writeHead(response.status, headers);
    res.end(body);
    return;
  }
  if (!response.body) {
    res.writeHead(response.status, headers);
    res.end();
    return;
  }
  if (!(response.headers.get("content-type") ?? "").includes("text/event-stream")) {
    // Anything but an event stream (a JSON answer) goes out whole, in one write with its length,
    // rather than as chunks: an agent's call answer is a few hundred bytes.
    let body: Buffer;
    try {
      body = Buffer.from(await response.arrayBuffer());
    } catch {
      res.destroy();
      return;
    }
    headers["content-length"] = body.byteLength;
    res.writeHead(response.status, headers);
    res.end(body);
    return;
  }
  res.writeHead(response.status, headers);
  const reader = response.body.getReader();
  let gone = false;
  res.once("close", () => {
    gone = true;
    reader.cancel().catch(() => {});
  });
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done || gone || res.destroyed) break;
      if (!res.write(value)) await drained(res);
    }
  } catch {
    // The body's producer failed mid-stream: the status is sent, so all that is left is to stop.
    res.destroy();
    return;
  }
  res.end();
}

/** Resolves when `res` can take more data, or is closed. */
function drained(res: ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    if (res.destroyed) {
      resolve();
      return;
    }
    const done = () => {
      res.off("drain", done);
      res.off("close", done);
      resolve();
    };
    res.on("drain", done);
    res.on("close", done);
  });
}
