import "server-only";
import pg from "pg";
import { GatehouseError } from "@/lib/errors";
import { StoreInUseError } from "./lock";
import { errorCode, where } from "./pg-driver";

/** Advisory lock key a serving Gatehouse holds on its PostgreSQL database ("gh-serv"). */
const SERVING_LOCK = 0x6768_7365;

/**
 * Takes the serving lock of the PostgreSQL database at `url`: a session advisory lock held on a
 * connection of its own for as long as this Gatehouse runs, so a second Gatehouse on the same
 * database refuses to start (`StoreInUseError`) until replicas share their work through the
 * database. The lock goes with the connection, so a Gatehouse that dies leaves none behind.
 * Throws `store_unavailable` when PostgreSQL cannot be reached.
 */
export async function lockPostgres(url: string): Promise<{ release(): Promise<void> }> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5000 });
  // A connection that breaks later emits here; unhandled, it would end the process.
  client.on("error", () => undefined);
  try {
    await client.connect();
    const { rows } = await client.query<{ ok: boolean }>("SELECT pg_try_advisory_lock($1) AS ok", [
      SERVING_LOCK,
    ]);
    if (!rows[0]?.ok) {
      throw new StoreInUseError(
        `the PostgreSQL database ${where(url)} is in use by another Gatehouse; stop it first`,
      );
    }
  } catch (err) {
    await client.end().catch(() => undefined);
    if (err instanceof StoreInUseError) throw err;
    throw new GatehouseError(
      "store_unavailable",
      `PostgreSQL at ${where(url)} cannot be reached (${errorCode(err) || (err as Error).message}); check DATABASE_URL and that the server is up`,
      { cause: err },
    );
  }
  let released = false;
  return {
    async release() {
      if (released) return;
      released = true;
      await client.end().catch(() => undefined);
    },
  };
}
