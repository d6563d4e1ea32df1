import "server-only";
import { randomUUID } from "node:crypto";
import type { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { readRequestBody } from "@modelcontextprotocol/sdk/server/requestBody.js";
import { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js";
import { isInitializeRequest } from "@modelcontextprotocol/sdk/types.js";
import { eq } from "drizzle-orm";
import type { CallBroker } from "../calls/broker";
import { listEnabledTools } from "../catalogue/catalogue";
import type { GatehouseConfig } from "../config";
import type { EventBus } from "../events";
import { MAX_REQUEST_BODY_BYTES } from "../http/node-bridge";
import type { Logger } from "../log";
import type { McpManager } from "../mcp/manager";
import type { Db } from "../store/db";
import { agentTokens } from "../store/schema";
import { type AllowedPeers, allowedPeers, bearerAgent, peerProblem } from "./guard";
import { resourceServers } from "./resources";
import { createAgentServer } from "./server";
import { toolsSignature } from "./tools";

/** A session with no request in flight and no open stream for this long is closed. */
export const SESSION_IDLE_MS = 30 * 60 * 1000;
/** Most sessions one agent token may hold; see {@link AgentMcpEndpoint.makeRoom} for what happens at the cap. */
export const MAX_SESSIONS_PER_TOKEN = 16;
/** Gap between progress notifications while a destructive call is held. */
export const PROGRESS_INTERVAL_MS = 5000;
/** Bursts of catalogue events (a refresh, a bulk enable) become one `list_changed`. */
export const LIST_CHANGED_DEBOUNCE_MS = 250;
/**
 * A request that expects only its response gets it as JSON when it is ready within this long;
 * one that takes longer (a call held for a reviewer) keeps its event stream, whose headers and
 * keep-alive comments tell proxies and clients the request is alive.
 */
export const JSON_ANSWER_WINDOW_MS = 1000;

export interface AgentMcpDeps {
  db: Db;
  bus: EventBus;
  broker: CallBroker;
  manager: McpManager;
  config: GatehouseConfig;
  log: Logger;
  /** `GATEHOUSE_PUBLIC_ORIGIN`, when Gatehouse is reached through a proxy. */
  publicOrigin?: string;
}

export interface AgentMcpOptions {
  idleMs?: number;
  maxSessionsPerToken?: number;
  progressIntervalMs?: number;
  listChangedDebounceMs?: number;
  /** How long an answer may take and still go out as JSON; default {@link JSON_ANSWER_WINDOW_MS}. */
  jsonAnswerWindowMs?: number;
  /** `HOST` and `PORT` for the default Host/Origin allow-list; default `process.env`. */
  env?: { HOST?: string; PORT?: string };
}

interface Session {
  id: string;
  tokenId: number;
  tokenName: string;
  server: Server;
  transport: WebStandardStreamableHTTPServerTransport;
  lastActive: number;
  /** Requests in flight plus open response streams (the GET stream of a listening client counts). */
  open: number;
  /** `tools/call` requests held for a decision. */
  holding: number;
  /** Set before the SDK aborts in-flight handlers on any teardown (see `open`). */
  closing: boolean;
  /** `server.close()` was called. */
  closed: boolean;
}

/** A JSON-RPC error response, as the SDK's transport writes its own. */
function rpcError(status: number, code: number, message: string, headers?: Record<string, string>): Response {
  return Response.json(
    { jsonrpc: "2.0", error: { code, message }, id: null },
    { status, headers: { "Cache-Control": "no-store", ...headers } },
  );
}

/** A POST body as parsed JSON, or the JSON-RPC error answering a body too large or not JSON. */
async function readMessage(req: Request): Promise<{ parsed: unknown } | Response> {
  const body = await readRequestBody(req, MAX_REQUEST_BODY_BYTES);
  if (body.tooLarge) {
    return rpcError(413, -32000, `Payload Too Large: at most ${MAX_REQUEST_BODY_BYTES} bytes`);
  }
  try {
    return { parsed: JSON.parse(body.text) as unknown };
  } catch {
    return rpcError(400, -32700, "Parse error: Invalid JSON");
  }
}

/**
 * The `/mcp` endpoint: Gatehouse as an MCP server over streamable HTTP for agents with a bearer
 * token. Each `initialize` opens a stateful session (an SDK `Server` and its
 * `WebStandardStreamableHTTPServerTransport`) kept in memory; sessions belong to the token that
 * opened them, end on DELETE, after {@link SESSION_IDLE_MS} idle, when their token is revoked,
 * or on shutdown. A restart drops them; pending calls live in the store and stay pending.
 */
export class AgentMcpEndpoint {
  private readonly sessions = new Map<string, Session>();
  private readonly allowed: AllowedPeers;
  private readonly idleMs: number;
  private readonly maxSessionsPerToken: number;
  private readonly progressIntervalMs: number;
  private readonly debounceMs: number;
  private readonly jsonWindowMs: number;
  private readonly unsubscribe: () => void;
  private readonly sweepTimer: NodeJS.Timeout;
  private debounceTimer: NodeJS.Timeout | null = null;
  private toolsSeen: string;
  private serversSeen: string;
  private closed = false;

  constructor(
    private readonly deps: AgentMcpDeps,
    options: AgentMcpOptions = {},
  ) {
    const env = options.env ?? process.env;
    this.allowed = allowedPeers({
      host: env.HOST,
      port: env.PORT,
      publicOrigin: deps.publicOrigin,
      extraHosts: deps.config.agentEndpoint?.allowedHosts,
      extraOrigins: deps.config.agentEndpoint?.allowedOrigins,
    });
    this.idleMs = options.idleMs ?? SESSION_IDLE_MS;
    this.maxSessionsPerToken = options.maxSessionsPerToken ?? MAX_SESSIONS_PER_TOKEN;
    this.progressIntervalMs = options.progressIntervalMs ?? PROGRESS_INTERVAL_MS;
    this.debounceMs = options.listChangedDebounceMs ?? LIST_CHANGED_DEBOUNCE_MS;
    this.jsonWindowMs = options.jsonAnswerWindowMs ?? JSON_ANSWER_WINDOW_MS;
    this.toolsSeen = this.toolsNow();
    this.serversSeen = this.serversNow();
    this.unsubscribe = deps.bus.subscribe((e) => {
      if (e.type === "catalogue") this.scheduleListCheck();
    });
    this.sweepTimer = setInterval(() => this.sweep(), Math.max(10, Math.min(60_000, this.idleMs / 2)));
    this.sweepTimer.unref();
  }

  /** Live sessions, optionally of one token (by name). */
  sessionCount(tokenName?: string): number {
    let n = 0;
    for (const s of this.sessions.values()) if (!tokenName || s.tokenName === tokenName) n++;
    return n;
  }

  /** Handles one request to `/mcp` (GET, POST or DELETE) and returns the SDK transport's response. */
  async handle(req: Request): Promise<Response> {
    if (this.closed) return rpcError(503, -32000, "Gatehouse is stopping");
    // Before authentication: a rebinding page must learn nothing, not even whether a token works.
    const problem = peerProblem(req.headers, this.allowed);
    if (problem) return rpcError(403, -32000, `Forbidden: ${problem}`);
    const agent = bearerAgent(this.deps.db, req.headers);
    if (!agent) {
      const message = req.headers.has("authorization")
        ? "Unauthorized: the bearer token is not valid (unknown or revoked)"
        : "Unauthorized: send an agent token as Authorization: Bearer <token>";
      return rpcError(401, -32001, message, { "WWW-Authenticate": 'Bearer realm="gatehouse"' });
    }

    const sid = req.headers.get("mcp-session-id");
    if (sid !== null) {
      const session = this.sessions.get(sid);
      // Another token's session answers exactly like an unknown one, so ids cannot be probed.
      if (!session || session.tokenId !== agent.id || session.closing) {
        return rpcError(404, -32001, "Session not found");
      }
      if (req.method !== "POST") return this.forward(session, req);
      // Parsed once here: the transport takes it as is, and it tells whether the answer can be JSON.
      const body = await readMessage(req);
      if (body instanceof Response) return body;
      return this.forward(session, req, body.parsed, expectsOnlyItsResponse(body.parsed));
    }
    if (req.method !== "POST") return rpcError(400, -32000, "Bad Request: Mcp-Session-Id header is required");

    const body = await readMessage(req);
    if (body instanceof Response) return body;
    const { parsed } = body;
    const messages: unknown[] = Array.isArray(parsed) ? parsed : [parsed];
    if (!messages.some((m) => isInitializeRequest(m))) {
      return rpcError(400, -32000, "Bad Request: Mcp-Session-Id header is required");
    }
    if (!this.makeRoom(agent.id)) {
      return rpcError(
        429,
        -32000,
        `Too many sessions: this token already has ${this.maxSessionsPerToken}, each holding a call that waits for approval; end one with DELETE /mcp or wait for a decision`,
      );
    }
    const session = await this.open(agent, req);
    const res = await this.forward(session, req, parsed);
    // The transport refused the initialize (e.g. a malformed batch): nothing to keep.
    if (!session.transport.sessionId) void this.closeSession(session, "initialize refused");
    return res;
  }

  /**
   * Makes room for one more session of `tokenId`. At the cap the least recently active session
   * that holds no call is closed (a client that restarts without DELETE never locks itself
   * out); when every session holds a call waiting for approval, the new one is refused instead,
   * so no waiting agent loses its answer.
   */
  private makeRoom(tokenId: number): boolean {
    const mine = [...this.sessions.values()].filter((s) => s.tokenId === tokenId && !s.closing);
    const excess = mine.length - this.maxSessionsPerToken + 1;
    if (excess <= 0) return true;
    const victims = mine
      .filter((s) => s.holding === 0)
      .sort((a, b) => a.lastActive - b.lastActive)
      .slice(0, excess);
    if (victims.length < excess) return false;
    for (const v of victims)
      void this.closeSession(v, `evicted: token reached ${this.maxSessionsPerToken} sessions`);
    return true;
  }

  private async open(agent: { id: number; name: string }, req: Request): Promise<Session> {
    const baseUrl = (this.deps.publicOrigin ?? new URL(req.url).origin).replace(/\/$/, "");
    const transport = new WebStandardStreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => {
        session.id = id;
        this.sessions.set(id, session);
        this.deps.log.info(`agent session opened`, {
          token: agent.name,
          sessions: this.sessionCount(agent.name),
        });
      },
      onsessionclosed: () => {
        session.closing = true;
        this.sessions.delete(session.id);
      },
    });
    const server = createAgentServer({
      db: this.deps.db,
      manager: this.deps.manager,
      log: this.deps.log,
      descriptionMaxChars: this.deps.config.catalogue.descriptionMaxChars,
      call: {
        broker: this.deps.broker,
        bus: this.deps.bus,
        log: this.deps.log,
        requester: { kind: "agent", name: agent.name },
        waitSeconds: this.deps.config.approvals.waitSeconds,
        progressIntervalMs: this.progressIntervalMs,
        baseUrl,
        closing: () => session.closing,
        holding: (delta) => {
          session.holding += delta;
        },
        endStream: (requestId) => transport.closeSSEStream(requestId),
      },
    });
    const session: Session = {
      id: "",
      tokenId: agent.id,
      tokenName: agent.name,
      server,
      transport,
      lastActive: Date.now(),
      open: 0,
      holding: 0,
      closing: false,
      closed: false,
    };
    // Runs before the SDK aborts the session's in-flight handlers, so a held call can tell a
    // teardown (the call stays pending) from the client's cancellation (the call is withdrawn).
    transport.onclose = () => {
      session.closing = true;
      if (this.sessions.get(session.id) === session) this.sessions.delete(session.id);
    };
    server.onerror = (err) => this.deps.log.debug(`agent session ${session.id}: ${err.message}`);
    await server.connect(transport);
    return session;
  }

  /** Passes a request to the session's transport; the session counts as busy until the response ends. */
  /**
   * Hands a request to the session's transport and keeps count of open requests and streams.
   * `json`: the request expects only its response, which then goes out as JSON ({@link asJsonIfQuick}).
   */
  private async forward(
    session: Session,
    req: Request,
    parsedBody?: unknown,
    json = false,
  ): Promise<Response> {
    session.lastActive = Date.now();
    session.open++;
    let res: Response;
    try {
      res = await session.transport.handleRequest(req, parsedBody === undefined ? undefined : { parsedBody });
    } catch (err) {
      session.open--;
      throw err;
    }
    const done = () => {
      session.open--;
      session.lastActive = Date.now();
    };
    if (!res.body) {
      done();
      return res;
    }
    if (json && res.headers.get("content-type")?.startsWith("text/event-stream")) {
      return asJsonIfQuick(res, req.signal, this.jsonWindowMs, done);
    }
    return new Response(tracked(res.body, req.signal, done), {
      status: res.status,
      statusText: res.statusText,
      headers: res.headers,
    });
  }

  private async closeSession(session: Session, why: string): Promise<void> {
    if (this.sessions.get(session.id) === session) this.sessions.delete(session.id);
    if (session.closed) return;
    session.closed = true;
    session.closing = true;
    this.deps.log.info(`agent session closed: ${why}`, { token: session.tokenName });
    try {
      await session.server.close();
    } catch (err) {
      this.deps.log.debug(`agent session ${session.id} did not close cleanly: ${String(err)}`);
    }
  }

  /** Idle sessions and sessions of revoked tokens end; runs on a timer. */
  private sweep(): void {
    const now = Date.now();
    const active = new Map<number, boolean>();
    for (const s of [...this.sessions.values()]) {
      let ok = active.get(s.tokenId);
      if (ok === undefined) {
        const row = this.deps.db
          .select({ revokedAt: agentTokens.revokedAt })
          .from(agentTokens)
          .where(eq(agentTokens.id, s.tokenId))
          .get();
        ok = row !== undefined && row.revokedAt === null;
        active.set(s.tokenId, ok);
      }
      if (!ok) void this.closeSession(s, "its token was revoked");
      else if (s.open === 0 && now - s.lastActive >= this.idleMs) void this.closeSession(s, "idle");
    }
  }

  private toolsNow(): string {
    return toolsSignature(listEnabledTools(this.deps.db));
  }

  private serversNow(): string {
    return resourceServers(this.deps.db).join(",");
  }

  private scheduleListCheck(): void {
    if (this.debounceTimer || this.closed) return;
    this.debounceTimer = setTimeout(() => {
      this.debounceTimer = null;
      this.checkLists();
    }, this.debounceMs);
    this.debounceTimer.unref();
  }

  /** Tells every session when what `tools/list` or `resources/list` would show has changed. */
  private checkLists(): void {
    let tools: string;
    let servers: string;
    try {
      tools = this.toolsNow();
      servers = this.serversNow();
    } catch (err) {
      this.deps.log.error(`agent sessions: catalogue could not be read: ${String(err)}`);
      return;
    }
    const toolsChanged = tools !== this.toolsSeen;
    const serversChanged = servers !== this.serversSeen;
    this.toolsSeen = tools;
    this.serversSeen = servers;
    if (!toolsChanged && !serversChanged) return;
    for (const s of this.sessions.values()) {
      if (s.closing) continue;
      const failed = (err: unknown) =>
        this.deps.log.debug(`agent session ${s.id}: list_changed not sent: ${String(err)}`);
      if (toolsChanged) s.server.sendToolListChanged().catch(failed);
      if (serversChanged) s.server.sendResourceListChanged().catch(failed);
    }
  }

  /** Ends every session (shutdown). Held calls stay pending in the store. */
  async close(): Promise<void> {
    this.closed = true;
    this.unsubscribe();
    clearInterval(this.sweepTimer);
    if (this.debounceTimer) clearTimeout(this.debounceTimer);
    await Promise.all([...this.sessions.values()].map((s) => this.closeSession(s, "Gatehouse is stopping")));
  }
}

/**
 * Whether a POST body is one JSON-RPC request that can hear nothing but its response: the
 * only messages Gatehouse sends about a request before answering it are progress
 * notifications, and those need a progress token.
 */
function expectsOnlyItsResponse(body: unknown): boolean {
  if (typeof body !== "object" || body === null || Array.isArray(body)) return false;
  const m = body as { id?: unknown; method?: unknown; params?: { _meta?: { progressToken?: unknown } } };
  return m.id !== undefined && typeof m.method === "string" && m.params?._meta?.progressToken === undefined;
}

/** Headers of an event stream that a JSON body does not carry. */
const STREAM_ONLY_HEADERS = ["content-type", "cache-control", "connection", "x-accel-buffering"];

/**
 * The SDK's transport answers every request with an event stream, which a client must parse
 * for what is, without a progress token, a single message. The protocol lets the server answer
 * a request with `application/json` instead, which costs both sides less. So when the stream
 * ends within `windowMs` having carried exactly one message, the response, that message goes
 * out as JSON; a stream with anything else goes out as it came. A stream still open after
 * `windowMs` (a call held for a reviewer) goes out as a stream from then on: what arrived, then
 * the rest, keep-alive comments included. `done` is called once the stream is over.
 */
async function asJsonIfQuick(
  res: Response,
  signal: AbortSignal,
  windowMs: number,
  done: () => void,
): Promise<Response> {
  if (!res.body) {
    done();
    return res;
  }
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<"late">((resolve) => {
    timer = setTimeout(() => resolve("late"), windowMs);
  });
  let pending = reader.read();
  const onAbort = () => reader.cancel(signal.reason).catch((err: unknown) => void err);
  if (signal.aborted) onAbort();
  else signal.addEventListener("abort", onAbort, { once: true });
  try {
    for (;;) {
      const next = await Promise.race([pending, late]);
      if (next === "late") {
        signal.removeEventListener("abort", onAbort);
        // The read in flight is the stream's next chunk: the rest starts with it.
        let first: typeof pending | null = pending;
        const rest = new ReadableStream<Uint8Array>({
          start(controller) {
            for (const chunk of chunks) controller.enqueue(chunk);
          },
          async pull(controller) {
            const { value, done: end } = await (first ?? reader.read());
            first = null;
            if (end) controller.close();
            else controller.enqueue(value);
          },
          cancel: (reason) => reader.cancel(reason),
        });
        return new Response(tracked(rest, signal, done), {
          status: res.status,
          statusText: res.statusText,
          headers: res.headers,
        });
      }
      if (next.done) break;
      chunks.push(next.value);
      pending = reader.read();
    }
  } catch {
    // A stream that failed ends here; what arrived is all there is.
  } finally {
    clearTimeout(timer);
  }
  signal.removeEventListener("abort", onAbort);
  done();
  const decoder = new TextDecoder();
  const text = chunks.map((c) => decoder.decode(c, { stream: true })).join("") + decoder.decode();
  const data: string[] = [];
  for (const event of text.split(/\r?\n\r?\n/)) {
    const lines = event.split(/\r?\n/).filter((l) => l.startsWith("data:"));
    if (lines.length > 0) data.push(lines.map((l) => l.slice(5).replace(/^ /, "")).join("\n"));
  }
  const only = data.length === 1 ? parseMessage(data[0] ?? "") : null;
  if (!only || !("result" in only || "error" in only)) {
    return new Response(text, { status: res.status, statusText: res.statusText, headers: res.headers });
  }
  const headers = new Headers(res.headers);
  for (const h of STREAM_ONLY_HEADERS) headers.delete(h);
  headers.set("content-type", "application/json");
  headers.set("cache-control", "no-store");
  return new Response(data[0], { status: res.status, headers });
}

function parseMessage(text: string): Record<string, unknown> | null {
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === "object" && value !== null && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : null;
  } catch {
    return null;
  }
}

/**
 * The same bytes, with `done` called once when the stream ends, fails, is cancelled by the
 * consumer, or the client goes away (`signal`). Cancelling reaches the SDK's stream, which then
 * forgets it.
 */
function tracked(
  body: ReadableStream<Uint8Array>,
  signal: AbortSignal,
  done: () => void,
): ReadableStream<Uint8Array> {
  const reader = body.getReader();
  let finished = false;
  const finish = () => {
    if (finished) return;
    finished = true;
    signal.removeEventListener("abort", onAbort);
    done();
  };
  const onAbort = () => {
    finish();
    // A stream that already ended or failed has nothing left to cancel.
    reader.cancel(signal.reason).catch((err: unknown) => void err);
  };
  if (signal.aborted) queueMicrotask(onAbort);
  else signal.addEventListener("abort", onAbort);
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const { value, done: end } = await reader.read();
        if (end) {
          finish();
          controller.close();
          return;
        }
        controller.enqueue(value);
      } catch (err) {
        finish();
        controller.error(err);
      }
    },
    async cancel(reason) {
      finish();
      await reader.cancel(reason);
    },
  });
}
