import "server-only";

/**
 * Argument checks that overran their deadline, counted per requester. Each overrun holds the main
 * thread for the whole deadline, so a requester who keeps sending arguments that are costly to
 * check must be stopped; but the cost may as well be the schema's (a tool server's `pattern`), and
 * one agent's slow argument must not make a tool unusable for everyone until a restart. So
 * overruns are counted per requester in a sliding window and forgotten as the window passes.
 */

export interface OverrunLimits {
  /** Overruns within {@link windowMs} after which the requester's checks are refused. */
  max: number;
  windowMs: number;
  /**
   * Requesters tracked at once. Past it, requesters whose overruns all expired are forgotten
   * first, then one not refused, then the refused one whose last overrun is oldest (requesters
   * are tokens and people, whom owners create: far fewer than this).
   */
  maxKeys: number;
}

/** 3 overruns in 10 minutes: at most 3 s of a held main thread per requester per 10 minutes. */
export const OVERRUN_LIMITS: Readonly<OverrunLimits> = { max: 3, windowMs: 10 * 60 * 1000, maxKeys: 10_000 };

export class OverrunLedger {
  /** Per requester, the times (ms) of its overruns still within the window, oldest first. */
  private readonly times = new Map<string, number[]>();

  constructor(private readonly limits: OverrunLimits = OVERRUN_LIMITS) {}

  /** Milliseconds until `key`'s checks are accepted again at `now`; 0 when they are now. */
  refusedFor(key: string, now: number): number {
    const live = this.live(key, now);
    if (live.length < this.limits.max) return 0;
    // Refused until enough of them expire to leave fewer than `max`.
    const freeing = live[live.length - this.limits.max];
    return freeing === undefined ? 0 : freeing + this.limits.windowMs - now;
  }

  /** Records an overrun of `key` at `now`. */
  record(key: string, now: number): void {
    const live = this.live(key, now);
    live.push(now);
    // Most recently overran last, so the first entry is the one to forget when full.
    this.times.delete(key);
    if (this.times.size >= this.limits.maxKeys) this.makeRoom(now);
    this.times.set(key, live.slice(-this.limits.max));
  }

  private live(key: string, now: number): number[] {
    const cutoff = now - this.limits.windowMs;
    return (this.times.get(key) ?? []).filter((t) => t > cutoff);
  }

  /** Forgets every requester whose overruns expired; if none did, one not refused; else the oldest. */
  private makeRoom(now: number): void {
    const cutoff = now - this.limits.windowMs;
    for (const [key, times] of this.times) {
      if (times.every((t) => t <= cutoff)) this.times.delete(key);
    }
    if (this.times.size < this.limits.maxKeys) return;
    for (const [key, times] of this.times) {
      if (times.filter((t) => t > cutoff).length < this.limits.max) {
        this.times.delete(key);
        return;
      }
    }
    const oldest = this.times.keys().next();
    if (!oldest.done) this.times.delete(oldest.value);
  }
}
