import "server-only";
import pg from "pg";
import { errorCode } from "./pg-driver";

/**
 * A PostgreSQL connection of its own that holds session advisory locks: a lock taken here is
 * held until this connection ends, so a process that dies (or loses the database) releases
 * every lock it held, and another process can take them. `onLost` says the connection is gone,
 * and with it every lock: whoever acted on holding one must stop at once.
 */
export class PgLockSession {
  private lost = false;

  private constructor(
    private readonly client: pg.Client,
    private readonly timeoutMs: number,
  ) {}

  /**
   * Connects to `url`. `timeoutMs` bounds the connection and every statement: a connection that
   * cannot answer a ping within it is taken as lost (its locks may be others' already).
   */
  static async open(
    url: string,
    timeoutMs: number,
    onLost: (reason: string) => void,
  ): Promise<PgLockSession> {
    const client = new pg.Client({
      connectionString: url,
      connectionTimeoutMillis: timeoutMs,
      query_timeout: timeoutMs,
      keepAlive: true,
    });
    const session = new PgLockSession(client, timeoutMs);
    const lose = (reason: string) => {
      if (session.lost) return;
      session.lost = true;
      client.end().catch(() => undefined);
      onLost(reason);
    };
    client.on("error", (err) => lose(errorCode(err) || err.message));
    client.on("end", () => lose("connection ended"));
    try {
      await client.connect();
    } catch (err) {
      session.lost = true;
      await client.end().catch(() => undefined);
      throw err;
    }
    return session;
  }

  /** Whether the connection (and so every lock taken on it) is gone. */
  get isLost(): boolean {
    return this.lost;
  }

  /** Takes the lock (`space`, `name`) when free: true when it is now held on this connection. */
  async tryLock(space: number, name: string): Promise<boolean> {
    const { rows } = await this.client.query<{ ok: boolean }>(
      "SELECT pg_try_advisory_lock($1, hashtext($2)) AS ok",
      [space, name],
    );
    return rows[0]?.ok === true;
  }

  /** Releases the lock (`space`, `name`) held on this connection. */
  async unlock(space: number, name: string): Promise<void> {
    await this.client.query("SELECT pg_advisory_unlock($1, hashtext($2))", [space, name]);
  }

  /** Checks the connection answers within the timeout; a failure ends it (and calls `onLost`). */
  async ping(): Promise<void> {
    try {
      await this.client.query("SELECT 1");
    } catch (err) {
      this.client.emit("error", err instanceof Error ? err : new Error(String(err)));
      throw err;
    }
  }

  /** Ends the connection, releasing every lock it held. */
  async close(): Promise<void> {
    this.lost = true;
    await this.client.end().catch(() => undefined);
  }

  /** The bound on a statement, for callers pacing their checks. */
  get timeout(): number {
    return this.timeoutMs;
  }
}
