import "server-only";
import {
  isJSONRPCErrorResponse,
  isJSONRPCResultResponse,
  type JSONRPCMessage,
  type JSONRPCResultResponse,
  type RequestId,
  type Server,
  WebStandardStreamableHTTPServerTransport,
} from "@modelcontextprotocol/server";
import type { Requester } from "../calls/call-row";
import { isModernNotFound, RESOURCE_NOT_FOUND } from "./resources";

/**
 * A 2025 session's transport: the SDK's, with one word of the 2025 revision kept. A resource an
 * agent may not read is answered "not found", which the 2025-11-25 revision codes -32002 (as
 * Gatehouse always answered it); the SDK v2 codes it -32602 on every era, as 2026-07-28 does, so
 * on this leg such an answer (-32602 with data `{uri}` and nothing else, the SDK's own shape of a
 * resource not found, and Gatehouse's) goes out as -32002 again. Every other message is sent as
 * the SDK wrote it.
 *
 * It can also hold one answer back until something is done with it ({@link beforeAnswer}): the
 * endpoint stores a new session before the client learns its id from the `initialize` answer.
 */
export class SessionTransport extends WebStandardStreamableHTTPServerTransport {
  private held: { id: RequestId; run: (answer: JSONRPCResultResponse) => Promise<void> } | undefined;

  /**
   * Runs `run` with the (successful) answer to request `id` and sends that answer once `run` has
   * settled; once. `run` should not reject: a rejection is the SDK's to report, and the answer is
   * not sent.
   */
  beforeAnswer(id: RequestId, run: (answer: JSONRPCResultResponse) => Promise<void>): void {
    this.held = { id, run };
  }

  override async send(message: JSONRPCMessage, options?: { relatedRequestId?: RequestId }): Promise<void> {
    const held = this.held;
    if (held && isJSONRPCResultResponse(message) && message.id === held.id) {
      this.held = undefined;
      await held.run(message);
    }
    return super.send(asLegacyNotFound(message), options);
  }
}

/** `message`, with a resource-not-found error coded as the 2025 revision codes it. */
export function asLegacyNotFound(message: JSONRPCMessage): JSONRPCMessage {
  if (!isJSONRPCErrorResponse(message) || !isModernNotFound(message.error)) return message;
  return { ...message, error: { ...message.error, code: RESOURCE_NOT_FOUND } };
}

/** One agent's MCP session: its SDK `Server`, its transport, and what the endpoint counts about it. */
export interface Session {
  id: string;
  tokenId: number;
  tokenName: string;
  /** Who the session's calls are asked for; its tool set is the token's as of the latest request. */
  requester: Requester;
  server: Server;
  transport: SessionTransport;
  /** `Date.now()` of the last use, for the idle timeout. */
  lastActive: number;
  /** Order of the last use among all sessions (ties of `lastActive` in one millisecond are common). */
  lastUse: number;
  /** `Date.now()` when its use was last written to its row in the store (stored-sessions.ts). */
  storedUse: number;
  /**
   * Requests in flight plus open response streams (the GET stream of a listening client
   * counts, and so does an `initialize` from the moment its session is reserved).
   */
  open: number;
  /** `tools/call` requests held for a decision. */
  holding: number;
  /** Stops holding this session's calls (shutdown): each is answered as it stands, still pending. */
  release: AbortController;
  /** One entry per POST whose response is still going out; each resolves once that response is over. */
  answering: Set<Promise<void>>;
  /** Set before the SDK aborts in-flight handlers on any teardown (see `open`). */
  closing: boolean;
  /** `server.close()` was called. */
  closed: boolean;
}

/** Whether someone is using `session` right now: a request in flight, an open stream or a held call. */
export function isBusy(session: Session): boolean {
  return session.open > 0 || session.holding > 0;
}

/**
 * Counts a response of `session` as going out ({@link Session.answering}) until the function
 * returned is called (more calls do nothing).
 */
export function answering(session: Session): () => void {
  let finish: () => void = () => undefined;
  const over = new Promise<void>((resolve) => {
    finish = resolve;
  });
  session.answering.add(over);
  return () => {
    session.answering.delete(over);
    finish();
  };
}

/**
 * Shutdown's first step for the 2025 sessions, before they close: each is marked closing (so a
 * held call that stops waiting is not taken for the agent withdrawing it) and its held calls are
 * released, which answers each on its own stream as it stands — still pending, with its id and
 * where to follow it — as the 2026-07-28 leg does. Resolves once every response going out is
 * over, or after `withinMs`, whichever is first: a stream still open then closes unanswered.
 */
export async function answerInFlight(sessions: Session[], withinMs: number): Promise<void> {
  for (const s of sessions) {
    s.closing = true;
    s.release.abort();
  }
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    Promise.all(sessions.flatMap((s) => [...s.answering])),
    new Promise<void>((resolve) => {
      timer = setTimeout(resolve, withinMs);
    }),
  ]);
  clearTimeout(timer);
}

/**
 * The live sessions of this process by id, and the rule for who makes room at a token's cap. It
 * only keeps the list: closing a session (its SDK `Server`) is the endpoint's. The cap is per
 * process: another replica on the same store, or this one after a restart, counts only the
 * sessions it holds in memory (a stored session comes back in memory when it is used, and counts
 * from then on).
 */
export class SessionTable {
  private readonly byId = new Map<string, Session>();
  private uses = 0;

  get(id: string): Session | undefined {
    return this.byId.get(id);
  }

  /**
   * Adds `session` under its id. The endpoint adds a session as soon as its `initialize` is
   * accepted, before anything is awaited, so that the next `initialize` already counts it.
   */
  add(session: Session): void {
    this.touch(session);
    this.byId.set(session.id, session);
  }

  /** Records a use of `session` now. */
  touch(session: Session): void {
    session.lastActive = Date.now();
    session.lastUse = ++this.uses;
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
   * the least recently used ones that nobody is using ({@link isBusy}), or `null` when too few
   * are unused, and the new session is to be refused. Sessions already closing do not count.
   *
   * Why unused ones only: no common client sends DELETE, so a token's table fills with the
   * sessions of clients that went away, and those are the ones to drop (a client that
   * restarts never locks itself out). A session with an open stream has a client at the
   * other end: one listening for `list_changed`, or waiting for a reviewer's answer to a held
   * call. Cutting it would lose that answer or those notifications without a word, to make
   * room for a client that can simply be told no and retry; so at a cap of busy sessions the
   * newcomer is refused. A stream whose client vanished without closing its connection does
   * not stay busy for ever: the transport's keep-alive writes fail once the connection is
   * found dead, and the stream ends.
   */
  evictionFor(tokenId: number, max: number): Session[] | null {
    const mine = this.all().filter((s) => s.tokenId === tokenId && !s.closing);
    const excess = mine.length - max + 1;
    if (excess <= 0) return [];
    const victims = mine
      .filter((s) => !isBusy(s))
      .sort((a, b) => a.lastUse - b.lastUse)
      .slice(0, excess);
    return victims.length < excess ? null : victims;
  }
}
