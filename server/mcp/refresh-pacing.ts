import "server-only";

// When a server's tool list is re-listed: debounced, and paced by a token bucket so that a server
// sending `notifications/tools/list_changed` in a loop cannot make Gatehouse re-list (and write
// the catalogue, and wake every open browser) as fast as it likes.

/** Coalesces bursts of `notifications/tools/list_changed`. */
export const REFRESH_DEBOUNCE_MS = 300;

/**
 * The pace of re-lists per server: a bucket of `burst` re-lists, refilled by one every
 * `intervalMs`. Defaults: 3 at once after a quiet spell, then at most one every 10 s (6 a
 * minute), whatever the server sends. The first listing of each connection is not counted.
 */
export const REFRESH_PACING = { burst: 3, intervalMs: 10_000 } as const;

export interface RefreshLimits {
  burst: number;
  intervalMs: number;
}

/** Time as the pacing sees it; tests pass a clock they move themselves. */
export interface PacingClock {
  now(): number;
  /** Runs `fn` once after `ms`; the returned function cancels it. Never keeps the process up. */
  after(ms: number, fn: () => void): () => void;
}

/** `Date.now` and unref'd `setTimeout`, looked up at each use (so fake timers apply). */
export const systemClock: PacingClock = {
  now: () => Date.now(),
  after(ms, fn) {
    const timer = setTimeout(fn, ms);
    timer.unref();
    return () => clearTimeout(timer);
  },
};

/** The words on a server's status while its re-lists are being paced. */
export function pacingNote(limits: RefreshLimits): string {
  const perMinute = Math.round((60_000 / limits.intervalMs) * 10) / 10;
  const every = Math.round(limits.intervalMs / 100) / 10;
  return `tool list changes arrive faster than ${perMinute} per minute; re-listing at most every ${every} s`;
}

export interface RefreshPacingOptions {
  /**
   * One re-list, settled when it is done; must not reject. Never two at once: one that falls due
   * while the last is under way starts when it ends (that one may have listed too early to see
   * what was asked for since).
   */
  run(): Promise<void>;
  /** The note appeared (a string) or went away (null). */
  onNote(note: string | null): void;
  /** Default {@link REFRESH_PACING}. */
  limits?: RefreshLimits | undefined;
  /** Default {@link REFRESH_DEBOUNCE_MS}. */
  debounceMs?: number | undefined;
  /** Default {@link systemClock}. */
  clock?: PacingClock | undefined;
  /**
   * Whether a periodic re-list is due when its timer fires (default always): false while the
   * last listing is still fresh by the server's own cache hint. Other requests are not asked.
   */
  periodicDue?: (() => boolean) | undefined;
}

/**
 * Decides when a requested re-list runs. Requests while one is scheduled join it (it lists what
 * the server has by then). A re-list runs {@link REFRESH_DEBOUNCE_MS} after its first request
 * while the bucket holds a token, otherwise once the next token is due; then the limit "bites",
 * and {@link note} says so until the bucket has had time to fill again with no request kept
 * waiting (`burst × intervalMs` after the last re-list that had to wait).
 */
export class RefreshPacing {
  private readonly limits: RefreshLimits;
  private readonly debounceMs: number;
  private readonly clock: PacingClock;
  private tokens: number;
  private refilledAt: number;
  private cancelRun: (() => void) | null = null;
  private cancelNoteEnd: (() => void) | null = null;
  private periodic: NodeJS.Timeout | null = null;
  private currentNote: string | null = null;
  private running = false;
  private again = false;

  constructor(private readonly opts: RefreshPacingOptions) {
    this.limits = opts.limits ?? REFRESH_PACING;
    this.debounceMs = opts.debounceMs ?? REFRESH_DEBOUNCE_MS;
    this.clock = opts.clock ?? systemClock;
    this.tokens = this.limits.burst;
    this.refilledAt = this.clock.now();
  }

  /** Set while re-lists are held back by the limit; null otherwise. */
  get note(): string | null {
    return this.currentNote;
  }

  /** Asks for a re-list (a `list_changed` notification, the periodic timer, a connection check). */
  request(): void {
    if (this.cancelRun) return;
    const now = this.clock.now();
    this.refill(now);
    const wait = this.tokens >= 1 ? 0 : Math.ceil((1 - this.tokens) * this.limits.intervalMs);
    if (wait > this.debounceMs) this.limited(now + wait);
    this.cancelRun = this.clock.after(Math.max(this.debounceMs, wait), () => {
      this.cancelRun = null;
      this.refill(this.clock.now());
      this.tokens = Math.max(0, this.tokens - 1);
      this.go();
    });
  }

  /** Runs a re-list now, or once the one under way has ended (however many fall due meanwhile). */
  private go(): void {
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = true;
    void this.opts.run().finally(() => {
      this.running = false;
      if (!this.again) return;
      this.again = false;
      this.go();
    });
  }

  /** Requests a re-list every `ms` (0: never), on an unref'd interval; paced like any request. */
  startPeriodic(ms: number): void {
    if (ms <= 0 || this.periodic) return;
    this.periodic = setInterval(() => {
      if (this.opts.periodicDue?.() ?? true) this.request();
    }, ms);
    this.periodic.unref();
  }

  /** Cancels what is scheduled; the note stays as it was (the supervisor is closing). */
  stop(): void {
    this.cancelRun?.();
    this.cancelRun = null;
    this.cancelNoteEnd?.();
    this.cancelNoteEnd = null;
    if (this.periodic) clearInterval(this.periodic);
    this.periodic = null;
  }

  private refill(now: number): void {
    const earned = (now - this.refilledAt) / this.limits.intervalMs;
    this.tokens = Math.min(this.limits.burst, this.tokens + Math.max(0, earned));
    this.refilledAt = now;
  }

  /** A re-list must wait until `runAt`: show the note until the bucket is full again after it. */
  private limited(runAt: number): void {
    this.cancelNoteEnd?.();
    const until = runAt + this.limits.burst * this.limits.intervalMs - this.clock.now();
    this.cancelNoteEnd = this.clock.after(until, () => {
      this.cancelNoteEnd = null;
      this.currentNote = null;
      this.opts.onNote(null);
    });
    if (this.currentNote === null) {
      this.currentNote = pacingNote(this.limits);
      this.opts.onNote(this.currentNote);
    }
  }
}
