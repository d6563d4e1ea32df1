import "server-only";
import { and, eq, inArray } from "drizzle-orm";
import type { Logger } from "../log";
import type { Db } from "../store/db";
import { PgLockSession } from "../store/pg-locks";
import { dbTimeAgo, serverHolders } from "../store/schema";

/** The advisory lock space of stdio servers ("ghst"); the second key is the hash of the server's name. */
const STDIO_LOCK_SPACE = 0x6768_7374;

export interface HoldingOptions {
  db: Db;
  /** The PostgreSQL URL: the locks live on a connection of their own. */
  url: string;
  /** This replica's id. */
  replica: string;
  /** The replica lease: a look for servers to take every fifth of it. */
  leaseMs: number;
  log: Logger;
  /** The stdio servers to hold now (the enabled ones), asked at every look. */
  servers(): string[];
  /** This replica took `server`: start it here. */
  take(server: string): Promise<void>;
  /** This replica no longer holds `server` (its lock is lost, or it is no longer to be held): stop it here. */
  lose(server: string): Promise<void>;
}

/**
 * Which stdio servers this replica runs: each enabled stdio server runs on exactly one replica at
 * a time, the one holding its PostgreSQL advisory lock (session locks, on a connection of this
 * holding's own). Every fifth of the lease each replica tries to take the servers nobody holds,
 * so when a holder dies (its connection, and with it its locks, goes) a survivor takes its
 * servers within about that long, starts them, and records itself in `server_holders`, where
 * other replicas look up where to forward calls. The connection is pinged at every look with a
 * bound shorter than the lease: a replica that cannot reach the database stops its servers, since
 * another may be taking them.
 */
export class StdioHolding {
  private session: PgLockSession | null = null;
  private readonly held = new Set<string>();
  private timer: NodeJS.Timeout | null = null;
  private looking: Promise<void> | null = null;
  private closed = false;
  private failing = false;

  private constructor(private readonly opts: HoldingOptions) {}

  /** Takes what it can at once (awaited), then looks again every fifth of the lease. */
  static async start(opts: HoldingOptions): Promise<StdioHolding> {
    const holding = new StdioHolding(opts);
    await holding.look();
    const every = Math.max(50, Math.floor(opts.leaseMs / 5));
    holding.timer = setInterval(() => {
      if (holding.looking) return;
      holding.looking = holding.look().finally(() => {
        holding.looking = null;
      });
    }, every);
    holding.timer.unref();
    return holding;
  }

  /** Whether this replica holds `server` now. */
  holds(server: string): boolean {
    return this.held.has(server);
  }

  private async look(): Promise<void> {
    if (this.closed) return;
    try {
      const session = await this.connected();
      await session.ping();
      const wanted = new Set(this.opts.servers());
      for (const server of [...this.held]) {
        if (wanted.has(server)) continue;
        this.held.delete(server);
        await session.unlock(STDIO_LOCK_SPACE, server);
        await this.opts.db
          .delete(serverHolders)
          .where(and(eq(serverHolders.server, server), eq(serverHolders.replica, this.opts.replica)));
        await this.opts.lose(server);
      }
      for (const server of wanted) {
        if (this.held.has(server) || this.closed) continue;
        if (!(await session.tryLock(STDIO_LOCK_SPACE, server))) continue;
        this.held.add(server);
        await this.opts.db
          .insert(serverHolders)
          .values({ server, replica: this.opts.replica })
          .onConflictDoUpdate({
            target: serverHolders.server,
            set: { replica: this.opts.replica, since: dbTimeAgo(0) },
          });
        this.opts.log.info(`this replica runs ${server} now`);
        await this.opts.take(server);
      }
      if (this.failing) this.opts.log.info("stdio servers are placed again");
      this.failing = false;
    } catch (err) {
      if (!this.failing)
        this.opts.log.warn("placing stdio servers failed; trying again", { error: String(err) });
      this.failing = true;
    }
  }

  private async connected(): Promise<PgLockSession> {
    if (this.session && !this.session.isLost) return this.session;
    // Shorter than the lease: a ping that takes longer means the locks may be another's already.
    const timeout = Math.max(1_000, Math.floor(this.opts.leaseMs / 3));
    this.session = await PgLockSession.open(this.opts.url, timeout, (reason) => this.lostAll(reason));
    return this.session;
  }

  /** The connection went, and every lock with it: stop every server held. */
  private lostAll(reason: string): void {
    const servers = [...this.held];
    this.held.clear();
    this.session = null;
    if (servers.length === 0 || this.closed) return;
    this.opts.log.warn(
      `the connection holding ${servers.join(", ")} was lost (${reason}); stopping them here`,
    );
    for (const server of servers) {
      this.opts.lose(server).catch((err: unknown) => {
        this.opts.log.error(`stopping ${server} failed`, { error: String(err) });
      });
    }
  }

  /**
   * Stops looking (a look under way finishes first): no server is taken from now on, so the
   * runtime can stop the servers it runs without a look starting one behind it.
   */
  async stopTaking(): Promise<void> {
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    await this.looking;
  }

  /**
   * Lets go of every server (their rows deleted, the connection ended), {@link stopTaking} first.
   * The runtime stops the servers before, so no two replicas run one at once.
   */
  async close(): Promise<void> {
    await this.stopTaking();
    const servers = [...this.held];
    this.held.clear();
    if (servers.length > 0) {
      await this.opts.db
        .delete(serverHolders)
        .where(and(inArray(serverHolders.server, servers), eq(serverHolders.replica, this.opts.replica)))
        .catch(() => undefined);
    }
    await this.session?.close();
    this.session = null;
  }
}
