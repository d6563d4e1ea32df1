import "server-only";
import { isIPv6 } from "node:net";
import type { UserView } from "@/lib/api-types";
import { GatehouseError } from "@/lib/errors";
import type { Db } from "../store/db";
import { sessionIdFrom, sessionUser } from "./sessions";
import { tokenFromSecret } from "./tokens";

/** Who may use a route. `reviewer` is also satisfied by an owner (owners may do everything). */
export type Access = "public" | "owner" | "reviewer" | "agent";

export type Principal =
  | { kind: "user"; user: UserView; via: "cookie" }
  | { kind: "agent"; token: { id: number; name: string }; via: "bearer" };

/** The requester's display name, as recorded on calls and audit rows. */
export function principalName(p: Principal): string {
  return p.kind === "user" ? p.user.name : p.token.name;
}

/**
 * Identifies the requester: a `Bearer` token (agents) or the session cookie (people). A request
 * that presents a bearer token is judged by that token alone, never by a cookie beside it.
 * `secure`: the request was served over https (`isSecure` in ./signin; from headers alone,
 * `forwardedHttps`), which names the one session cookie read (`sessionIdFrom` in ./sessions).
 */
export async function authenticate(db: Db, headers: Headers, secure: boolean): Promise<Principal | null> {
  const authz = headers.get("authorization")?.trim() ?? "";
  // Only the Bearer scheme is ours: a proxy's Basic credentials must not hide the session cookie.
  const bearer = /^Bearer\s+(\S+)$/i.exec(authz);
  if (bearer || /^Bearer\b/i.test(authz)) {
    const token = bearer?.[1] ? await tokenFromSecret(db, bearer[1]) : null;
    return token ? { kind: "agent", token, via: "bearer" } : null;
  }
  const sid = sessionIdFrom(headers.get("cookie"), secure);
  if (!sid) return null;
  const user = await sessionUser(db, sid);
  return user ? { kind: "user", user, via: "cookie" } : null;
}

export function allows(p: Principal, access: readonly Access[]): boolean {
  return access.some((a) => {
    switch (a) {
      case "public":
        return true;
      case "agent":
        return p.kind === "agent";
      case "owner":
        return p.kind === "user" && p.user.roles.includes("owner");
      case "reviewer":
        return p.kind === "user" && (p.user.roles.includes("reviewer") || p.user.roles.includes("owner"));
    }
    return false;
  });
}

const SAFE_METHODS = new Set(["GET", "HEAD", "OPTIONS"]);

/**
 * The Origin check for state-changing requests. Browsers always send `Origin` on cross-site and
 * same-site POSTs, so a cookie-borne or anonymous state change without a matching Origin is
 * refused. A bearer request carries no ambient credential, so a missing Origin is accepted
 * there (agents are not browsers), but a present one must still match.
 *
 * The origins accepted are the request's own (`scheme://Host`) and `publicOrigin`; `route()`
 * has refused a Host off the allow-list before this runs, so both are on that list. The
 * config's `agentEndpoint.allowedOrigins` are deliberately not accepted here: they let other
 * pages reach `/mcp`, whose bearer tokens are never ambient, not act with a person's cookie
 * (a page on another port of the same name is same-site and would carry it).
 *
 * @param publicOrigin `GATEHOUSE_PUBLIC_ORIGIN` when Gatehouse sits behind a proxy; otherwise
 *   the request's own `Host` decides.
 */
export function checkOrigin(
  method: string,
  headers: Headers,
  requestUrl: string,
  viaBearer: boolean,
  publicOrigin?: string,
): void {
  if (SAFE_METHODS.has(method.toUpperCase())) return;
  const origin = headers.get("origin");
  if (origin === null) {
    if (viaBearer) return;
    throw new GatehouseError(
      "bad_origin",
      "state-changing requests from a browser must carry an Origin header",
    );
  }
  const expected = new Set<string>();
  if (publicOrigin) expected.add(publicOrigin.replace(/\/$/, ""));
  const host = headers.get("host");
  const proto = new URL(requestUrl).protocol;
  if (host) expected.add(`${proto}//${host}`);
  if (!expected.has(origin)) {
    throw new GatehouseError("bad_origin", `requests from origin ${JSON.stringify(origin)} are not accepted`);
  }
}

/** The limits of one kind of sign-in bucket. */
export interface ThrottleLimits {
  /** Attempts per key that may be failed or still checking within one window. */
  max: number;
  /** The window's length in ms; it opens with the key's first counted attempt. */
  windowMs: number;
  /** Most keys tracked at once. */
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
  readonly retryAfterSeconds: number;
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
  /** The password was right: the name's failures are forgiven (the address keeps its own). */
  succeeded(): void;
  /** The password was wrong, or the check could not answer: the attempt stays counted. */
  failed(now?: number): void;
}

interface Counter {
  /** When the current window opened. */
  since: number;
  /** Failed attempts in that window. */
  failures: number;
  /** Admitted attempts whose password check has not answered yet. */
  inFlight: number;
}

/** Fixed-window counters for one kind of key. */
class Bucket {
  /** Least recently failed first: a failure moves its key to the end. */
  private readonly counters = new Map<string, Counter>();

  constructor(private readonly limits: ThrottleLimits) {}

  get size(): number {
    return this.counters.size;
  }

  /** When `key` may be tried again (ms), or null when an attempt may start now. */
  blockedUntil(key: string, now: number): number | null {
    const c = this.counters.get(key);
    if (!c) return null;
    const live = now - c.since < this.limits.windowMs;
    if ((live ? c.failures : 0) + c.inFlight < this.limits.max) return null;
    // Checks still in flight answer within a second or so; failures wait for the window's end.
    return Math.max(live ? c.since + this.limits.windowMs : 0, now + 1000);
  }

  /**
   * Whether `key` is tracked or can be: a full map first forgets expired windows, then the least
   * recently failed key that is neither locked nor being checked. Locked keys are never
   * forgotten, so false means every tracked key must be kept.
   */
  hasRoom(key: string, now: number): boolean {
    if (this.counters.has(key) || this.counters.size < this.limits.maxKeys) return true;
    const { max, windowMs } = this.limits;
    // All expired windows at once, so the scan is paid for by many additions.
    for (const [k, c] of this.counters)
      if (c.inFlight === 0 && now - c.since >= windowMs) this.counters.delete(k);
    if (this.counters.size < this.limits.maxKeys) return true;
    for (const [k, c] of this.counters) {
      if (c.inFlight === 0 && c.failures < max) {
        this.counters.delete(k);
        return true;
      }
    }
    return false;
  }

  /** When a full map will next have room: the soonest window's end, or a check's answer. */
  roomAt(now: number): number {
    let soonest = Number.POSITIVE_INFINITY;
    for (const c of this.counters.values()) {
      soonest = Math.min(soonest, c.inFlight > 0 ? now : c.since + this.limits.windowMs);
    }
    return Math.max(soonest, now + 1000);
  }

  /** Counts an attempt for `key` (there must be room): it is in flight until settled. */
  take(key: string, now: number): Counter {
    let c = this.counters.get(key);
    if (!c) {
      c = { since: now, failures: 0, inFlight: 0 };
      this.counters.set(key, c);
    } else if (now - c.since >= this.limits.windowMs) {
      c.since = now;
      c.failures = 0;
    }
    c.inFlight += 1;
    return c;
  }

  // A counter with a check in flight is never removed (hasRoom skips it, succeed keeps it), so
  // `c` is still the map's entry for `key` when its attempt settles.

  fail(key: string, c: Counter, now: number): void {
    c.inFlight -= 1;
    if (now - c.since >= this.limits.windowMs) {
      c.since = now;
      c.failures = 0;
    }
    c.failures += 1;
    this.counters.delete(key);
    this.counters.set(key, c);
  }

  succeed(key: string, c: Counter, forgive: boolean): void {
    c.inFlight -= 1;
    if (forgive) c.failures = 0;
    if (c.failures === 0 && c.inFlight === 0) this.counters.delete(key);
  }
}

/**
 * Sign-in throttling: a fixed-window bucket per account name (case-insensitive) and one per
 * client address (see {@link addressBucket}). An attempt is counted when it is admitted, before
 * its password check starts, so no more than a bucket's `max` checks are ever running or done
 * in one window, however many requests arrive at once; a right password then forgives the
 * name's failures (not the address's). An attempt either bucket's allowance is used up for is
 * refused with {@link TooManyAttempts}.
 *
 * Memory is bounded without forgetting a lock: a full map forgets expired windows, then the
 * least recently failed unlocked key. When every tracked name is locked (or being checked), a
 * name not tracked yet is refused until a window ends: forgetting any would unlock it. A client
 * address that finds no room is not counted by address (its name still is): the address bucket
 * protects other people's accounts from one client, so an attacker holding 10,000 locked
 * addresses must not lock everyone else out with them.
 */
export class LoginThrottle {
  private readonly names: Bucket;
  private readonly addresses: Bucket;

  /** @param limits per name (default {@link PER_NAME}) and per address (default {@link PER_ADDRESS}). */
  constructor(limits: { perName?: Partial<ThrottleLimits>; perAddress?: Partial<ThrottleLimits> } = {}) {
    this.names = new Bucket({ ...PER_NAME, ...limits.perName });
    this.addresses = new Bucket({ ...PER_ADDRESS, ...limits.perAddress });
  }

  /**
   * Admits one attempt and counts it, synchronously, or throws {@link TooManyAttempts} without
   * counting anything. `address` null (no edge told us, as under `next dev`): per name only.
   */
  begin(who: { name: string; address: string | null }, now = Date.now()): SignInAttempt {
    const name = who.name.toLowerCase();
    const address = who.address === null ? null : addressBucket(who.address);
    const nameUntil = this.names.blockedUntil(name, now);
    const addressUntil = address === null ? null : this.addresses.blockedUntil(address, now);
    const until = Math.max(nameUntil ?? 0, addressUntil ?? 0);
    if (until > 0) throw new TooManyAttempts(until - now);
    if (!this.names.hasRoom(name, now)) throw new TooManyAttempts(this.names.roomAt(now) - now);
    // An address that finds no room goes uncounted (see above); a name never does.
    const byAddress = address !== null && this.addresses.hasRoom(address, now) ? address : null;
    const n = this.names.take(name, now);
    const a = byAddress === null ? null : { key: byAddress, counter: this.addresses.take(byAddress, now) };
    let settled = false;
    return {
      succeeded: () => {
        if (settled) return;
        settled = true;
        this.names.succeed(name, n, true);
        if (a) this.addresses.succeed(a.key, a.counter, false);
      },
      failed: (at = Date.now()) => {
        if (settled) return;
        settled = true;
        this.names.fail(name, n, at);
        if (a) this.addresses.fail(a.key, a.counter, at);
      },
    };
  }

  /**
   * Forgets `name`'s failed sign-ins (case-insensitive), as a right password would: an owner
   * reset its password, so the person may sign in with the new one at once. Checks still in
   * flight stay counted until they answer; client addresses keep their counts (they protect
   * everyone else's accounts from one client).
   */
  forget(name: string, now = Date.now()): void {
    const key = name.toLowerCase();
    // Taken and settled as a success: the one path that clears a name's failures and frees its entry.
    this.names.succeed(key, this.names.take(key, now), true);
  }

  /** How many names and addresses are tracked (for tests). */
  get size(): { names: number; addresses: number } {
    return { names: this.names.size, addresses: this.addresses.size };
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
