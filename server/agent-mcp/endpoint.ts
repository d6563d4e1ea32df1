import "server-only";
import { isInitializeRequest, isJSONRPCRequest, isLegacyRequest } from "@modelcontextprotocol/server";
import { inArray } from "drizzle-orm";
import { ToolSets } from "../agents";
import type { Principal } from "../auth/access";
import type { CallBroker } from "../calls/broker";
import type { GatehouseConfig } from "../config";
import type { EventBus } from "../events";
import type { Logger } from "../log";
import type { McpManager } from "../mcp/manager";
import type { Db } from "../store/db";
import { agentTokens } from "../store/schema";
import { type AllowedPeers, agentOf, allowedPeersFor, bearerAgent, peerProblem } from "./guard";
import { asJsonIfQuick, tracked } from "./json-answer";
import { ListWatch } from "./list-watch";
import { ModernLeg, SHUTDOWN_ANSWER_MS, type VerifiedAgent } from "./modern";
import { ListedResources } from "./resources";
import { expectsOnlyItsResponse, readMessage, rpcError, tooManySessions } from "./rpc";
import { createSession, type SessionParts } from "./session-factory";
import { answerInFlight, answering, isBusy, type Session, SessionTable } from "./sessions";
import { clientOf, restoreInitialized, StoredSessions } from "./stored-sessions";

/**
 * A session nobody uses (no request in flight, no open stream, no held call) for this long is
 * closed; its stored row goes once no replica used it for this long.
 */
export const SESSION_IDLE_MS = 30 * 60 * 1000;
/**
 * Most sessions one agent token may hold in one process (each replica counts its own); see
 * {@link SessionTable.evictionFor} for who makes room at the cap, and when a new session is
 * refused instead.
 */
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
  /** The runtime's tool sets; default: those of `config`. */
  toolSets?: ToolSets;
  log: Logger;
  /** `GATEHOUSE_PUBLIC_ORIGIN`, when Gatehouse is reached through a proxy. */
  publicOrigin?: string;
}

export interface AgentMcpOptions {
  idleMs?: number;
  maxSessionsPerToken?: number;
  /** Most stored sessions one token keeps; default `MAX_STORED_SESSIONS_PER_TOKEN`. */
  maxStoredSessionsPerToken?: number;
  progressIntervalMs?: number;
  listChangedDebounceMs?: number;
  /** How long an answer may take and still go out as JSON; default {@link JSON_ANSWER_WINDOW_MS}. */
  jsonAnswerWindowMs?: number;
  /** `HOST` and `PORT` for the default Host/Origin allow-list; default `process.env`. */
  env?: { HOST?: string; PORT?: string };
}

/**
 * The `/mcp` endpoint: Gatehouse as an MCP server over streamable HTTP for agents with a bearer
 * token, in both protocol eras behind one front door (Host/Origin, then the bearer).
 *
 * 2025: each `initialize` opens a stateful session (an SDK v2 `Server` from the same factory as
 * the 2026-07-28 leg's, and the SDK's streamable-HTTP session transport, {@link SessionTransport})
 * held in memory and stored ({@link StoredSessions}): a session not held here (Gatehouse
 * restarted, or another replica opened it) is brought back from its row when it is used.
 * Sessions belong to the token that opened them and end on DELETE, after {@link SESSION_IDLE_MS}
 * idle, or when their token is revoked; shutdown only lets go of them (pending calls live in the
 * store and stay pending, a held one's request answered so first).
 *
 * 2026-07-28: a request with no session id that is not a 2025 one (the SDK's `isLegacyRequest`:
 * it carries the per-request envelope) goes to the stateless {@link ModernLeg}, which a restart
 * between two requests does not disturb.
 */
export class AgentMcpEndpoint {
  private readonly sessions = new SessionTable();
  private readonly stored: StoredSessions;
  /** What each 2025 session is built with ({@link createSession}). */
  private readonly parts: SessionParts;
  /** What each server listed last, shared by every session (see ListedResources). */
  private readonly listedResources: ListedResources;
  private readonly allowed: AllowedPeers;
  private readonly idleMs: number;
  private readonly maxSessionsPerToken: number;
  private readonly progressIntervalMs: number;
  private readonly jsonWindowMs: number;
  private readonly modern: ModernLeg;
  /** 2025 sessions' GET streams open now (and GET requests on their way to being one). */
  private getStreams = 0;
  private readonly unsubscribe: () => void;
  private readonly sweepTimer: NodeJS.Timeout;
  private readonly lists: ListWatch;
  private closed = false;

  constructor(
    private readonly deps: AgentMcpDeps,
    options: AgentMcpOptions = {},
  ) {
    const env = options.env ?? process.env;
    this.allowed = allowedPeersFor(env, deps.publicOrigin, deps.config.agentEndpoint);
    this.idleMs = options.idleMs ?? SESSION_IDLE_MS;
    this.maxSessionsPerToken = options.maxSessionsPerToken ?? MAX_SESSIONS_PER_TOKEN;
    this.progressIntervalMs = options.progressIntervalMs ?? PROGRESS_INTERVAL_MS;
    this.jsonWindowMs = options.jsonAnswerWindowMs ?? JSON_ANSWER_WINDOW_MS;
    this.listedResources = ListedResources.forStore(deps.db, deps.log);
    this.stored = new StoredSessions(deps.db, this.idleMs, deps.log, options.maxStoredSessionsPerToken);
    const shared = {
      db: deps.db,
      bus: deps.bus,
      broker: deps.broker,
      manager: deps.manager,
      log: deps.log,
      listed: this.listedResources,
      descriptionMaxChars: deps.config.catalogue.descriptionMaxChars,
      waitSeconds: deps.config.approvals.waitSeconds,
      progressIntervalMs: this.progressIntervalMs,
      publicOrigin: deps.publicOrigin,
      toolSets: deps.toolSets ?? new ToolSets(deps.config.toolSets),
    };
    this.modern = new ModernLeg({ ...shared, jsonWindowMs: this.jsonWindowMs });
    this.parts = { ...shared, sessions: this.sessions, stored: this.stored };
    this.lists = new ListWatch({
      db: deps.db,
      log: deps.log,
      sessions: () => this.sessions.all(),
      modern: this.modern,
      debounceMs: options.listChangedDebounceMs ?? LIST_CHANGED_DEBOUNCE_MS,
    });
    this.unsubscribe = deps.bus.subscribe((e) => {
      if (e.type === "catalogue") this.lists.schedule();
      else if (e.type === "token") this.lists.tokenMoved(e.name);
    });
    this.sweepTimer = setInterval(
      () =>
        void this.sweep().catch((err) =>
          this.deps.log.error(`agent sessions: tokens could not be checked: ${String(err)}`),
        ),
      Math.max(10, Math.min(60_000, this.idleMs / 2)),
    );
    this.sweepTimer.unref();
  }

  /** Resolves once the catalogue changes seen so far have been checked and told to sessions (tests). */
  listsSettled(): Promise<void> {
    return this.lists.settled();
  }

  /** Live sessions, optionally of one token (by name). */
  sessionCount(tokenName?: string): number {
    return this.sessions.count(tokenName);
  }

  /** Open listen streams: 2025 sessions' GET streams and 2026-07-28 `subscriptions/listen` ones. */
  listenStreamCount(): number {
    return this.getStreams + this.modern.listenCount();
  }

  /**
   * Handles one request to `/mcp` (GET, POST or DELETE) and returns the SDK transport's
   * response. `principal`: who the edge found these headers authenticate (only an agent's
   * bearer token counts here); absent, the endpoint reads the bearer token itself.
   */
  async handle(req: Request, principal?: Principal | null): Promise<Response> {
    if (this.closed) return rpcError(503, -32000, "Gatehouse is stopping");
    // Before any word on credentials: a rebinding page must learn nothing, not even whether a token works.
    const problem = peerProblem(req.headers, this.allowed);
    if (problem) return rpcError(403, -32000, `Forbidden: ${problem}`);
    const agent = principal === undefined ? await bearerAgent(this.deps.db, req.headers) : agentOf(principal);
    if (!agent) {
      const message = req.headers.has("authorization")
        ? "Unauthorized: the bearer token is not valid (unknown or revoked)"
        : "Unauthorized: send an agent token as Authorization: Bearer <token>";
      return rpcError(401, -32001, message, { "WWW-Authenticate": 'Bearer realm="gatehouse"' });
    }

    const sid = req.headers.get("mcp-session-id");
    if (sid !== null) {
      const session = await this.sessionFor(sid, agent, req);
      if (session instanceof Response) return session;
      // Another token's session answers exactly like an unknown one, so ids cannot be probed.
      if (!session || session.tokenId !== agent.id || session.closing) {
        return rpcError(404, -32001, "Session not found");
      }
      session.requester.toolSet = agent.toolSet;
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
    if (!(await isLegacyRequest(req, parsed))) return this.modern.handle(req, agent, parsed);
    const messages: unknown[] = Array.isArray(parsed) ? parsed : [parsed];
    const init = messages.find(isInitializeRequest);
    if (!init) return rpcError(400, -32000, "Bad Request: Mcp-Session-Id header is required");
    const session = this.reserve(agent, req);
    if (!session) return tooManySessions(this.maxSessionsPerToken);
    // Stored before the client learns the session's id, which it may take to another replica next.
    if (isJSONRPCRequest(init)) {
      session.transport.beforeAnswer(init.id, (answer) =>
        this.stored.add(session, {
          id: session.id,
          protocolVersion: String(answer.result.protocolVersion),
          client: clientOf(init.params),
        }),
      );
    }
    let res: Response;
    try {
      await session.server.connect(session.transport);
      res = await this.forward(session, req, parsed);
    } catch (err) {
      void this.closeSession(session, "initialize failed");
      throw err;
    } finally {
      // The reservation's own count; the initialize's answer stream is counted by `forward`.
      session.open--;
    }
    // The transport refused the initialize (e.g. a malformed batch): nothing to keep.
    if (!session.transport.sessionId) void this.closeSession(session, "initialize refused");
    return res;
  }

  /**
   * Session `sid` of `agent`: the one held here, else the one brought back from its row (once,
   * however many of its requests come at once), else null (unknown, another token's, revoked or
   * expired). A response: a refusal of the revival (the token's cap, or Gatehouse stopping).
   */
  private async sessionFor(
    sid: string,
    agent: VerifiedAgent,
    req: Request,
  ): Promise<Session | Response | null> {
    const key = `${agent.id} ${sid}`;
    // A session being brought back is in the table before it is ready: its requests wait for it.
    const reviving = this.stored.revivingNow(key) as Promise<Session | Response | null> | undefined;
    if (reviving) return reviving;
    return this.sessions.get(sid) ?? this.stored.once(key, () => this.revive(sid, agent, req));
  }

  private async revive(sid: string, agent: VerifiedAgent, req: Request): Promise<Session | Response | null> {
    const stored = await this.stored.find(sid, agent.id);
    if (!stored) return null;
    if (this.closed) return rpcError(503, -32000, "Gatehouse is stopping");
    const session = this.reserve(agent, req, stored.id);
    if (!session) return tooManySessions(this.maxSessionsPerToken);
    try {
      await session.server.connect(session.transport);
      await restoreInitialized(session.server, session.transport, stored, req.url);
    } catch (err) {
      void this.closeSession(session, "could not be restored");
      throw err;
    } finally {
      session.open--;
    }
    this.deps.log.info("agent session restored", {
      token: agent.name,
      sessions: this.sessionCount(agent.name),
    });
    return session;
  }

  /**
   * Makes room for one more session of `agent` ({@link SessionTable.evictionFor}) and takes it
   * at once: the new session is in the table, busy with its `initialize`, before anything is
   * awaited, so concurrent `initialize` requests each see the ones before them and the cap
   * holds. `null`: no room, and nothing was closed. `restoring`: the id of a stored session.
   */
  private reserve(agent: VerifiedAgent, req: Request, restoring?: string): Session | null {
    const victims = this.sessions.evictionFor(agent.id, this.maxSessionsPerToken);
    if (!victims) return null;
    // Their rows stay: a client still there brings its session back with its next request.
    for (const v of victims)
      void this.closeSession(v, `evicted: token reached ${this.maxSessionsPerToken} sessions`);
    const session = createSession(this.parts, agent, req, restoring);
    this.sessions.add(session);
    return session;
  }

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
    this.sessions.touch(session);
    void this.stored.used(session);
    session.open++;
    // A GET is a listen stream, which no shutdown waits for.
    const listening = req.method === "GET";
    if (listening) this.getStreams++;
    const answered = listening ? () => void this.getStreams-- : answering(session);
    let res: Response;
    try {
      res = await session.transport.handleRequest(req, parsedBody === undefined ? undefined : { parsedBody });
    } catch (err) {
      session.open--;
      answered();
      throw err;
    }
    const done = () => {
      session.open--;
      answered();
      this.sessions.touch(session);
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
    this.sessions.remove(session);
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

  /**
   * Ends now what the timer's sweep would end at its next run: sessions and 2026-07-28 exchanges
   * of revoked tokens (and idle sessions). Called when a token is revoked, so its agent's open
   * streams close at once.
   */
  endRevokedSessions(): Promise<void> {
    return this.sweep();
  }

  /**
   * Idle sessions and sessions of revoked tokens end, and so do the 2026-07-28 exchanges (listen
   * streams, requests in flight) of revoked tokens; then the stored rows of both go
   * ({@link StoredSessions.sweep}). Runs on a timer.
   */
  private async sweep(): Promise<void> {
    const now = Date.now();
    const ids = [...new Set([...this.sessions.all().map((s) => s.tokenId), ...this.modern.tokenIds()])];
    const known = new Map<number, boolean>(ids.map((id) => [id, false]));
    if (ids.length > 0) {
      const rows = await this.deps.db
        .select({ id: agentTokens.id, revokedAt: agentTokens.revokedAt })
        .from(agentTokens)
        .where(inArray(agentTokens.id, ids));
      for (const row of rows) known.set(row.id, row.revokedAt === null);
    }
    // A session or exchange opened while the tokens were read is checked at the next sweep.
    const active = (tokenId: number): boolean => known.get(tokenId) ?? true;
    for (const s of this.sessions.all()) {
      if (!active(s.tokenId)) void this.closeSession(s, "its token was revoked");
      else if (!isBusy(s) && now - s.lastActive >= this.idleMs) void this.closeSession(s, "idle");
    }
    this.modern.endRevoked(active);
    await this.stored.sweep(this.sessions.all().filter((s) => isBusy(s) && !s.closing));
  }

  /**
   * Ends every session and every 2026-07-28 exchange (shutdown). Held calls stay pending in the
   * store, and in both eras their requests are answered so first, with where to follow them
   * ({@link answerInFlight}; bounded by {@link SHUTDOWN_ANSWER_MS}). Stored sessions keep their
   * rows: the next Gatehouse, or another replica, serves them.
   */
  async close(): Promise<void> {
    this.closed = true;
    this.unsubscribe();
    clearInterval(this.sweepTimer);
    const sessions = this.sessions.all();
    const stopping = answerInFlight(sessions, SHUTDOWN_ANSWER_MS).then(() =>
      Promise.all(sessions.map((s) => this.closeSession(s, "Gatehouse is stopping"))),
    );
    await Promise.all([stopping, this.modern.close(), this.lists.close()]);
  }
}
