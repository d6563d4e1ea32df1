import "server-only";
import type { Readable } from "node:stream";
import {
  type AuthProvider,
  type FetchLike,
  type JSONRPCMessage,
  parseJSONRPCMessage,
  type RequestId,
  SSEClientTransport,
  StreamableHTTPClientTransport,
  type Transport,
  type TransportSendOptions,
} from "@modelcontextprotocol/client";
import {
  discard,
  type GuardedAnswer,
  type GuardedRequest,
  NULL_BODY_STATUSES,
  webStreamOf,
} from "../net/guarded-fetch";
import { eventSizeCounter, FrameTooLargeError, readEventStream, tooLarge } from "./event-stream";
import { SessionLostError, STREAM_ENDED_CODE } from "./failures";

export { FrameTooLargeError } from "./event-stream";

import { type AuthChallenge, readChallenge } from "./sign-in";

/**
 * How long after a response body ends the SDK gets to deliver what it already read, before a
 * request still unanswered is failed. The SDK parses the body through a stream pipeline, so its
 * last messages arrive a few ticks after the body closes.
 */
const SETTLE_MS = 25;

/**
 * Reopening the GET event stream after it broke: the SDK's steps (1 s growing by 1.5 to 30 s),
 * but 10 tries (about 100 s) rather than its 2 (2.5 s). A server that takes longer to restart
 * would otherwise leave the connection without its stream for good, and so without
 * `list_changed`; and a reopened stream that the server refuses is how a restart shows itself
 * before the next request.
 */
const EVENT_STREAM_REOPEN = {
  initialReconnectionDelay: 1000,
  maxReconnectionDelay: 30_000,
  reconnectionDelayGrowFactor: 1.5,
  maxRetries: 10,
};

/** The 2026-07-28 request that opens a stream of notifications rather than asking for one answer. */
const LISTEN_METHOD = "subscriptions/listen";
/** The 2026-07-28 era probe. */
const DISCOVER_METHOD = "server/discover";

/** The requests (not notifications or responses) of a JSON-RPC POST body: ids and methods, in step. */
function requestsOf(body: unknown): { ids: RequestId[]; methods: string[]; traceparent: string | null } {
  const ids: RequestId[] = [];
  const methods: string[] = [];
  let traceparent: string | null = null;
  if (typeof body !== "string") return { ids, methods, traceparent };
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    return { ids, methods, traceparent };
  }
  const messages = Array.isArray(parsed) ? parsed : [parsed];
  for (const m of messages) {
    if (m && typeof m === "object" && "method" in m && "id" in m) {
      const { id, method, params } = m as {
        id: unknown;
        method: unknown;
        params?: { _meta?: { traceparent?: unknown } };
      };
      if ((typeof id === "string" || typeof id === "number") && typeof method === "string") {
        ids.push(id);
        methods.push(method);
        // A tool call's trace (`_meta.traceparent`, put there by ServerRequests.callTool).
        const carried = method === "tools/call" ? params?._meta?.traceparent : undefined;
        if (typeof carried === "string") traceparent = carried;
      }
    }
  }
  return { ids, methods, traceparent };
}

/** Most of a 400 answer read to see whether it names the session; such answers are short. */
const REFUSAL_PEEK_BYTES = 4096;

/** The first `max` bytes of a body as text; the rest is dropped, never read. */
function peekText(body: Readable, max: number): Promise<string> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const done = () => {
      body.off("data", onData);
      discard(body);
      resolve(Buffer.concat(chunks).subarray(0, max).toString("utf8"));
    };
    const onData = (chunk: Buffer) => {
      chunks.push(chunk);
      size += chunk.byteLength;
      if (size >= max) done();
    };
    body.on("data", onData);
    body.once("end", done);
    body.once("error", done);
  });
}

/**
 * Whether a 400 answer says the session is unknown: "Bad Request: No valid session ID provided"
 * (the SDK's example servers, server-everything), "Mcp-Session-Id header is required", or "Server
 * not initialized" (a server with one transport, restarted).
 */
export function namesLostSession(text: string): boolean {
  let message = text;
  try {
    const parsed = JSON.parse(text) as { error?: { message?: unknown } };
    if (typeof parsed.error?.message === "string") message = parsed.error.message;
  } catch {
    // Not JSON: judge the text itself.
  }
  // Only the transports' own words: a tool's domain error that mentions a "session" (a browser
  // session expired, a session_id argument) is an answer, not a lost connection.
  return LOST_SESSION_PHRASES.some((phrase) => phrase.test(message));
}

/** How streamable-HTTP servers (the SDK's, and those modelled on its examples) say a session is unknown. */
const LOST_SESSION_PHRASES = [
  /no valid session id/i,
  /session not found/i,
  /mcp-session-id header is required/i,
  /server not initiali[sz]ed/i,
  /invalid or missing session id/i,
];

/**
 * An event-stream body as the web stream the SDK parses, each event capped at `max` bytes as it
 * flows: over the cap, the stream errors and the connection is dropped. `onEnd` runs once, when
 * the body ends, breaks or is cancelled.
 */
function cappedEventStream(
  body: Readable,
  max: number,
  onEnd: (error: Error | null) => void,
): ReadableStream<Uint8Array> {
  const over = eventSizeCounter(max);
  return webStreamOf(body, { check: (chunk) => (over(chunk) ? tooLarge("an event", max) : null), onEnd });
}

/**
 * A whole response body, at most `max` bytes: over it, the body is dropped and the read fails
 * with {@link FrameTooLargeError}. `onEnd` runs once, when the body has ended or failed.
 */
function readCapped(body: Readable, max: number, onEnd: (error: Error | null) => void): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let ended = false;
    const fail = (error: Error) => {
      if (ended) return;
      ended = true;
      onEnd(error);
      reject(error);
    };
    body.on("data", (chunk: Buffer) => {
      size += chunk.byteLength;
      if (size > max) {
        discard(body);
        fail(tooLarge("a response", max));
        return;
      }
      chunks.push(chunk);
    });
    body.once("end", () => {
      if (ended) return;
      ended = true;
      onEnd(null);
      resolve(chunks.length === 1 && chunks[0] ? chunks[0] : Buffer.concat(chunks, size));
    });
    body.once("error", fail);
  });
}

export interface HttpTransportOptions {
  url: URL;
  kind: "http" | "sse";
  headers: Record<string, string>;
  /** The server's guarded requests (server/net/guarded-fetch.ts). */
  send: GuardedRequest;
  maxFrameBytes: number;
  /** A message over the cap: the connection is no longer trustworthy. */
  onFatal(error: Error): void;
  /**
   * The bearer source of an OAuth server (asked before every request, and once on a 401); none
   * for a server without OAuth. A 403 `insufficient_scope` then fails the request (the SDK's
   * `InsufficientScopeError`) rather than starting a sign-in here: only an owner signs in.
   */
  authProvider?: AuthProvider;
  /** The server answered 401 or 403 with a Bearer challenge (`WWW-Authenticate`). */
  onChallenge?(status: 401 | 403, challenge: AuthChallenge & { error: string | null }): void;
}

/**
 * The SDK's HTTP transports (streamable HTTP, or legacy HTTP+SSE) behind guards the SDK lacks
 * for untrusted servers: every response body and every SSE event is capped at `maxFrameBytes`
 * as it streams, and a request whose response stream ends or breaks before its answer is
 * failed at once instead of waiting for its timeout. For streamable HTTP, an answer saying our
 * session is gone fails that request with {@link SessionLostError} (the SDK would report it as
 * an ordinary HTTP error and keep using the dead session).
 */
export class GuardedHttpTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;

  private readonly inner: Transport;
  private readonly outstanding = new Set<RequestId>();
  private closed = false;
  /** A GET event stream of this session was opened: a later refusal of it means the session is gone. */
  private eventStreamSeen = false;

  constructor(opts: HttpTransportOptions) {
    const guardedFetch: FetchLike = async (url, init) => {
      const { ids, methods, traceparent } =
        init?.method === "POST" ? requestsOf(init.body) : { ids: [], methods: [], traceparent: null };
      // A listen stream's end is the SDK's to see (it closes the subscription on its own), so
      // no answer is made up for it: one would arrive for an id the SDK has already let go.
      // Nor for the era probe: a made-up error would read as a 2025 server's answer to it, and
      // turn a broken stream (worth a retry) into a 2025 handshake a 2026-07-28 server refuses.
      const answerable = ids.filter((_, i) => methods[i] !== LISTEN_METHOD && methods[i] !== DISCOVER_METHOD);
      // The trace of the call this request makes goes on to the server as a header too (only
      // while traces are sent: only then does a call carry one).
      const res = await opts.send(url, traceparent ? withTraceparent(init, traceparent) : init);
      if (res.status === 401 || res.status === 403) {
        const challenge = readChallenge(res.headers.get("www-authenticate"));
        if (challenge) opts.onChallenge?.(res.status, challenge);
      }
      const answerInit = { status: res.status, statusText: res.statusText, headers: res.headers };
      if (opts.kind === "http") {
        const refusal = await this.checkSession(init, res, methods);
        if (refusal) return refusal;
      }
      if (NULL_BODY_STATUSES.has(res.status)) {
        res.body.resume();
        return new Response(null, answerInit);
      }
      // Only an accepted POST's stream carries its answers: a refusal (a 401 the SDK answers by
      // renewing the token and sending the request again, any error status the SDK reports
      // itself) must not have an answer made up for it while the request is still on its way.
      const carriesAnswers = res.status >= 200 && res.status < 300 && answerable.length > 0;
      const onEnd = (error: Error | null) => {
        if (error instanceof FrameTooLargeError) opts.onFatal(error);
        if (carriesAnswers) this.settle(answerable, error);
      };
      if ((res.headers.get("content-type") ?? "").includes("text/event-stream")) {
        // The answers to our own requests are read here as they come and handed to the client,
        // which is told the POST was accepted (202) and reads nothing more. A listen stream and
        // the era probe stay the SDK's: it follows their end itself.
        if (opts.kind === "http" && carriesAnswers && answerable.length === ids.length) {
          readEventStream(res.body, opts.maxFrameBytes, (event) => this.receiveEvent(event), onEnd);
          return new Response(null, { status: 202, statusText: "Accepted", headers: res.headers });
        }
        return new Response(cappedEventStream(res.body, opts.maxFrameBytes, onEnd), answerInit);
      }
      // Any other body (a JSON answer, an error page) is read whole first.
      const whole = await readCapped(res.body, opts.maxFrameBytes, onEnd);
      return new Response(whole as Uint8Array<ArrayBuffer>, answerInit);
    };
    const requestInit = { headers: opts.headers };
    const auth = opts.authProvider ? { authProvider: opts.authProvider } : {};
    this.inner =
      opts.kind === "sse"
        ? new SSEClientTransport(opts.url, { fetch: guardedFetch, requestInit, ...auth })
        : new StreamableHTTPClientTransport(opts.url, {
            fetch: guardedFetch,
            requestInit,
            reconnectionOptions: EVENT_STREAM_REOPEN,
            onInsufficientScope: "throw",
            ...auth,
          });
    this.inner.onmessage = (message) => this.receive(message);
    this.inner.onerror = (error) => this.onerror?.(error);
    this.inner.onclose = () => {
      this.closed = true;
      this.onclose?.();
    };
  }

  private receive(message: JSONRPCMessage): void {
    if ("id" in message && message.id !== undefined && ("result" in message || "error" in message)) {
      this.outstanding.delete(message.id);
    }
    this.onmessage?.(message);
  }

  /** One event of a stream read here: a `message` event's data is one JSON-RPC message, as the SDK reads it. */
  private receiveEvent(event: { event: string; data: string }): void {
    if (event.event !== "message") return;
    let message: JSONRPCMessage;
    try {
      message = parseJSONRPCMessage(JSON.parse(event.data));
    } catch (error) {
      this.onerror?.(error instanceof Error ? error : new Error(String(error)));
      return;
    }
    this.receive(message);
  }

  /**
   * Throws {@link SessionLostError} when the server answers a request that carried our
   * `Mcp-Session-Id` as one whose session is gone: 404 (the transport spec's word for it), or a
   * 400 that names the session. A 400 that does not is answered with what was read of it; any
   * other answer is left to the caller (null).
   */
  private async checkSession(
    init: RequestInit | undefined,
    res: GuardedAnswer,
    methods: string[],
  ): Promise<Response | null> {
    const method = (init?.method ?? "GET").toUpperCase();
    const sent = new Headers(init?.headers).has("mcp-session-id");
    if (method === "GET" && res.status >= 200 && res.status < 300 && sent) this.eventStreamSeen = true;
    if (!sent || (res.status !== 404 && res.status !== 400)) return null;
    if (method !== "POST" && method !== "GET") return null;
    // A GET refused from the start only says the server offers no event stream (some answer 404
    // rather than 405); refused after a stream of this session was open, the session is gone.
    if (method === "GET" && !this.eventStreamSeen) return null;
    if (res.status === 400) {
      const text = await peekText(res.body, REFUSAL_PEEK_BYTES);
      if (!namesLostSession(text)) {
        const headers = new Headers(res.headers);
        headers.delete("content-length");
        return new Response(text, { status: res.status, statusText: res.statusText, headers });
      }
    } else {
      discard(res.body);
    }
    throw new SessionLostError(methods, res.status);
  }

  /** After a response body for `ids` ended, fail those the server left unanswered. */
  private settle(ids: RequestId[], error: Error | null): void {
    const timer = setTimeout(() => {
      for (const id of ids) {
        if (!this.outstanding.delete(id) || this.closed) continue;
        const why = error ? `broke (${error.message})` : "ended";
        this.onmessage?.({
          jsonrpc: "2.0",
          id,
          error: {
            code: STREAM_ENDED_CODE,
            message: `the server's response stream ${why} before it answered`,
          },
        });
      }
    }, SETTLE_MS);
    timer.unref();
  }

  get sessionId(): string | undefined {
    return this.inner.sessionId;
  }

  /**
   * The SDK's streamable-HTTP transport gives each request its own response stream: on a
   * 2026-07-28 connection the SDK then cancels a request by aborting that stream (which this
   * transport's caps still cover), where it would otherwise send `notifications/cancelled`.
   */
  get hasPerRequestStream(): boolean {
    return this.inner.hasPerRequestStream === true;
  }

  setProtocolVersion(version: string): void {
    this.inner.setProtocolVersion?.(version);
  }

  start(): Promise<void> {
    return this.inner.start();
  }

  async send(message: JSONRPCMessage, options?: TransportSendOptions): Promise<void> {
    const isRequest = "method" in message && "id" in message;
    if (isRequest) this.outstanding.add(message.id);
    try {
      await this.inner.send(message, options);
    } catch (err) {
      if (isRequest) this.outstanding.delete(message.id);
      throw err;
    }
  }

  /** Closes once: a second close (the client's, then the supervisor's own) does nothing. */
  close(): Promise<void> {
    if (this.closed) return Promise.resolve();
    this.closed = true;
    return this.inner.close();
  }
}

/** `init` with a W3C `traceparent` header added. */
function withTraceparent(init: RequestInit | undefined, traceparent: string): RequestInit {
  const headers = new Headers(init?.headers);
  headers.set("traceparent", traceparent);
  return { ...init, headers };
}
