import "server-only";
import {
  type AuthProvider,
  type FetchLike,
  type JSONRPCMessage,
  type RequestId,
  SSEClientTransport,
  StreamableHTTPClientTransport,
  type Transport,
  type TransportSendOptions,
} from "@modelcontextprotocol/client";
import { SessionLostError, STREAM_ENDED_CODE } from "./failures";
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

export class FrameTooLargeError extends Error {
  readonly code = "GATEHOUSE_FRAME_TOO_LARGE";
}

/** The 2026-07-28 request that opens a stream of notifications rather than asking for one answer. */
const LISTEN_METHOD = "subscriptions/listen";
/** The 2026-07-28 era probe. */
const DISCOVER_METHOD = "server/discover";

/** The requests (not notifications or responses) of a JSON-RPC POST body: ids and methods, in step. */
function requestsOf(body: unknown): { ids: RequestId[]; methods: string[] } {
  const ids: RequestId[] = [];
  const methods: string[] = [];
  if (typeof body !== "string") return { ids, methods };
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    return { ids, methods };
  }
  const messages = Array.isArray(parsed) ? parsed : [parsed];
  for (const m of messages) {
    if (m && typeof m === "object" && "method" in m && "id" in m) {
      const { id, method } = m as { id: unknown; method: unknown };
      if ((typeof id === "string" || typeof id === "number") && typeof method === "string") {
        ids.push(id);
        methods.push(method);
      }
    }
  }
  return { ids, methods };
}

/** Most of a 400 answer read to see whether it names the session; such answers are short. */
const REFUSAL_PEEK_BYTES = 4096;

/** The first `max` bytes of a body as text; the rest is cancelled, never read. */
async function peekText(body: ReadableStream<Uint8Array>, max: number): Promise<string> {
  const reader = body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    while (size < max) {
      const { value, done } = await reader.read();
      if (done) break;
      chunks.push(value);
      size += value.byteLength;
    }
  } finally {
    await reader.cancel().catch(() => undefined);
  }
  return Buffer.concat(chunks).subarray(0, max).toString("utf8");
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
 * Counts a response body as it flows and errors it once it passes `max` bytes: for an event
 * stream, bytes since the last event boundary (a blank line); otherwise the whole body. The
 * over-long message is never held whole. `onEnd` runs once, when the body ends or breaks.
 */
function limitBody(
  body: ReadableStream<Uint8Array>,
  max: number,
  eventStream: boolean,
  onEnd: (error: Error | null) => void,
): ReadableStream<Uint8Array> {
  let count = 0;
  let lineEmpty = true;
  let ended = false;
  const end = (error: Error | null) => {
    if (ended) return;
    ended = true;
    onEnd(error);
  };
  const limiter = new TransformStream<Uint8Array, Uint8Array>({
    transform(chunk, controller) {
      if (!eventStream) {
        count += chunk.byteLength;
      } else {
        let pos = 0;
        for (;;) {
          const nl = chunk.indexOf(10, pos);
          if (nl === -1) {
            const rest = chunk.byteLength - pos;
            if (rest > 1 || (rest === 1 && chunk[pos] !== 13)) lineEmpty = false;
            count += rest;
            break;
          }
          const len = nl - pos;
          const content = len > 0 && chunk[nl - 1] === 13 ? len - 1 : len;
          count = lineEmpty && content === 0 ? 0 : count + len + 1;
          lineEmpty = true;
          pos = nl + 1;
        }
      }
      if (count > max) {
        const what = eventStream ? "an event" : "a response";
        const error = new FrameTooLargeError(`server sent ${what} larger than maxFrameBytes (${max} bytes)`);
        end(error);
        controller.error(error);
        return;
      }
      controller.enqueue(chunk);
    },
    flush() {
      end(null);
    },
  });
  const piped = body.pipeThrough(limiter);
  // A body that breaks (network error, server reset) never reaches flush.
  const reader = piped.getReader();
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const { value, done } = await reader.read();
        if (done) controller.close();
        else controller.enqueue(value);
      } catch (err) {
        const error = err instanceof Error ? err : new Error(String(err));
        end(error);
        controller.error(error);
      }
    },
    cancel(reason) {
      end(null);
      return reader.cancel(reason);
    },
  });
}

export interface HttpTransportOptions {
  url: URL;
  kind: "http" | "sse";
  headers: Record<string, string>;
  fetch: FetchLike;
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
      const { ids, methods } = init?.method === "POST" ? requestsOf(init.body) : { ids: [], methods: [] };
      // A listen stream's end is the SDK's to see (it closes the subscription on its own), so
      // no answer is made up for it: one would arrive for an id the SDK has already let go.
      // Nor for the era probe: a made-up error would read as a 2025 server's answer to it, and
      // turn a broken stream (worth a retry) into a 2025 handshake a 2026-07-28 server refuses.
      const answerable = ids.filter((_, i) => methods[i] !== LISTEN_METHOD && methods[i] !== DISCOVER_METHOD);
      let res = await opts.fetch(url, init);
      if (res.status === 401 || res.status === 403) {
        const challenge = readChallenge(res.headers.get("www-authenticate"));
        if (challenge) opts.onChallenge?.(res.status, challenge);
      }
      if (opts.kind === "http") res = await this.checkSession(init, res, methods);
      if (!res.body || res.status === 204 || res.status === 304) return res;
      const type = res.headers.get("content-type") ?? "";
      // Only an accepted POST's stream carries its answers: a refusal (a 401 the SDK answers by
      // renewing the token and sending the request again, any error status the SDK reports
      // itself) must not have an answer made up for it while the request is still on its way.
      const carriesAnswers = res.ok && answerable.length > 0;
      const body = limitBody(res.body, opts.maxFrameBytes, type.includes("text/event-stream"), (error) => {
        if (error instanceof FrameTooLargeError) opts.onFatal(error);
        if (carriesAnswers) this.settle(answerable, error);
      });
      return new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers });
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
    this.inner.onmessage = (message) => {
      if ("id" in message && message.id !== undefined && ("result" in message || "error" in message)) {
        this.outstanding.delete(message.id);
      }
      this.onmessage?.(message);
    };
    this.inner.onerror = (error) => this.onerror?.(error);
    this.inner.onclose = () => {
      this.closed = true;
      this.onclose?.();
    };
  }

  /**
   * Throws {@link SessionLostError} when the server answers a request that carried our
   * `Mcp-Session-Id` as one whose session is gone: 404 (the transport spec's word for it), or a
   * 400 that names the session. Otherwise returns the response (rebuilt when its body was read).
   */
  private async checkSession(
    init: RequestInit | undefined,
    res: Response,
    methods: string[],
  ): Promise<Response> {
    const method = (init?.method ?? "GET").toUpperCase();
    const sent = new Headers(init?.headers).has("mcp-session-id");
    if (method === "GET" && res.ok && sent) this.eventStreamSeen = true;
    if (!sent || (res.status !== 404 && res.status !== 400)) return res;
    if (method !== "POST" && method !== "GET") return res;
    // A GET refused from the start only says the server offers no event stream (some answer 404
    // rather than 405); refused after a stream of this session was open, the session is gone.
    if (method === "GET" && !this.eventStreamSeen) return res;
    if (res.status === 400) {
      const text = res.body ? await peekText(res.body, REFUSAL_PEEK_BYTES) : "";
      if (!namesLostSession(text)) {
        const headers = new Headers(res.headers);
        headers.delete("content-length");
        return new Response(text, { status: res.status, statusText: res.statusText, headers });
      }
    } else {
      await res.body?.cancel();
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

  close(): Promise<void> {
    this.closed = true;
    return this.inner.close();
  }
}
