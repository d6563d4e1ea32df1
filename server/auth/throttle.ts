import "server-only";
import { isIPv6 } from "node:net";
import { and, count, eq, gt, gte, inArray, lt, lte, or, type SQL, sql } from "drizzle-orm";
import { GatehouseError } from "@/lib/errors";
import { type Db, first } from "../store/db";
import { signInCounters } from "../store/schema";

/** The limits of one kind of sign-in bucket. */
export interface ThrottleLimits {
  /** Attempts per key admitted within one window. */
  max: number;
  /** The window's length in ms; it opens with the key's first counted attempt. */
  windowMs: number;
  /** Keys tracked at once before room is made (see {@link LoginThrottle} for how). */
  maxKeys: number;
}

/** Per account name: 10 attempts in 15 minutes, 10,000 names tracked. */
export const PER_NAME: ThrottleLimits = { max: 10, windowMs: 15 * 60 * 1000, maxKeys: 10_000 };
/**
 * Per client address: 30 attempts in 15 minutes, 10,000 addresses tracked. Three names' worth,
 * so one client can hold at most three accounts locked at a time, while a handful of people
 * behind one address can still mistype.
 */
export const PER_ADDRESS: ThrottleLimits = { max: 30, windowMs: 15 * 60 * 1000, maxKeys: 10_000 };

/** The refusal of a throttled sign-in (`too_many_attempts`), with when to try again. */
export class TooManyAttempts extends GatehouseError {
  /** Whole seconds, at least 1: what the answer's `Retry-After` says. */
  override readonly retryAfterSeconds: number;
  constructor(waitMs: number) {
    const seconds = Math.max(1, Math.ceil(waitMs / 1000));
    const minutes = Math.ceil(seconds / 60);
    super(
      "too_many_attempts",
      `Too many failed sign-ins: try again in ${minutes} minute${minutes === 1 ? "" : "s"}.`,
    );
    this.retryAfterSeconds = seconds;
  }

  // GatehouseError's brand check would match every GatehouseError; this one needs its field.
  static override [Symbol.hasInstance](value: unknown): boolean {
    return (
      GatehouseError[Symbol.hasInstance](value) &&
      (value as GatehouseError).code === "too_many_attempts" &&
      typeof (value as { retryAfterSeconds?: unknown }).retryAfterSeconds === "number"
    );
  }
}

/** A sign-in attempt that {@link LoginThrottle.begin} admitted. Settle it once; later calls do nothing. */
export interface SignInAttempt {
  /** The password was right: the name's attempts are forgiven, and this one is handed back to the address. */
  succeeded(): Promise<void>;
  /** The password was wrong, or the check could not answer: the attempt stays counted. */
  failed(): Promise<void>;
}

/** Expired rows deleted by one sweep; a full batch has the next admission sweep again. */
const SWEEP_BATCH = 500;

const iso = (ms: number) => new Date(ms).toISOString();

/** One kind of key (`name:` or `address:`) in `sign_in_counters`, with its limits. */
class Kind {
  constructor(
    readonly prefix: "name:" | "address:",
    readonly limits: ThrottleLimits,
  ) {}

  /** The keys of this kind: a range of the primary key (`;` follows `:`). */
  get keys(): SQL {
    const k = signInCounters.key;
    return and(gte(k, this.prefix), lt(k, `${this.prefix.slice(0, -1)};`)) as SQL;
  }

  /** Rows whose window has ended at `now`. */
  ended(now: number): SQL {
    return and(this.keys, lte(signInCounters.since, iso(now - this.limits.windowMs))) as SQL;
  }

  /** Rows whose window is open at `now`. */
  live(now: number): SQL {
    return and(this.keys, gt(signInCounters.since, iso(now - this.limits.windowMs))) as SQL;
  }
}

/**
 * Sign-in throttling shared by every replica on one store: a fixed-window count per account
 * name (case-insensitive, key `name:<name>`) and one per client address (see
 * {@link addressBucket}; key `address:<bucket>`), rows of `sign_in_counters`. An attempt is
 * counted when it is admitted, before its password check starts, by one conditional upsert per
 * key (a window that has ended restarts at 1; an open one grows only below `max`), so no more
 * than a bucket's `max` checks are ever started in one window, however many requests arrive at
 * once on however many replicas; a crash between admission and answer leaves the attempt
 * counted. The address is counted first; when the name then refuses, the address's attempt is
 * handed back. A right password forgives the name (its row is deleted, attempts still being
 * checked included) and hands its own attempt back to the address; a wrong one changes nothing.
 * A refused attempt throws {@link TooManyAttempts} and is counted nowhere. Windows follow each
 * replica's own clock: replicas whose clocks differ shift a window by that much.
 *
 * The table stays bounded without forgetting a lock or locking everyone out. Rows whose window
 * has ended are swept now and then by admissions (in batches). Beyond that, `maxKeys` per kind:
 * - A client address not tracked yet that finds its kind full is not counted by address (its
 *   name still is): the address bucket protects other people's accounts from one client, and a
 *   full table of locked addresses must not lock everyone else out.
 * - A name not tracked yet that finds its kind full makes room by forgetting the unlocked name
 *   whose window opened first (its few failures are forgiven, as the in-memory throttle forgot
 *   the least recently failed). A locked name is never forgotten (that would unlock it), and when
 *   every tracked name is locked the new name is counted anyway, past the bound: refusing it
 *   would lock out every person not tracked yet, which is the attack the bound must not enable.
 *   The rows past the bound are locked names, each bought with `max` admitted attempts that the
 *   address buckets limit.
 * Room is judged outside the counting statement (reading the whole kind inside it would make
 * every admission conflict with every other), so concurrent newcomers may pass the bound by as
 * many as arrive at once.
 */
export class LoginThrottle {
  private readonly names: Kind;
  private readonly addresses: Kind;
  /** When this replica sweeps ended windows next (ms; 0: at the next admission). */
  private sweepAt = 0;

  private readonly onRefused: ((reason: "bad_credentials" | "throttled") => void) | undefined;

  /**
   * @param db the store every replica shares.
   * @param limits per name (default {@link PER_NAME}) and per address (default {@link PER_ADDRESS});
   *   `onRefused` hears each attempt refused here: throttled, or settled as failed (metrics; must not throw).
   */
  constructor(
    private readonly db: Db,
    limits: {
      perName?: Partial<ThrottleLimits>;
      perAddress?: Partial<ThrottleLimits>;
      onRefused?: (reason: "bad_credentials" | "throttled") => void;
    } = {},
  ) {
    this.names = new Kind("name:", { ...PER_NAME, ...limits.perName });
    this.addresses = new Kind("address:", { ...PER_ADDRESS, ...limits.perAddress });
    this.onRefused = limits.onRefused;
  }

  /**
   * Admits one attempt and counts it, or throws {@link TooManyAttempts} without counting
   * anything. `address` null (no edge told us, as under `next dev`): per name only.
   */
  async begin(who: { name: string; address: string | null }, now = Date.now()): Promise<SignInAttempt> {
    try {
      return await this.admit(who, now);
    } catch (err) {
      if (err instanceof TooManyAttempts) this.onRefused?.("throttled");
      throw err;
    }
  }

  private async admit(who: { name: string; address: string | null }, now: number): Promise<SignInAttempt> {
    const name = `${this.names.prefix}${who.name.toLowerCase()}`;
    const address = who.address === null ? null : `${this.addresses.prefix}${addressBucket(who.address)}`;
    await this.sweep(now);
    // An address that finds no room goes uncounted (see above); a name never does.
    const byAddress = address !== null && (await this.hasRoom(this.addresses, address, now)) ? address : null;
    const addressSince = byAddress === null ? null : await this.take(this.addresses, byAddress, now);
    if (!(await this.hasRoom(this.names, name, now))) await this.makeRoom(this.names, now);
    try {
      await this.take(this.names, name, now);
    } catch (err) {
      if (byAddress !== null && addressSince !== null) await this.handBack(byAddress, addressSince);
      throw err;
    }
    let settled = false;
    return {
      succeeded: async () => {
        if (settled) return;
        settled = true;
        await this.db.delete(signInCounters).where(eq(signInCounters.key, name));
        if (byAddress !== null && addressSince !== null) await this.handBack(byAddress, addressSince);
      },
      // Counted when admitted: a failure leaves the counts as they are.
      failed: async () => {
        if (settled) return;
        settled = true;
        this.onRefused?.("bad_credentials");
      },
    };
  }

  /**
   * Forgets `name`'s sign-in attempts (case-insensitive) on every replica, as a right password
   * would: an owner reset its password, so the person may sign in with the new one at once.
   * Client addresses keep their counts (they protect everyone else's accounts from one client).
   */
  async forget(name: string): Promise<void> {
    await this.db
      .delete(signInCounters)
      .where(eq(signInCounters.key, `${this.names.prefix}${name.toLowerCase()}`));
  }

  /** How many names and addresses have rows, ended windows not yet swept included (for tests). */
  async size(): Promise<{ names: number; addresses: number }> {
    const tally = async (kind: Kind) =>
      (await first(this.db.select({ n: count() }).from(signInCounters).where(kind.keys)))?.n ?? 0;
    return { names: await tally(this.names), addresses: await tally(this.addresses) };
  }

  /**
   * Counts one attempt for `key` and answers its window's start, or throws
   * {@link TooManyAttempts}. One statement: concurrent ones on any replica queue on the row
   * (PostgreSQL re-reads it under the row lock; SQLite runs one at a time), so the count never
   * passes `max`. Outside any transaction on purpose: a SERIALIZABLE one would fail and retry
   * for every concurrent attempt at the same key instead of waiting its turn.
   */
  private async take(kind: Kind, key: string, now: number): Promise<string> {
    const { since, attempts } = signInCounters;
    const ended = lte(since, iso(now - kind.limits.windowMs));
    const row = await first(
      this.db
        .insert(signInCounters)
        .values({ key, since: iso(now), attempts: 1 })
        .onConflictDoUpdate({
          target: signInCounters.key,
          set: {
            since: sql`CASE WHEN ${ended} THEN ${iso(now)} ELSE ${since} END`,
            attempts: sql`CASE WHEN ${ended} THEN 1 ELSE ${attempts} + 1 END`,
          },
          setWhere: or(ended, lt(attempts, kind.limits.max)),
        })
        .returning({ since }),
    );
    if (row) return row.since;
    await this.refuseIfLocked(kind, key, now);
    // Unlocked again since the statement ran (a window ended, a right password): try once more.
    return this.take(kind, key, now);
  }

  /** Throws {@link TooManyAttempts} when `key`'s open window has used up its `max`. */
  private async refuseIfLocked(kind: Kind, key: string, now: number): Promise<void> {
    const row = await first(
      this.db
        .select({ since: signInCounters.since, attempts: signInCounters.attempts })
        .from(signInCounters)
        .where(eq(signInCounters.key, key)),
    );
    if (!row || row.attempts < kind.limits.max) return;
    const until = Date.parse(row.since) + kind.limits.windowMs;
    if (until > now) throw new TooManyAttempts(until - now);
  }

  /** Takes one attempt back from `key`, if its window is still the one it was counted in. */
  private async handBack(key: string, since: string): Promise<void> {
    const c = signInCounters;
    await this.db
      .update(c)
      .set({ attempts: sql`${c.attempts} - 1` })
      .where(and(eq(c.key, key), eq(c.since, since), gt(c.attempts, 0)));
  }

  /** Whether `key` is tracked, or its kind has fewer than `maxKeys` open windows. */
  private async hasRoom(kind: Kind, key: string, now: number): Promise<boolean> {
    const c = signInCounters;
    if (await first(this.db.select({ key: c.key }).from(c).where(eq(c.key, key)))) return true;
    // Counted up to the bound only: a full kind costs no more to ask than one at its bound.
    const open = this.db.select({ key: c.key }).from(c).where(kind.live(now)).limit(kind.limits.maxKeys);
    const [row] = await this.db.select({ n: count() }).from(open.as("open"));
    return (row?.n ?? 0) < kind.limits.maxKeys;
  }

  /** Forgets the unlocked key of `kind` whose window opened first, if there is one. */
  private async makeRoom(kind: Kind, now: number): Promise<void> {
    const c = signInCounters;
    const unlocked = and(kind.keys, or(kind.ended(now), lt(c.attempts, kind.limits.max)));
    const oldest = this.db.select({ key: c.key }).from(c).where(unlocked).orderBy(c.since, c.key).limit(1);
    // The condition again on the row itself: it may have been locked since it was chosen.
    await this.db.delete(c).where(and(inArray(c.key, oldest), unlocked));
  }

  /**
   * Deletes rows whose window has ended, a batch at a time: at most once per fifteenth of the
   * shorter window on this replica, or at each admission while batches come back full.
   */
  private async sweep(now: number): Promise<void> {
    if (now < this.sweepAt) return;
    const c = signInCounters;
    const ended = or(this.names.ended(now), this.addresses.ended(now));
    const batch = this.db.select({ key: c.key }).from(c).where(ended).limit(SWEEP_BATCH);
    const gone = await this.db
      .delete(c)
      .where(and(inArray(c.key, batch), ended))
      .returning({ key: c.key });
    const every = Math.min(this.names.limits.windowMs, this.addresses.limits.windowMs) / 15;
    this.sweepAt = gone.length === SWEEP_BATCH ? now : now + every;
  }
}

/**
 * The bucket a client address counts in: IPv4 as it is (an IPv4-mapped IPv6 address as its
 * IPv4), IPv6 by its /64, the block one subscriber usually gets whole, so hopping between
 * addresses of one network gains nothing. Anything else is its own bucket.
 */
export function addressBucket(address: string): string {
  const ip = address.trim().toLowerCase().replace(/%.*$/, "");
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(ip);
  if (mapped?.[1]) return mapped[1];
  if (!isIPv6(ip)) return ip;
  const [head = "", tail] = ip.split("::");
  // An embedded IPv4 tail fills the last two groups.
  const groups = (s: string) =>
    s === "" ? [] : s.split(":").flatMap((g) => (g.includes(".") ? ["0", "0"] : [g]));
  const h = groups(head);
  const t = tail === undefined ? [] : groups(tail);
  const all = [...h, ...Array<string>(Math.max(0, 8 - h.length - t.length)).fill("0"), ...t];
  return `${all
    .slice(0, 4)
    .map((g) => Number.parseInt(g, 16).toString(16))
    .join(":")}::/64`;
}
