import "server-only";
import { eq, sql } from "drizzle-orm";
import { type Db, dialectOf, first } from "../store/db";
import { agentRates } from "../store/schema";

/**
 * Agents' `callsPerMinute` as token buckets: each token's bucket holds up to `perMinute` calls
 * and refills evenly (one call every `60 / perMinute` s), so an agent may burst up to its minute's
 * calls and then goes at the pace. A new bucket is full.
 */
export interface CallRates {
  /**
   * Takes one call from token `name`'s bucket: null when there was one, else the whole seconds
   * until there is (at least 1). `now`: milliseconds since the epoch (tests move it).
   */
  take(name: string, perMinute: number, now: number): Promise<number | null>;
}

/** Calls a bucket gets back per millisecond. */
const ratePerMs = (perMinute: number) => perMinute / 60_000;

/** Seconds until a bucket holding `tokens` has one call again. */
function secondsUntilOne(tokens: number, perMinute: number): number {
  return Math.max(1, Math.ceil((1 - tokens) / ratePerMs(perMinute) / 1000));
}

/**
 * The buckets in this process's memory: on SQLite, where one process serves the store (its file
 * lock), memory is the whole truth, and a call costs no write. A restart fills every bucket.
 */
export class MemoryRates implements CallRates {
  private readonly buckets = new Map<string, { tokens: number; at: number }>();

  async take(name: string, perMinute: number, now: number): Promise<number | null> {
    const bucket = this.buckets.get(name);
    const elapsed = bucket ? Math.max(0, now - bucket.at) : 0;
    const tokens = bucket ? Math.min(perMinute, bucket.tokens + elapsed * ratePerMs(perMinute)) : perMinute;
    const at = bucket ? Math.max(bucket.at, now) : now;
    if (tokens < 1) {
      this.buckets.set(name, { tokens, at });
      return secondsUntilOne(tokens, perMinute);
    }
    this.buckets.set(name, { tokens: tokens - 1, at });
    return null;
  }
}

/**
 * The buckets in the store (`agent_rates`), for replicas on PostgreSQL: each take is one
 * conditional upsert, outside any transaction, so concurrent takes on any replica queue on the
 * token's row and never take more than the bucket holds (a SERIALIZABLE transaction would fail
 * and retry instead of waiting its turn). Why the store and not a replica owning each token: an
 * owner would need a lease per token and a hop to it on every call of that token from elsewhere
 * (a round trip over HTTP costs more than one statement), and its buckets would start full again
 * when it died. Times are the replicas' clocks; a bucket never goes back in time when one lags.
 */
export class StoreRates implements CallRates {
  constructor(private readonly db: Db) {}

  async take(name: string, perMinute: number, now: number): Promise<number | null> {
    const { tokens, takenAt } = agentRates;
    const rate = ratePerMs(perMinute);
    // SQLite spells PostgreSQL's LEAST and GREATEST as the many-argument MIN and MAX.
    const [least, greatest] = dialectOf(this.db) === "postgres" ? ["LEAST", "GREATEST"] : ["MIN", "MAX"];
    const min = sql.raw(least);
    const max = sql.raw(greatest);
    const refilled = sql`${min}(${perMinute}, ${tokens} + ${max}(0, ${now} - ${takenAt}) * ${rate})`;
    const taken = await first(
      this.db
        .insert(agentRates)
        .values({ tokenName: name, tokens: perMinute - 1, takenAt: now })
        .onConflictDoUpdate({
          target: agentRates.tokenName,
          set: { tokens: sql`${refilled} - 1`, takenAt: sql`${max}(${takenAt}, ${now})` },
          setWhere: sql`${refilled} >= 1`,
        })
        .returning({ tokens }),
    );
    if (taken) return null;
    const row = await first(this.db.select().from(agentRates).where(eq(agentRates.tokenName, name)));
    if (!row) return null;
    const left = Math.min(perMinute, row.tokens + Math.max(0, now - row.takenAt) * rate);
    return secondsUntilOne(left, perMinute);
  }
}
