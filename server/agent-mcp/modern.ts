import "server-only";
import {
  type AuthInfo,
  createMcpHandler,
  type McpHttpHandler,
  type McpRequestContext,
  type Server,
} from "@modelcontextprotocol/server";
import type { ToolSets } from "../agents";
import type { CallBroker } from "../calls/broker";
import type { EventBus } from "../events";
import type { Logger } from "../log";
import type { McpManager } from "../mcp/manager";
import type { Db } from "../store/db";
import { asJsonIfQuick, tracked } from "./json-answer";
import type { ListedResources } from "./resources";
import { expectsOnlyItsResponse, rpcError } from "./rpc";
import { createAgentServer } from "./server";

/** An agent token the endpoint verified: the bearer's id and name. */
export interface VerifiedAgent {
  id: number;
  name: string;
  /** The token's tool set as of this request; null: every enabled tool. */
  toolSet: string | null;
}

/**
 * How long a shutdown waits for the requests in flight to be answered (a held call: that it is
 * still pending, and where to check it) before it ends their streams unanswered.
 */
export const SHUTDOWN_ANSWER_MS = 1000;

/**
 * Most `subscriptions/listen` streams one agent token keeps open (like its 2025 sessions): a new
 * one past it ends that token's oldest, so one token cannot hold every stream the SDK allows.
 */
export const MAX_LISTEN_STREAMS_PER_TOKEN = 16;

/**
 * One 2026-07-28 exchange while its response lasts: a request in flight, or an open
 * `subscriptions/listen` stream. Gatehouse ends it itself (`stop`) when its token is revoked or
 * Gatehouse stops; `ended` tells a held call that this is not the agent withdrawing it.
 */
interface Exchange {
  agent: VerifiedAgent;
  listen: boolean;
  /** Ends the exchange: its response stream closes, its handler is aborted and sends nothing. */
  stop: AbortController;
  /** Stops holding a call (shutdown): the handler answers with the call as it stands. */
  release: AbortController;
  ended: boolean;
  /** Resolves once the response is over. */
  finished: Promise<void>;
}

export interface ModernLegDeps {
  db: Db;
  bus: EventBus;
  broker: CallBroker;
  manager: McpManager;
  log: Logger;
  /** The endpoint's listings, shared with the 2025 sessions (see ListedResources). */
  listed: ListedResources;
  /** The configured tool sets, which bound what each agent is shown and may call. */
  toolSets?: ToolSets;
  descriptionMaxChars: number;
  waitSeconds: number;
  progressIntervalMs: number;
  /** How long an answer may take and still go out as JSON (see `JSON_ANSWER_WINDOW_MS`). */
  jsonWindowMs: number;
  /** `GATEHOUSE_PUBLIC_ORIGIN`, when Gatehouse is reached through a proxy. */
  publicOrigin?: string;
}

/** The `AuthInfo.extra` key under which the factory finds the exchange its server serves. */
const EXCHANGE_KEY = "gatehouse/exchange";

/**
 * `/mcp` for 2026-07-28 clients: the SDK's stateless entry (`createMcpHandler`, 2025 traffic
 * refused there, as the endpoint routes it to its sessions first), a fresh per-agent server per
 * request ({@link createAgentServer} for 2026-07-28), and `subscriptions/listen` streams told of list
 * changes through the entry's event bus ({@link ModernLeg.listsChanged}). Between two requests
 * nothing is kept but open listen streams and requests still in flight: a held call lives in
 * the store, so a restarted Gatehouse answers the same client's next request as if nothing
 * happened. What the SDK leaves to Gatehouse: the Host/Origin/bearer checks (the endpoint's,
 * in front of both eras), and ending the streams of a revoked token ({@link ModernLeg.endRevoked}).
 */
export class ModernLeg {
  private readonly handler: McpHttpHandler;
  private readonly open = new Set<Exchange>();
  private stopping = false;

  constructor(private readonly deps: ModernLegDeps) {
    this.handler = createMcpHandler((ctx) => this.serverFor(ctx), {
      legacy: "reject",
      // Every answer starts as an event stream, so a call held for a reviewer has its headers
      // and keep-alive comments out at once, as on the 2025 leg; a quick one-message answer
      // still goes out as JSON (asJsonIfQuick).
      responseMode: "sse",
      onerror: (err) => deps.log.debug(`agent /mcp (2026-07-28): ${err.message}`),
    });
  }

  /**
   * Serves one request that is not a 2025 one (the endpoint decides, by the SDK's own
   * `isLegacyRequest`) for `agent`, whose bearer the endpoint verified. `parsed`: the body, read
   * and bounded by the endpoint; the SDK reads the request's headers and signal only.
   */
  async handle(req: Request, agent: VerifiedAgent, parsed: unknown): Promise<Response> {
    // A request that arrives while Gatehouse stops would start a call whose answer nobody could
    // give (the entry is closing): refused before anything happens, to be sent again.
    if (this.stopping) return rpcError(503, -32000, "Gatehouse is stopping; send the request again shortly");
    const listen = (parsed as { method?: unknown } | null)?.method === "subscriptions/listen";
    let finish: () => void = () => undefined;
    const exchange: Exchange = {
      agent,
      listen,
      stop: new AbortController(),
      release: new AbortController(),
      ended: false,
      finished: new Promise<void>((resolve) => {
        finish = resolve;
      }),
    };
    if (listen) this.makeRoomFor(agent);
    const signal = AbortSignal.any([req.signal, exchange.stop.signal]);
    const inner = new Request(req.url, { method: req.method, headers: req.headers, signal });
    this.open.add(exchange);
    const done = () => {
      this.open.delete(exchange);
      finish();
    };
    let res: Response;
    try {
      res = await this.handler.fetch(inner, { authInfo: authInfoOf(exchange), parsedBody: parsed });
    } catch (err) {
      done();
      throw err;
    }
    if (!res.body) {
      done();
      return res;
    }
    if (!listen && expectsOnlyItsResponse(parsed) && isEventStream(res)) {
      return asJsonIfQuick(res, signal, this.deps.jsonWindowMs, done);
    }
    return new Response(tracked(res.body, signal, done), {
      status: res.status,
      statusText: res.statusText,
      headers: res.headers,
    });
  }

  /** Open `subscriptions/listen` streams. */
  listenCount(): number {
    let n = 0;
    for (const e of this.open) if (e.listen) n++;
    return n;
  }

  /** Tells every open listen stream that asked for them which lists changed. */
  listsChanged(changed: { tools: boolean; servers: boolean }): void {
    if (changed.tools) this.handler.notify.toolsChanged();
    if (changed.servers) {
      // Resources and prompts both come from the servers with an enabled tool.
      this.handler.notify.resourcesChanged();
      this.handler.notify.promptsChanged();
    }
  }

  /** Whether token `name` has an exchange open now (a listen stream, a request in flight). */
  hasExchangesOf(name: string): boolean {
    for (const e of this.open) if (e.agent.name === name) return true;
    return false;
  }

  /** The tokens of the exchanges open now. */
  tokenIds(): number[] {
    return [...this.open].map((e) => e.agent.id);
  }

  /**
   * Ends every exchange of a token `active` says is no longer valid: its listen streams close
   * (the SDK never looks at a token again once a stream is open) and its requests in flight end
   * unanswered, as its 2025 sessions do; a held call stays as revocation left it.
   */
  endRevoked(active: (tokenId: number) => boolean): void {
    for (const e of [...this.open]) {
      if (!active(e.agent.id)) this.end(e, "its token was revoked");
    }
  }

  /**
   * Shutdown. Held calls stay pending, and their requests are answered so (with where to check
   * them later) within {@link SHUTDOWN_ANSWER_MS}, as any other request in flight may be; then
   * listen streams get the graceful end the spec gives them (the client may listen again, at the
   * next Gatehouse), and whatever is still unanswered ends without an answer.
   */
  async close(): Promise<void> {
    // First, so a held call that stops waiting is not taken for the agent withdrawing it.
    this.stopping = true;
    const answering = [...this.open].filter((e) => !e.listen);
    for (const e of this.open) e.ended = true;
    for (const e of answering) e.release.abort();
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      Promise.all(answering.map((e) => e.finished)),
      new Promise<void>((resolve) => {
        timer = setTimeout(resolve, SHUTDOWN_ANSWER_MS);
      }),
    ]);
    clearTimeout(timer);
    await this.handler.close();
    for (const e of [...this.open]) this.end(e, "Gatehouse is stopping");
  }

  /** Ends the oldest listen streams of `agent`'s token until one more fits under the cap. */
  private makeRoomFor(agent: VerifiedAgent): void {
    const streams = [...this.open].filter((e) => e.listen && e.agent.id === agent.id);
    const excess = streams.length - (MAX_LISTEN_STREAMS_PER_TOKEN - 1);
    // A Set iterates in insertion order: the first are the oldest.
    for (const e of streams.slice(0, Math.max(0, excess)))
      this.end(e, "its token opened a newer listen stream");
  }

  private end(e: Exchange, why: string): void {
    this.open.delete(e);
    if (e.stop.signal.aborted) return;
    e.ended = true;
    this.deps.log.debug(`agent /mcp (2026-07-28) exchange ended: ${why}`, { token: e.agent.name });
    e.stop.abort();
  }

  /** The factory: one request's server, for the agent the endpoint verified. */
  private serverFor(ctx: McpRequestContext): Server {
    const exchange = ctx.authInfo?.extra?.[EXCHANGE_KEY] as Exchange | undefined;
    // Only `handle` calls the entry, always with the exchange: anything else is a bug here.
    if (!exchange) throw new Error("a 2026-07-28 request reached its server without a verified agent");
    const { deps } = this;
    const origin = deps.publicOrigin ?? (ctx.requestInfo ? new URL(ctx.requestInfo.url).origin : "");
    return createAgentServer(
      {
        db: deps.db,
        manager: deps.manager,
        log: deps.log,
        descriptionMaxChars: deps.descriptionMaxChars,
        bus: deps.bus,
        listed: deps.listed,
        ...(deps.toolSets ? { toolSets: deps.toolSets } : {}),
        call: {
          broker: deps.broker,
          bus: deps.bus,
          log: deps.log,
          requester: { kind: "agent", name: exchange.agent.name, toolSet: exchange.agent.toolSet },
          waitSeconds: deps.waitSeconds,
          progressIntervalMs: deps.progressIntervalMs,
          baseUrl: origin.replace(/\/$/, ""),
          closing: () => this.stopping || exchange.ended,
          // No session to keep alive or to evict: the exchange is the request itself.
          holding: () => undefined,
          // The SDK ends a cancelled request's exchange itself (its stream is the request's own).
          endStream: () => undefined,
          // Shutdown: the held call is answered as it stands (see close()).
          release: exchange.release.signal,
        },
      },
      "2026-07-28",
    );
  }
}

/**
 * What the handler passes to the factory and to every handler as `authInfo`: the verified
 * agent (`clientId` is the token's name), never its secret, and the exchange it belongs to.
 */
function authInfoOf(exchange: Exchange): AuthInfo {
  return {
    token: exchange.agent.name,
    clientId: exchange.agent.name,
    scopes: [],
    extra: { tokenId: exchange.agent.id, [EXCHANGE_KEY]: exchange },
  };
}

function isEventStream(res: Response): boolean {
  return res.headers.get("content-type")?.startsWith("text/event-stream") ?? false;
}
