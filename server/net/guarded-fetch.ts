import "server-only";
import dns from "node:dns";
import { isIP } from "node:net";
import type { Readable } from "node:stream";
import type { FetchLike } from "@modelcontextprotocol/client";
import { Agent, buildConnector, type Dispatcher } from "undici";
import { refusedAddressKind } from "./address-policy";

export interface GuardOptions {
  /** Config name of the server, for error messages. */
  server: string;
  allowPrivate: boolean;
  /** Connect timeout in ms. */
  connectTimeoutMs: number;
  /** DNS resolver; tests inject one to simulate answers. Defaults to `dns.lookup`. */
  lookup?: typeof dns.lookup;
  /**
   * Why an address may not be dialled, or null. Defaults to {@link refusedAddressKind}; tests
   * inject a policy that treats one loopback address as public, since they may only send
   * traffic to loopback.
   */
  refuse?: (ip: string) => string | null;
  /** TLS options for https servers (tests pass a self-signed CA). */
  tls?: { ca?: string | Buffer };
}

export class RefusedAddressError extends Error {
  readonly code = "GATEHOUSE_REFUSED_ADDRESS";
}

function refusal(host: string, ip: string, kind: string): RefusedAddressError {
  const shown = host === ip ? ip : `${host} resolves to ${ip}`;
  return new RefusedAddressError(`refused: ${shown}, ${kind}; set allowPrivate to allow`);
}

/**
 * One undici Agent per server, whose connector checks the address actually dialled (after DNS
 * resolution, so a rebinding name cannot slip through) unless the server has `allowPrivate`.
 * Proxy variables are never consulted: this Agent always dials the peer itself.
 */
export function createGuardedAgent(opts: GuardOptions): Agent {
  const lookup = opts.lookup ?? dns.lookup;
  const refuse = opts.refuse ?? refusedAddressKind;
  const guardedLookup = ((
    hostname: string,
    options: dns.LookupOptions,
    callback: (...a: unknown[]) => void,
  ) => {
    lookup(hostname, options, (err: NodeJS.ErrnoException | null, address: unknown, family?: number) => {
      if (err) return callback(err);
      if (!opts.allowPrivate) {
        const addresses = Array.isArray(address)
          ? (address as dns.LookupAddress[]).map((a) => a.address)
          : [address as string];
        for (const ip of addresses) {
          const kind = refuse(ip);
          if (kind) return callback(refusal(hostname, ip, kind));
        }
      }
      callback(null, address, family);
    });
  }) as unknown as typeof dns.lookup;

  const connector = buildConnector({ timeout: opts.connectTimeoutMs, lookup: guardedLookup, ...opts.tls });
  return new Agent({
    connect: (options, callback) => {
      // An IP literal never reaches `lookup`: check it here.
      const host = options.hostname.replace(/^\[|\]$/g, "");
      if (!opts.allowPrivate && isIP(host) !== 0) {
        const kind = refuse(host);
        if (kind) return callback(refusal(host, host, kind), null);
      }
      connector(options, callback);
    },
    keepAliveTimeout: 30_000,
  });
}

export class RedirectRefusedError extends Error {
  readonly code = "GATEHOUSE_REDIRECT_REFUSED";
}

/** Most redirects followed for one request by a server without `allowPrivate`. */
export const MAX_REDIRECTS = 3;

export interface GuardedFetchOptions {
  server: string;
  allowPrivate: boolean;
  /** Names of the configured headers: never sent to another origin after a redirect. */
  credentialHeaders: string[];
  /** Least gap between two requests to this server (default 0: never waits). */
  minIntervalMs?: number;
  /**
   * Follow no redirect at all, whatever `allowPrivate` says (default false). For a destination
   * that is sent a body once, signed for it (webhooks): a redirect would re-send it elsewhere.
   */
  refuseRedirects?: boolean;
}

/**
 * Spaces requests `minIntervalMs` apart, counted from when the previous one actually went out (a
 * timer that fires late must not let the next request through early); callers take turns. Null
 * when there is nothing to space (no await at all).
 */
function pacer(minIntervalMs: number): (() => Promise<void>) | null {
  if (minIntervalMs <= 0) return null;
  let next = 0;
  let turn: Promise<void> = Promise.resolve();
  return () => {
    turn = turn.then(async () => {
      for (let wait = next - Date.now(); wait > 0; wait = next - Date.now()) {
        await new Promise((resolve) => setTimeout(resolve, wait));
      }
      next = Date.now() + minIntervalMs;
    });
    return turn;
  };
}

const ALWAYS_PRIVATE = ["authorization", "cookie", "proxy-authorization", "mcp-session-id"];

function withoutCredentials(headers: RequestInit["headers"], configured: string[]): Headers {
  const out = new Headers(headers);
  for (const name of [...ALWAYS_PRIVATE, ...configured]) out.delete(name);
  return out;
}

/**
 * What one guarded request answered: its status and headers, and its body still to be read. The
 * caller must read the body to its end or destroy it: until then the request holds its
 * connection, and its abort listener on the caller's signal.
 */
export interface GuardedAnswer {
  status: number;
  statusText: string;
  headers: Headers;
  body: Readable;
}

/** `fetch`'s arguments, `fetch`'s redirect rules (below), a {@link GuardedAnswer} back. */
export type GuardedRequest = (input: string | URL, init?: RequestInit) => Promise<GuardedAnswer>;

/**
 * Requests through one server's guarded Agent with undici's dispatcher API rather than its
 * `fetch`: the same connection pool and connect-time address check, without fetch's per-request
 * Request, Response and web-stream objects. Those cost an MCP server's HTTP calls more CPU than
 * the rest of Gatehouse's call path, and fetch's Request adds a listener to the caller's signal
 * that only a garbage collection removes, where the SDK passes one long-lived signal for every
 * request of a connection (docs/PERFORMANCE.md). Here the listener goes when the body closes.
 *
 * Redirects are resolved here, so every hop is dialled (and address-checked) again: a server with
 * `allowPrivate` follows none; others follow at most {@link MAX_REDIRECTS}, never from https to
 * http, and drop the configured headers (and Authorization, cookies, the MCP session) when the
 * origin changes. The caller never sees a redirect response.
 */
export function guardedRequest(agent: Agent, opts: GuardedFetchOptions): GuardedRequest {
  const pace = pacer(opts.minIntervalMs ?? 0);
  return async (input, init) => {
    let url = new URL(String(input));
    let request: RequestInit = { ...init };
    for (let hop = 0; ; hop++) {
      if (pace) await pace();
      const res = await sendOnce(agent, url, request);
      const location = res.headers.get("location");
      if (res.status < 300 || res.status >= 400 || location === null) return res;
      discard(res.body);
      if (opts.refuseRedirects) {
        throw new RedirectRefusedError(
          `refused: ${opts.server} answered with a redirect (${res.status}); it must answer itself`,
        );
      }
      if (opts.allowPrivate) {
        throw new RedirectRefusedError(
          `refused: ${opts.server} answered with a redirect (${res.status}); servers with allowPrivate follow no redirects`,
        );
      }
      if (hop >= MAX_REDIRECTS) {
        throw new RedirectRefusedError(`refused: ${opts.server} redirected more than ${MAX_REDIRECTS} times`);
      }
      let next: URL;
      try {
        next = new URL(location, url);
      } catch {
        throw new RedirectRefusedError(`refused: ${opts.server} redirected to an invalid URL`);
      }
      if (next.protocol !== "https:" && next.protocol !== "http:") {
        throw new RedirectRefusedError(`refused: ${opts.server} redirected to a ${next.protocol} URL`);
      }
      if (url.protocol === "https:" && next.protocol === "http:") {
        throw new RedirectRefusedError(`refused: ${opts.server} redirected from https to plain http`);
      }
      if (next.username || next.password) {
        throw new RedirectRefusedError(`refused: ${opts.server} redirected to a URL with credentials in it`);
      }
      if (next.origin !== url.origin) {
        request = { ...request, headers: withoutCredentials(request.headers, opts.credentialHeaders) };
      }
      const method = (request.method ?? "GET").toUpperCase();
      if (
        (res.status === 301 || res.status === 302 || res.status === 303) &&
        method !== "GET" &&
        method !== "HEAD"
      ) {
        request = { ...request, method: "GET", body: undefined };
      }
      url = next;
    }
  };
}

/**
 * Drops a body unread, closing its connection. undici reports a destroyed body as an abort on
 * its error event, which nobody else listens to here.
 */
export function discard(body: Readable): void {
  body.on("error", () => undefined);
  body.destroy();
}

/** The requests in flight under each caller's signal (see {@link childSignal}). */
const inFlight = new WeakMap<AbortSignal, Set<AbortController>>();

/**
 * A signal of one request's own that aborts when `parent` does, until `release` (called once its
 * body has closed). However many requests share `parent` (the SDK passes one signal for every
 * request of a connection, dozens in flight under load), `parent` carries one listener: a
 * listener each would make every request's `addEventListener` walk all the others', and trip
 * Node's leak warning past ten.
 */
function childSignal(parent: AbortSignal): { signal: AbortSignal; release(): void } {
  if (parent.aborted) return { signal: parent, release: () => undefined };
  let children = inFlight.get(parent);
  if (!children) {
    const set = new Set<AbortController>();
    parent.addEventListener(
      "abort",
      () => {
        for (const child of set) child.abort(parent.reason);
        set.clear();
      },
      { once: true },
    );
    inFlight.set(parent, set);
    children = set;
  }
  const child = new AbortController();
  const siblings = children;
  siblings.add(child);
  return { signal: child.signal, release: () => siblings.delete(child) };
}

/**
 * A Node body as a web stream that pulls from it (Node 20's `Readable.toWeb` throws from its data
 * handler when the web stream was cancelled while data was on its way). `check` (default none)
 * sees each chunk first: an error it returns errors the stream and drops the body. `onEnd`
 * (default none) runs once, when the body ends, breaks, fails `check` or is cancelled.
 */
export function webStreamOf(
  body: Readable,
  opts: { check?(chunk: Buffer): Error | null; onEnd?(error: Error | null): void } = {},
): ReadableStream<Uint8Array> {
  let ended = false;
  const end = (error: Error | null) => {
    if (ended) return false;
    ended = true;
    opts.onEnd?.(error);
    return true;
  };
  return new ReadableStream<Uint8Array>({
    start(controller) {
      body.on("data", (chunk: Buffer) => {
        if (ended) return;
        const error = opts.check?.(chunk) ?? null;
        if (error) {
          end(error);
          discard(body);
          controller.error(error);
          return;
        }
        controller.enqueue(chunk);
        if ((controller.desiredSize ?? 0) <= 0) body.pause();
      });
      body.once("end", () => {
        if (end(null)) controller.close();
      });
      // A body that breaks (network error, server reset) never ends.
      body.once("error", (err) => {
        if (end(err)) controller.error(err);
      });
    },
    pull() {
      body.resume();
    },
    cancel() {
      end(null);
      discard(body);
    },
  });
}

/** Statuses whose responses have no body (the fetch standard's "null body status"). */
export const NULL_BODY_STATUSES: ReadonlySet<number> = new Set([101, 103, 204, 205, 304]);

/**
 * {@link guardedRequest} as a `fetch`, for callers that want one (the SDK's OAuth client,
 * webhooks): the answer is the global `Response`, whose body streams from the connection.
 */
export function guardedFetch(agent: Agent, opts: GuardedFetchOptions): FetchLike {
  const send = guardedRequest(agent, opts);
  return async (input, init) => {
    const res = await send(input, init);
    const empty = NULL_BODY_STATUSES.has(res.status) || (init?.method ?? "GET").toUpperCase() === "HEAD";
    if (empty) res.body.resume();
    const body = empty ? null : webStreamOf(res.body);
    return new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers });
  };
}

/** One request, no redirect followed. Rejects as `fetch` would (on a URL with credentials in it, too). */
async function sendOnce(agent: Agent, url: URL, init: RequestInit): Promise<GuardedAnswer> {
  if (url.username || url.password) throw new TypeError("a request URL may not include credentials");
  const headers: Record<string, string> = {};
  new Headers(init.headers).forEach((value, name) => {
    headers[name] = value;
  });
  const body = await bodyOf(init.body, headers);
  const signal = init.signal ? childSignal(init.signal) : null;
  let res: Dispatcher.ResponseData;
  try {
    res = await agent.request({
      origin: url.origin,
      path: `${url.pathname}${url.search}`,
      method: (init.method ?? "GET").toUpperCase() as Dispatcher.HttpMethod,
      headers,
      body,
      signal: signal?.signal,
    });
  } catch (err) {
    signal?.release();
    // As `fetch` fails: the signal's reason when it was aborted, else "fetch failed" with the
    // reason (the guard's refusal, ECONNREFUSED, a reset) as its cause, which is how the rest of
    // Gatehouse tells an unreachable server from one that answered.
    if (init.signal?.aborted) throw init.signal.reason;
    throw new TypeError("fetch failed", { cause: err });
  }
  if (signal) res.body.once("close", signal.release);
  const answerHeaders = new Headers();
  for (const [name, value] of Object.entries(res.headers)) {
    if (Array.isArray(value)) for (const v of value) answerHeaders.append(name, v);
    else if (value !== undefined) answerHeaders.append(name, value);
  }
  return { status: res.statusCode, statusText: res.statusText ?? "", headers: answerHeaders, body: res.body };
}

/**
 * A request body as bytes or text, its content type added as `fetch` would when none was set (a
 * form's, for the OAuth token requests). Strings and bytes, what MCP transports send, pass as they are.
 */
async function bodyOf(
  body: RequestInit["body"],
  headers: Record<string, string>,
): Promise<string | Uint8Array | null> {
  if (body === undefined || body === null) return null;
  if (typeof body === "string" || body instanceof Uint8Array) return body;
  const extracted = new Response(body);
  const type = extracted.headers.get("content-type");
  if (type !== null && headers["content-type"] === undefined) headers["content-type"] = type;
  return new Uint8Array(await extracted.arrayBuffer());
}
