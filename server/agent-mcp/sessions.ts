import "server-only";
import type { Server } from "@modelcontextprotocol/sdk/server/index.js";
import type { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js";

/** One agent's MCP session: its SDK `Server`, its transport, and what the endpoint counts about it. */
export interface Session {
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

/**
 * The live sessions by id, and the rule for who makes room at a token's cap. It only keeps
 * the list: closing a session (its SDK `Server`) is the endpoint's.
 */
export class SessionTable {
  private readonly byId = new Map<string, Session>();

  get(id: string): Session | undefined {
    return this.byId.get(id);
  }

  add(session: Session): void {
    this.byId.set(session.id, session);
  }

  /** Forgets `session`; a no-op when it is gone already or its id now names another entry. */
  remove(session: Session): void {
    if (this.byId.get(session.id) === session) this.byId.delete(session.id);
  }

  /** Live sessions, optionally of one token (by name). */
  count(tokenName?: string): number {
    let n = 0;
    for (const s of this.byId.values()) if (!tokenName || s.tokenName === tokenName) n++;
    return n;
  }

  /** A snapshot of every session, safe to iterate while sessions close. */
  all(): Session[] {
    return [...this.byId.values()];
  }

  /**
   * The sessions of `tokenId` to close so that it can open one more without passing `max`:
   * the least recently active ones that hold no call (a client that restarts without DELETE
   * never locks itself out). `null` when too few hold none: the new session is then refused,
   * so no waiting agent loses its answer. Sessions already closing do not count.
   */
  evictionFor(tokenId: number, max: number): Session[] | null {
    const mine = this.all().filter((s) => s.tokenId === tokenId && !s.closing);
    const excess = mine.length - max + 1;
    if (excess <= 0) return [];
    const victims = mine
      .filter((s) => s.holding === 0)
      .sort((a, b) => a.lastActive - b.lastActive)
      .slice(0, excess);
    return victims.length < excess ? null : victims;
  }
}
