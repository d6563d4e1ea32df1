import "server-only";
import { EventEmitter } from "node:events";
import type { EventBus } from "../events";
import type { Logger } from "../log";
import type { Db } from "../store/db";
import { claimDelivery, releaseClaims, releaseDelivery } from "./claims";
import { digestFinished, digestNow, isDigestRow } from "./digests";
import {
  callStatusNow,
  type DeliveryRow,
  destinationOf,
  dueDeliveries,
  nextQueued,
  pruneFinished,
  recordAttempt,
} from "./outbox";
import { SEND_TIMEOUT_MS, type Sender } from "./webhook";

/** Tries of one message at most (PRODUCT.md §10). */
export const MAX_ATTEMPTS = 5;
/** Messages in flight at most, over all destinations. */
export const MAX_IN_FLIGHT = 16;
/**
 * Messages in flight at most to one destination (a webhook, or the SMTP server: see
 * `destinationOf`): a receiver that never answers holds only its own slots, for
 * {@link SEND_TIMEOUT_MS} each, never the others'.
 */
export const MAX_PER_DESTINATION = 2;
/**
 * How long a row whose try could not be recorded (a busy or failing store) waits before it is
 * tried again: sent, but not known to be, it must not be re-sent at once, over and over.
 */
const UNRECORDED_HOLD_MS = 30_000;
/**
 * How long a claimed row's lease outlasts the try's own deadline: a process that stops
 * answering mid-try (or dies) leaves the row to be taken again once the lease is over.
 */
const CLAIM_MARGIN_MS = 30_000;
/** The first retry's delay; each next one doubles (about 1 s, 2 s, 4 s, 8 s). */
export const RETRY_BASE_MS = 1_000;

/**
 * The wait before try `attempts + 1`, after `attempts` failed ones: `base * 2^(attempts-1)`,
 * spread by ±20 % so that a receiver that was down is not hit by every message at one instant.
 */
export function retryDelayMs(
  attempts: number,
  random: () => number = Math.random,
  base = RETRY_BASE_MS,
): number {
  const exact = base * 2 ** Math.max(0, attempts - 1);
  return Math.round(exact * (0.8 + 0.4 * random()));
}

/** Requesters whose last launch is remembered, at most (see `Dispatcher.servedAt`). */
const MAX_SERVED_KEPT = 10_000;

function servedKey(row: DeliveryRow): string {
  return `${destinationOf(row)}\n${row.requester ?? ""}`;
}

/** What one recorded try looks like to a listener (the delivery log's live feed, tests). */
export interface DeliverySettled {
  id: number;
  deliveryId: string;
  channel: "webhook" | "email";
  target: string;
  event: string;
  callId: string | null;
  status: "queued" | "delivered" | "failed";
  attempts: number;
  lastError: string | null;
}

export interface DispatcherOptions {
  db: Db;
  bus: EventBus;
  log: Logger;
  /** The sender of a row's destination; null when that destination is no longer configured. */
  senderFor(row: DeliveryRow): Sender | null;
  /** Deadline of one try. Default {@link SEND_TIMEOUT_MS}. */
  timeoutMs?: number;
  /** Default {@link RETRY_BASE_MS}. */
  retryBaseMs?: number;
  random?: () => number;
  /**
   * Whether this process serves the store alone (its lock), so that claims found at start are
   * those of a process that died mid-try, ended at the first look so their rows go out at once.
   * Default true; false leaves them to run out (processes sending side by side).
   */
  soleSender?: boolean;
  /**
   * Also look for due rows this often (ms), for processes sending side by side: rows another
   * replica queued and could not send (it died, its claim ran out) are woken by nothing here.
   * Default: never; a sole sender learns of every row it must send.
   */
  lookEveryMs?: number;
  /** The replica this dispatcher sends for, written on each row it claims; default none. */
  replica?: string;
}

/**
 * Sends what the outbox holds, off the call path. Woken after a commit by the bus (the first
 * event after {@link queued}: the rows written with it are visible by then), by a timer set for the next
 * due retry (unref'd: it never keeps the process up), and at start, which sends what a crash left
 * queued. It never polls: with nothing due and nothing to retry, no timer is set.
 *
 * Due rows go oldest first, at most {@link MAX_IN_FLIGHT} at a time and
 * {@link MAX_PER_DESTINATION} to one destination, each try within the row's
 * deadline and {@link SEND_TIMEOUT_MS}. Each try first takes its row with a conditional update
 * (`claimDelivery`: a lease, the row's `claimedUntil`), so dispatchers of several processes
 * on one store never send the same row at once; a row another took is left alone. A failed try is retried with backoff up to
 * {@link MAX_ATTEMPTS} tries, never after the row's deadline; then the row is `failed` (at once
 * when the guard refused the destination: a retry would be refused too). A row
 * interrupted by a stop is given back, `queued` and due, and is sent again at the next start;
 * one interrupted by a crash is too, at the next start (or once its lease is over, when
 * others send beside this process): the receiver may see it twice,
 * with the same `deliveryId`, but never zero times.
 */
export class Dispatcher {
  private readonly inFlight = new Map<number, Promise<void>>();
  /** Tries in flight per destination (`destinationOf`). */
  private readonly busy = new Map<string, number>();
  /**
   * When each destination's requester (`servedKey`) last had a try launched, as a count of
   * launches: among due rows, the requester served longest ago goes first.
   */
  private readonly servedAt = new Map<string, number>();
  private launches = 0;
  /** Rows not to try before the time given (their last try could not be recorded). */
  private readonly heldUntil = new Map<number, number>();
  private readonly abort = new AbortController();
  private readonly emitter = new EventEmitter();
  private timer: NodeJS.Timeout | null = null;
  private looking: NodeJS.Timeout | null = null;
  private immediate: NodeJS.Immediate | null = null;
  /** The look at the outbox under way (one at a time); `again`: another was asked for meanwhile. */
  private pumping: Promise<void> | null = null;
  private again = false;
  private unsubscribe: (() => void) | null = null;
  private running = false;
  /** Rows were queued since the last look: the next bus event (their commit's) wakes the dispatcher. */
  private queuedSinceLook = false;
  private readonly timeoutMs: number;
  private readonly retryBaseMs: number;
  private readonly random: () => number;

  constructor(private readonly opts: DispatcherOptions) {
    this.timeoutMs = opts.timeoutMs ?? SEND_TIMEOUT_MS;
    this.retryBaseMs = opts.retryBaseMs ?? RETRY_BASE_MS;
    this.random = opts.random ?? Math.random;
    this.claimsLeft = opts.soleSender ?? true;
    this.emitter.setMaxListeners(0);
  }

  /** Whether the claims earlier processes left are still to be ended (the first look does it). */
  private claimsLeft: boolean;

  start(): void {
    if (this.running || this.abort.signal.aborted) return;
    this.running = true;
    // Only events that follow an enqueue wake it: a read-only call's events cost nothing here.
    this.unsubscribe = this.opts.bus.subscribe(() => {
      if (this.queuedSinceLook) this.wake();
    });
    if (this.opts.lookEveryMs !== undefined) {
      this.looking = setInterval(() => this.wake(), this.opts.lookEveryMs);
      this.looking.unref();
    }
    this.wake();
  }

  /**
   * Says rows are being queued (called inside the writer's transaction). Nothing is read yet:
   * they are visible once committed, and the commit's bus event wakes the dispatcher.
   */
  queued(): void {
    this.queuedSinceLook = true;
  }

  /** Looks for due rows on the next turn of the event loop (several wakes in one turn are one look). */
  wake(): void {
    if (!this.running || this.immediate) return;
    this.immediate = setImmediate(() => {
      this.immediate = null;
      if (this.pumping) {
        this.again = true;
        return;
      }
      this.pumping = this.pump().finally(() => {
        this.pumping = null;
        if (this.again) {
          this.again = false;
          this.wake();
        }
      });
    });
  }

  /** Listens to every recorded try; returns the unsubscribe function. */
  onSettled(listener: (d: DeliverySettled) => void): () => void {
    this.emitter.on("settled", listener);
    return () => this.emitter.off("settled", listener);
  }

  /**
   * Stops waking, aborts tries in flight (their rows are given back, queued) and waits for them
   * and for a look under way to end.
   */
  async stop(): Promise<void> {
    this.running = false;
    this.unsubscribe?.();
    if (this.immediate) clearImmediate(this.immediate);
    if (this.timer) clearTimeout(this.timer);
    if (this.looking) clearInterval(this.looking);
    this.looking = null;
    this.immediate = null;
    this.timer = null;
    this.abort.abort();
    await this.pumping;
    await Promise.allSettled([...this.inFlight.values()]);
  }

  private async pump(): Promise<void> {
    if (!this.running) return;
    this.queuedSinceLook = false;
    try {
      if (this.claimsLeft) {
        // Serving the store alone (its lock): every claim is one a process that died mid-try left.
        await releaseClaims(this.opts.db);
        this.claimsLeft = false;
      }
      this.releaseHolds();
      // Full destinations are left out in the query itself, so however long one's backlog, the
      // rows of the others are seen; a pass that launches nothing new ends the look.
      while (this.running && this.inFlight.size < MAX_IN_FLIGHT) {
        const skipIds = new Set([...this.inFlight.keys(), ...this.heldUntil.keys()]);
        const due = await dueDeliveries(
          this.opts.db,
          new Date().toISOString(),
          MAX_IN_FLIGHT + skipIds.size,
          this.fullDestinations(),
        );
        // Round robin by requester: the query gives every requester's oldest due rows first
        // (`dueDeliveries`), and of those, the requester served longest ago is served next.
        due.sort((a, b) => this.lastServed(a) - this.lastServed(b));
        let launched = 0;
        for (const row of due) {
          if (!this.running || this.inFlight.size >= MAX_IN_FLIGHT) break;
          if (skipIds.has(row.id) || !this.hasRoom(row)) continue;
          this.launch(row);
          launched++;
        }
        if (launched === 0) break;
      }
      // Every slot busy: the next try to end wakes the dispatcher again, so no timer is needed
      // (one set for a row already due would fire at once, again and again).
      if (!this.running || this.inFlight.size >= MAX_IN_FLIGHT) return;
      await this.scheduleNext();
    } catch (err) {
      if (!this.running) return;
      // A store that is busy now is tried again shortly; the rows stay queued.
      this.opts.log.error("reading the notification outbox failed", { error: String(err) });
      this.arm(this.retryBaseMs);
    }
  }

  /** Arms the timer for the earliest queued row not already in flight; none when nothing waits. */
  private async scheduleNext(): Promise<void> {
    // Rows waiting for a slot of their own destination are woken by that destination's tries
    // ending, not by a timer (which, for a row already due, would fire again and again).
    const skipIds = new Set([...this.inFlight.keys(), ...this.heldUntil.keys()]);
    const queued = await nextQueued(this.opts.db, skipIds.size + 1, this.fullDestinations());
    if (!this.running) return;
    const next = queued.find((r) => !skipIds.has(r.id));
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    const nextHold = Math.min(...this.heldUntil.values());
    const at = Math.min(next ? Date.parse(next.nextAttemptAt) : Number.POSITIVE_INFINITY, nextHold);
    if (!Number.isFinite(at)) return;
    this.arm(at - Date.now());
  }

  private arm(delayMs: number): void {
    if (this.timer) clearTimeout(this.timer);
    // setTimeout fires at once for anything above 2^31-1 ms; a retry is never that far anyway.
    this.timer = setTimeout(
      () => {
        this.timer = null;
        this.wake();
      },
      Math.min(Math.max(0, delayMs), 2 ** 31 - 1),
    );
    this.timer.unref();
  }

  private hasRoom(row: { channel: string; target: string }): boolean {
    return (this.busy.get(destinationOf(row)) ?? 0) < MAX_PER_DESTINATION;
  }

  private fullDestinations(): string[] {
    return [...this.busy].filter(([, n]) => n >= MAX_PER_DESTINATION).map(([d]) => d);
  }

  private releaseHolds(): void {
    const now = Date.now();
    for (const [id, until] of this.heldUntil) if (until <= now) this.heldUntil.delete(id);
  }

  private lastServed(row: DeliveryRow): number {
    return this.servedAt.get(servedKey(row)) ?? 0;
  }

  private launch(row: DeliveryRow): void {
    const destination = destinationOf(row);
    // Forgetting everyone now and then bounds the map; it costs one round of strict turns.
    if (this.servedAt.size >= MAX_SERVED_KEPT) this.servedAt.clear();
    this.servedAt.set(servedKey(row), ++this.launches);
    this.busy.set(destination, (this.busy.get(destination) ?? 0) + 1);
    const run = this.attempt(row)
      .catch((err: unknown) => {
        this.opts.log.error("recording a notification try failed", { id: row.id, error: String(err) });
        // The row is still queued and due: without a hold it would be sent again at once.
        this.heldUntil.set(row.id, Date.now() + UNRECORDED_HOLD_MS);
      })
      .finally(() => {
        this.inFlight.delete(row.id);
        const left = (this.busy.get(destination) ?? 1) - 1;
        if (left > 0) this.busy.set(destination, left);
        else this.busy.delete(destination);
        this.wake();
      });
    this.inFlight.set(row.id, run);
  }

  private async attempt(queued: DeliveryRow): Promise<void> {
    let row = queued;
    // Taken first, with a conditional update: a row another process took (or a row read before
    // its last try was recorded) is left alone.
    const claimedUntil = new Date(Date.now() + this.timeoutMs + CLAIM_MARGIN_MS).toISOString();
    if (!(await claimDelivery(this.opts.db, row, claimedUntil, this.opts.replica ?? null))) return;
    const claim = { row, claimedUntil };
    const deadline = row.deadline ? Date.parse(row.deadline) : Number.POSITIVE_INFINITY;
    const left = deadline - Date.now();
    const sender = this.opts.senderFor(row);
    if (!sender)
      return this.finish(claim, { status: "failed", lastStatus: null, lastError: "no longer configured" });
    // Asking for a decision already taken is noise: a call.pending message (first try or retry)
    // goes out only while its call still waits. A try already under way finishes as it will.
    const callNow =
      row.event === "call.pending" && row.callId ? await callStatusNow(this.opts.db, row.callId) : null;
    if (callNow !== null && callNow !== "pending") {
      return this.finish(claim, {
        status: "failed",
        lastStatus: row.lastStatus,
        lastError: `superseded: the call was ${callNow} before this was delivered`,
      });
    }
    if (isDigestRow(row)) {
      // A digest tells how many calls wait when it goes, not when it was queued.
      const now = await digestNow(this.opts.db, row);
      if (now.waiting === 0) {
        return this.finish(claim, {
          status: "failed",
          lastStatus: row.lastStatus,
          lastError: "superseded: no call of its requester waits any more",
        });
      }
      row = now.row;
    }
    if (left <= 0) {
      return this.finish(claim, {
        status: "failed",
        lastStatus: row.lastStatus,
        lastError: row.attempts === 0 ? "not sent before its deadline" : row.lastError,
      });
    }
    const signal = AbortSignal.any([this.abort.signal, AbortSignal.timeout(Math.min(this.timeoutMs, left))]);
    const outcome = await sender.send(row, signal);
    // Stopped mid-try: nothing is known of it; the row is given back, due for the next start.
    if (this.abort.signal.aborted) return releaseDelivery(this.opts.db, row.id, claimedUntil);
    const attempts = row.attempts + 1;
    if (outcome.ok) {
      return this.finish(claim, {
        status: "delivered",
        attempts,
        lastStatus: outcome.status,
        lastError: null,
      });
    }
    const nextAt = Date.now() + retryDelayMs(attempts, this.random, this.retryBaseMs);
    const giveUp = outcome.final === true || attempts >= MAX_ATTEMPTS || nextAt >= deadline;
    this.opts.log.warn(`notification ${giveUp ? "failed" : "try failed"}: ${outcome.error}`, {
      channel: row.channel,
      target: row.target,
      event: row.event,
      deliveryId: row.deliveryId,
      attempts,
    });
    await this.finish(claim, {
      status: giveUp ? "failed" : "queued",
      attempts,
      lastStatus: outcome.status,
      lastError: outcome.error,
      ...(giveUp ? {} : { nextAttemptAt: new Date(nextAt).toISOString() }),
    });
  }

  /** Records the try on the claimed row (not when the claim ran out and another took it). */
  private async finish(
    { row, claimedUntil }: { row: DeliveryRow; claimedUntil: string },
    record: {
      status: "queued" | "delivered" | "failed";
      attempts?: number;
      lastStatus: number | null;
      lastError: string | null;
      nextAttemptAt?: string;
    },
  ): Promise<void> {
    const attempts = record.attempts ?? row.attempts;
    const { db } = this.opts;
    if (!(await recordAttempt(db, row.id, { ...record, attempts }, claimedUntil))) {
      this.opts.log.warn("a notification try outlasted its claim: not recorded", {
        deliveryId: row.deliveryId,
      });
      return;
    }
    if (record.status !== "queued") {
      if (isDigestRow(row)) await digestFinished(db, row, record.status === "delivered");
      await pruneFinished(db, row.channel, row.target);
    }
    this.emitter.emit("settled", {
      id: row.id,
      deliveryId: row.deliveryId,
      channel: row.channel,
      target: row.target,
      event: row.event,
      callId: row.callId,
      status: record.status,
      attempts,
      lastError: record.lastError,
    } satisfies DeliverySettled);
  }
}
