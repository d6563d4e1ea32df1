import "server-only";
import pg from "pg";
import { errorCode } from "./pg-driver";

/** The longest pause between two tries to get the listening connection back. */
const MAX_RETRY_MS = 5_000;
/**
 * How often the listening connection is asked a `SELECT 1`, and how long its answer may take: a
 * connection the network dropped without closing hears nothing and says nothing, so it is only
 * found lost by asking.
 */
const PING_EVERY_MS = 10_000;
const PING_TIMEOUT_MS = 5_000;

export interface ListenerEvents {
  /** A notification's payload on the channel (from any session, this process's own included). */
  onMessage(payload: string): void;
  /**
   * The listening connection is back after it was lost at `lostAt` (ms since the epoch):
   * notifications sent meanwhile were missed, and what they told must be read again.
   */
  onResumed(lostAt: number): void;
  /** The listening connection was lost, or a try to get it back failed (a SQLSTATE or message). */
  onLost(reason: string): void;
}

/**
 * A PostgreSQL connection of its own that `LISTEN`s on one channel for as long as it is open,
 * reconnecting by itself when the connection breaks (after 100 ms, doubling to
 * {@link MAX_RETRY_MS}), and saying so ({@link ListenerEvents.onResumed}), because what was
 * notified meanwhile is gone. A pooled connection cannot listen: the pool hands it to others.
 */
export class PgListener {
  private client: pg.Client | null = null;
  private closed = false;
  private retryTimer: NodeJS.Timeout | null = null;
  private lostAt: number | null = null;
  private pingTimer: NodeJS.Timeout | null = null;
  /** Ends the current connection as lost (and tries again). */
  private dropCurrent: ((reason: string) => void) | null = null;

  private constructor(
    private readonly url: string,
    private readonly channel: string,
    private readonly events: ListenerEvents,
    private readonly applicationName: string,
  ) {}

  /**
   * Listens on `channel` at `url`; rejects when the first connection cannot be made (and then
   * tries nothing more). `applicationName` names the connection in `pg_stat_activity`.
   */
  static async open(
    url: string,
    channel: string,
    events: ListenerEvents,
    applicationName = "gatehouse listener",
  ): Promise<PgListener> {
    const listener = new PgListener(url, channel, events, applicationName);
    try {
      await listener.connect();
    } catch (err) {
      await listener.close();
      throw err;
    }
    listener.pingTimer = setInterval(() => listener.ping(), PING_EVERY_MS);
    listener.pingTimer.unref();
    return listener;
  }

  /** Asks the connection a `SELECT 1`; one that does not answer in time is taken as lost. */
  private ping(): void {
    const client = this.client;
    const drop = this.dropCurrent;
    if (!client || !drop) return;
    const timer = setTimeout(() => drop("the connection stopped answering"), PING_TIMEOUT_MS);
    client.query("SELECT 1").then(
      () => clearTimeout(timer),
      (err: unknown) => {
        clearTimeout(timer);
        drop(errorCode(err) || String(err));
      },
    );
  }

  private async connect(): Promise<void> {
    const client = new pg.Client({
      connectionString: this.url,
      connectionTimeoutMillis: 5_000,
      application_name: this.applicationName,
      keepAlive: true,
    });
    let dropped = false;
    const drop = (reason: string) => {
      if (dropped) return;
      dropped = true;
      if (this.client === client) this.client = null;
      client.end().catch(() => undefined);
      if (this.closed) return;
      this.lostAt ??= Date.now();
      this.events.onLost(reason);
      this.retry(100);
    };
    client.on("error", (err) => drop(errorCode(err) || err.message));
    client.on("end", () => drop("connection ended"));
    client.on("notification", (n) => {
      if (n.channel === this.channel && n.payload !== undefined) this.events.onMessage(n.payload);
    });
    try {
      await client.connect();
      // The channel is an identifier: quoted, so its case is kept.
      await client.query(`LISTEN "${this.channel.replaceAll('"', '""')}"`);
    } catch (err) {
      dropped = true;
      await client.end().catch(() => undefined);
      throw err;
    }
    if (this.closed) {
      await client.end().catch(() => undefined);
      return;
    }
    this.client = client;
    this.dropCurrent = drop;
    if (this.lostAt !== null) {
      const lostAt = this.lostAt;
      this.lostAt = null;
      this.events.onResumed(lostAt);
    }
  }

  private retry(ms: number): void {
    if (this.closed || this.retryTimer) return;
    this.retryTimer = setTimeout(() => {
      this.retryTimer = null;
      this.connect().catch((err: unknown) => {
        if (this.closed) return;
        this.events.onLost(errorCode(err) || String(err));
        this.retry(Math.min(ms * 2, MAX_RETRY_MS));
      });
    }, ms);
    this.retryTimer.unref();
  }

  /** Whether the channel is being heard now. */
  get listening(): boolean {
    return this.client !== null;
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    if (this.pingTimer) clearInterval(this.pingTimer);
    const client = this.client;
    this.client = null;
    await client?.end().catch(() => undefined);
  }
}
