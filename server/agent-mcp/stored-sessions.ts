import "server-only";
import type {
  ClientCapabilities,
  Implementation,
  InitializeRequestParams,
  Server,
} from "@modelcontextprotocol/server";
import { and, desc, eq, inArray, isNotNull, lt, notInArray, or } from "drizzle-orm";
import type { Logger } from "../log";
import { type Db, first } from "../store/db";
import { agentTokens, mcpSessions } from "../store/schema";
import type { Session, SessionTransport } from "./sessions";

/**
 * Most stored sessions one token keeps: the least recently used beyond it go when another is
 * opened, so an agent opening sessions in a loop (and never ending them) leaves a bounded number
 * of rows, whatever the idle timeout. Far above what a real agent holds at once.
 */
export const MAX_STORED_SESSIONS_PER_TOKEN = 1_000;

/** A session's use is written to its row at most this often (and at least once per idle timeout's quarter). */
export const STORED_USE_MS = 60_000;

/** What a 2025 session's `initialize` settled, as its row in `mcp_sessions` keeps it. */
export interface StoredSession {
  id: string;
  /** The revision the session's `initialize` negotiated. */
  protocolVersion: string;
  /** The client's `initialize` params that last past it. */
  client: { capabilities: ClientCapabilities; clientInfo: Implementation };
}

/** The parts of a client's `initialize` params a session's row keeps. */
export function clientOf(params: InitializeRequestParams): StoredSession["client"] {
  return { capabilities: params.capabilities, clientInfo: params.clientInfo };
}

/**
 * 2025 sessions in the store (`mcp_sessions`), so that one outlives a restart of Gatehouse and
 * is served by any replica on the same store (PRODUCT.md §14): the SDK v1 client and the agent
 * frameworks built on it never open a new session once theirs is refused. A row is written when
 * `initialize` is accepted, before the client sees its session id; a replica that does not hold
 * the session in memory brings it back from its row ({@link restoreInitialized}).
 *
 * A row goes with DELETE, when its token is revoked (or deleted: the foreign key cascades), or
 * once nobody used the session, on any replica, for the idle timeout; never at shutdown, which is
 * the point. Each replica writes the use of the sessions it holds, at most once per
 * {@link STORED_USE_MS}, and keeps the rows of those in use (an open stream, a held call) fresh
 * at its sweep, so a long-held call or a quiet listening client is not taken for idle.
 */
export class StoredSessions {
  private readonly useMs: number;
  private readonly reviving = new Map<string, Promise<unknown>>();

  constructor(
    private readonly db: Db,
    private readonly idleMs: number,
    private readonly log: Logger,
    private readonly maxPerToken = MAX_STORED_SESSIONS_PER_TOKEN,
  ) {
    // Well inside the idle timeout, so a session in use never looks idle to another replica.
    this.useMs = Math.min(STORED_USE_MS, idleMs / 4);
  }

  /**
   * Writes the row of a session whose `initialize` was accepted. A failure is logged, and the
   * session then lives in this process alone (as every session did before rows).
   */
  async add(session: Session, stored: StoredSession): Promise<void> {
    const at = Date.now();
    try {
      await this.db.insert(mcpSessions).values({
        id: stored.id,
        tokenId: session.tokenId,
        protocolVersion: stored.protocolVersion,
        client: JSON.stringify(stored.client),
        createdAt: iso(at),
        lastActiveAt: iso(at),
      });
      session.storedUse = at;
    } catch (err) {
      this.log.error(`agent session ${stored.id} not stored: ${String(err)}`, { token: session.tokenName });
      return;
    }
    try {
      const kept = this.db
        .select({ id: mcpSessions.id })
        .from(mcpSessions)
        .where(eq(mcpSessions.tokenId, session.tokenId))
        .orderBy(desc(mcpSessions.lastActiveAt), desc(mcpSessions.createdAt), desc(mcpSessions.id))
        .limit(this.maxPerToken);
      await this.db
        .delete(mcpSessions)
        .where(and(eq(mcpSessions.tokenId, session.tokenId), notInArray(mcpSessions.id, kept)));
    } catch (err) {
      // Trimmed at the next session's opening, or by the idle sweep.
      this.log.debug(`stored sessions of ${session.tokenName} not trimmed: ${String(err)}`);
    }
  }

  /**
   * The stored session `id` of token `tokenId`, or null: no row, another token's (answered as
   * an unknown one, so ids cannot be probed), its token revoked, or idle past the idle timeout
   * (those two rows are deleted: they are never revived).
   */
  async find(id: string, tokenId: number): Promise<StoredSession | null> {
    const row = await first(
      this.db
        .select({
          tokenId: mcpSessions.tokenId,
          protocolVersion: mcpSessions.protocolVersion,
          client: mcpSessions.client,
          lastActiveAt: mcpSessions.lastActiveAt,
          revokedAt: agentTokens.revokedAt,
        })
        .from(mcpSessions)
        .innerJoin(agentTokens, eq(agentTokens.id, mcpSessions.tokenId))
        .where(eq(mcpSessions.id, id)),
    );
    if (!row || row.tokenId !== tokenId) return null;
    const cutoff = iso(Date.now() - this.idleMs);
    if (row.revokedAt !== null) {
      await this.forget(id);
      return null;
    }
    if (row.lastActiveAt < cutoff) {
      // Only if still idle: another replica may have used the session since it was read.
      await this.db
        .delete(mcpSessions)
        .where(and(eq(mcpSessions.id, id), lt(mcpSessions.lastActiveAt, cutoff)));
      return null;
    }
    return {
      id,
      protocolVersion: row.protocolVersion,
      client: JSON.parse(row.client) as StoredSession["client"],
    };
  }

  /**
   * Notes a use of `session`, which this process holds. The request path calls it on every
   * request, so it writes the row only when its last write is {@link STORED_USE_MS} old (at most
   * one write a minute per session) and never makes the request wait: a failed write is logged.
   * Resolves once the write, if any, is over.
   */
  async used(session: Session): Promise<void> {
    const at = Date.now();
    if (at - session.storedUse < this.useMs) return;
    session.storedUse = at;
    try {
      await this.db
        .update(mcpSessions)
        .set({ lastActiveAt: iso(at) })
        .where(eq(mcpSessions.id, session.id));
    } catch (err) {
      this.log.debug(`agent session ${session.id}: last use not stored: ${String(err)}`);
    }
  }

  /** Deletes the row of session `id` (DELETE /mcp, a revoked token). */
  async forget(id: string): Promise<void> {
    await this.db.delete(mcpSessions).where(eq(mcpSessions.id, id));
  }

  /**
   * The sweep's part, on every replica: first the use of `inUse` (sessions held here with an
   * open stream or a held call, which no request touches meanwhile) is written, then every row
   * idle past the idle timeout, and every row of a revoked token, is deleted, whoever opened it.
   */
  async sweep(inUse: Session[]): Promise<void> {
    await Promise.all(inUse.map((s) => this.used(s)));
    const revoked = this.db
      .select({ id: agentTokens.id })
      .from(agentTokens)
      .where(isNotNull(agentTokens.revokedAt));
    await this.db
      .delete(mcpSessions)
      .where(
        or(
          lt(mcpSessions.lastActiveAt, iso(Date.now() - this.idleMs)),
          inArray(mcpSessions.tokenId, revoked),
        ),
      );
  }

  /**
   * `revive()`, or the same revival already under way for `key`: concurrent requests of one
   * session bring it back once.
   */
  once<T>(key: string, revive: () => Promise<T>): Promise<T> {
    const under = this.reviving.get(key) as Promise<T> | undefined;
    if (under) return under;
    const p = revive().finally(() => this.reviving.delete(key));
    this.reviving.set(key, p);
    return p;
  }

  /** Whether a revival is under way for `key` ({@link once}). */
  revivingNow(key: string): Promise<unknown> | undefined {
    return this.reviving.get(key);
  }
}

/** The id of the `initialize` {@link restoreInitialized} replays; no client sees its answer. */
const RESTORE_ID = "gatehouse-restore";

/**
 * Leaves `server`, connected to `transport`, as the `initialize` of `stored` left the session on
 * the replica that opened it: the transport initialized under the session's id, the server with
 * the negotiated revision and the client's capabilities and name, so that every request and
 * notification is handled as there. The SDK has no call to restore a session, and its fields are
 * private; so this replays that `initialize` through public API — the transport (whose
 * `sessionIdGenerator` must answer `stored.id`) and the server's own handler take it as they took
 * the first — and drops the answer. stored-sessions-rows.test.ts fails if an SDK upgrade breaks
 * it. Rejects when the session did not come out as stored.
 */
export async function restoreInitialized(
  server: Server,
  transport: SessionTransport,
  stored: StoredSession,
  url: string,
): Promise<void> {
  const initialize = {
    jsonrpc: "2.0",
    id: RESTORE_ID,
    method: "initialize",
    params: { protocolVersion: stored.protocolVersion, ...stored.client },
  };
  const headers = { "content-type": "application/json", accept: "application/json, text/event-stream" };
  const res = await transport.handleRequest(new Request(url, { method: "POST", headers }), {
    parsedBody: initialize,
  });
  // The answer's stream ends with the answer: reading it to its end waits for the handler.
  const answer = await res.text();
  if (transport.sessionId !== stored.id || server.getNegotiatedProtocolVersion() !== stored.protocolVersion) {
    throw new Error(`session ${stored.id} not restored: ${res.status} ${answer.slice(0, 200)}`);
  }
}

function iso(ms: number): string {
  return new Date(ms).toISOString();
}
