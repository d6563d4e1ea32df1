import "server-only";
import { createHash } from "node:crypto";
import { and, desc, eq, notInArray } from "drizzle-orm";
import type { Logger } from "../log";
import { type Db, first } from "../store/db";
import { linkedUris } from "../store/schema";

/** A linked URI's row is trimmed away past the bound at every this many links of its server. */
const TRIM_EVERY = 50;

/**
 * The URIs servers linked in tool results, in the store (`linked_uris`), for replicas that share
 * it (PostgreSQL): the agent that got a link from one replica may ask another to read it. Rows are
 * keyed by a hash of server and URI (a URI may be longer than an index key allows), refreshed when
 * linked again, and trimmed to about `maxPerServer` per server (the newest), as in memory.
 */
export class StoredLinks {
  private readonly sinceTrim = new Map<string, number>();

  constructor(
    private readonly db: Db,
    private readonly log: Logger,
    private readonly maxPerServer: number,
  ) {}

  /** Records that `server` linked `uri`; never rejects (a failure is logged: the link stays readable here). */
  async remember(server: string, uri: string): Promise<void> {
    const at = new Date().toISOString();
    try {
      await this.db
        .insert(linkedUris)
        .values({ key: keyOf(server, uri), server, linkedAt: at })
        .onConflictDoUpdate({ target: linkedUris.key, set: { linkedAt: at } });
      const n = (this.sinceTrim.get(server) ?? 0) + 1;
      this.sinceTrim.set(server, n % TRIM_EVERY);
      if (n % TRIM_EVERY === 0) await this.trim(server);
    } catch (err) {
      this.log.debug(`a link of ${server} was not stored: ${String(err)}`);
    }
  }

  /** Whether a replica recorded that `server` linked `uri`. */
  async knows(server: string, uri: string): Promise<boolean> {
    const row = await first(
      this.db
        .select({ key: linkedUris.key })
        .from(linkedUris)
        .where(eq(linkedUris.key, keyOf(server, uri))),
    );
    return row !== undefined;
  }

  /** Deletes `server`'s rows beyond the newest `maxPerServer`. */
  private async trim(server: string): Promise<void> {
    const kept = this.db
      .select({ key: linkedUris.key })
      .from(linkedUris)
      .where(eq(linkedUris.server, server))
      .orderBy(desc(linkedUris.linkedAt), desc(linkedUris.key))
      .limit(this.maxPerServer);
    await this.db
      .delete(linkedUris)
      .where(and(eq(linkedUris.server, server), notInArray(linkedUris.key, kept)));
  }
}

function keyOf(server: string, uri: string): string {
  return createHash("sha256").update(server).update("\0").update(uri).digest("hex");
}
