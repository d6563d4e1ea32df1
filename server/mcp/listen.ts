import "server-only";
import { type Client, ProtocolError } from "@modelcontextprotocol/client";
import type { Logger } from "../log";
import { messageOf } from "./failures";
import { backoffDelay } from "./supervision";

/** Steps between tries to reopen a list-change stream: 1 s doubling to a 60 s cap, with jitter. */
export const LISTEN_BACKOFF = { baseMs: 1000, capMs: 60_000 } as const;
/** A stream that stayed open this long resets the steps: its end is news, not a loop. */
export const LISTEN_STABLE_MS = 60_000;

export interface ListenDeps {
  client: Client;
  server: string;
  log: Logger;
  /** Deadline of the request that opens the stream (until the server acknowledges it). */
  timeoutMs: number;
  /** Whether the connection this loop belongs to is still the live one. */
  current(): boolean;
  /**
   * The tools are to be listed again (paced by the caller): a stream was acknowledged, and a
   * change since the last listing may have gone unheard; or reopening one keeps failing, and the
   * listing checks on the server (one that cannot be fetched fails the connection).
   */
  onGap(): void;
}

/**
 * JSON-RPC codes that say a server offers no list-change stream (the method or its parameters
 * unknown to it, a capability or version it lacks); any other error (-32603, a capacity refusal)
 * is tried again after the backoff.
 */
const REFUSALS = new Set([-32601, -32602, -32021, -32022]);

/** Failed tries to reopen a stream in a row after which the tools are re-listed, to check the server. */
export const LISTEN_CHECK_AFTER_FAILURES = 3;

/**
 * How a 2026-07-28 connection hears `notifications/tools/list_changed`: such a server sends
 * nothing unasked, so Gatehouse keeps a `subscriptions/listen` stream open for the tools list
 * (the SDK delivers its notifications to the client's handler, as on a 2025 connection).
 *
 * Each time a stream is acknowledged the tools are listed again: a change between the last
 * listing and the acknowledgement (the connection's first listing, or the gap while no stream
 * was open) would be missed otherwise. The SDK never reopens a stream that ends; this loop does,
 * after a backoff. A stream that ends is no failure of the connection: a 2026-07-28 server keeps
 * no session, so one that restarts answers the next request as before. Only after
 * {@link LISTEN_CHECK_AFTER_FAILURES} failed reopenings in a row are the tools re-listed to check
 * on it (a listing that fails fails the connection). A server that answers the listen request
 * with an error does not offer the stream: the loop stops, and the periodic refresh is what
 * remains (see {@link REFUSALS}). Ends when the connection is no longer `current`.
 */
export class ListenLoop {
  private attempt = 0;
  private timer: NodeJS.Timeout | null = null;
  private stopped = false;

  constructor(private readonly deps: ListenDeps) {}

  start(): void {
    void this.open();
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }

  private live(): boolean {
    return !this.stopped && this.deps.current();
  }

  private async open(): Promise<void> {
    if (!this.live()) return;
    const { client, server, log } = this.deps;
    let opened: number;
    try {
      const subscription = await client.listen({ toolsListChanged: true }, { timeout: this.deps.timeoutMs });
      if (!this.live()) {
        void subscription.close().catch(() => undefined);
        return;
      }
      opened = Date.now();
      this.deps.onGap();
      const cause = await subscription.closed;
      if (!this.live() || cause === "local") return;
      log.debug(`server ${server}: its list-change stream ended (${cause}); listening again`);
    } catch (err) {
      if (!this.live()) return;
      if (err instanceof ProtocolError && REFUSALS.has(err.code)) {
        // The server answered that it offers no such stream. Periodic refreshes still run.
        log.info(
          `server ${server} refused a list-change stream (${messageOf(err)}); relying on periodic refreshes`,
        );
        return;
      }
      log.debug(`server ${server}: could not open its list-change stream: ${messageOf(err)}`);
      this.retry();
      if (this.attempt >= LISTEN_CHECK_AFTER_FAILURES) this.deps.onGap();
      return;
    }
    if (Date.now() - opened >= LISTEN_STABLE_MS) this.attempt = 0;
    this.retry();
  }

  private retry(): void {
    if (!this.live()) return;
    this.attempt++;
    const delay = backoffDelay(this.attempt, Math.random(), LISTEN_BACKOFF);
    this.timer = setTimeout(() => {
      this.timer = null;
      void this.open();
    }, delay);
    this.timer.unref();
  }
}
