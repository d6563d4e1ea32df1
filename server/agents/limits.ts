import "server-only";
import { GatehouseError } from "@/lib/errors";
import type { AgentLimitsConfig, ToolSetConfig } from "../config";
import type { Logger } from "../log";
import { writeAudit } from "../store/audit";
import type { Db } from "../store/db";
import type { CallRates } from "./rates";
import type { SetHolder } from "./tool-sets";

/** How long identical refusals are gathered into one audit row (ms). */
export const REFUSALS_GATHERED_MS = 60_000;

/**
 * Limits per agent token (PRODUCT.md §16): its set's `limits` over `agentLimits`. A person has
 * none. `callsPerMinute` is taken here, before the call is decided (before rules and grants);
 * `maxPendingCalls` is counted in the call's birth (calls/birth.ts), in the transaction that would
 * make it pending, so concurrent births of one token on any replica never pass it, and only a
 * call that would wait is refused: reads still run. `maxConcurrentCalls` is counted the same way,
 * over the token's `running` calls in the store (not in a replica's memory): a replica that dies
 * leaves its calls `running` until they are marked `interrupted`, so the count mends itself, and
 * every replica counts the same calls.
 *
 * Refusals by a limit store no call: they are audited as `agent.limited`, the first of a minute
 * at once, and how many more came in that minute when the next one comes after it, or at stop
 * (so an agent retrying in a loop writes one row a minute, not one a try).
 */
export class AgentLimits {
  /** Each set's limits over the defaults, resolved once. */
  private readonly bySet: Map<string, AgentLimitsConfig>;
  /** Per token and refusal code: when its minute began, and the refusals since its row. */
  private readonly tally = new Map<string, { actor: string; code: string; since: number; more: number }>();
  private readonly writes = new Set<Promise<void>>();

  constructor(
    private readonly deps: {
      db: Db;
      log: Logger;
      sets: readonly ToolSetConfig[];
      defaults: AgentLimitsConfig;
      rates: CallRates;
      /** The clock, in ms since the epoch (tests). Default `Date.now`. */
      now?: () => number;
    },
  ) {
    this.bySet = new Map(deps.sets.map((s) => [s.name, { ...deps.defaults, ...s.limits }]));
  }

  /** `who`'s limits (0: off); null for a person. */
  limitsOf(who: SetHolder): AgentLimitsConfig | null {
    if (who.kind !== "agent") return null;
    return (who.toolSet ? this.bySet.get(who.toolSet) : undefined) ?? this.deps.defaults;
  }

  /** Takes one call from `who`'s `callsPerMinute`, or throws `rate_limited` with when to try again. */
  async admit(who: SetHolder): Promise<void> {
    const perMinute = this.limitsOf(who)?.callsPerMinute ?? 0;
    if (perMinute === 0) return;
    const wait = await this.deps.rates.take(who.name, perMinute, this.now());
    if (wait === null) return;
    throw this.refused(
      who,
      new GatehouseError(
        "rate_limited",
        `this token may make ${perMinute} calls a minute; try again in ${wait} s`,
        { retryAfterSeconds: wait },
      ),
    );
  }

  /** `who`'s `maxPendingCalls` (0: none), which its call's birth enforces. */
  maxPendingOf(who: SetHolder): number {
    return this.limitsOf(who)?.maxPendingCalls ?? 0;
  }

  /** `who`'s `maxConcurrentCalls` (0: none), which its call's birth enforces. */
  maxConcurrentOf(who: SetHolder): number {
    return this.limitsOf(who)?.maxConcurrentCalls ?? 0;
  }

  /** The refusal of a call that would run beside `running` of `who`'s, its most; audited as any limit's. */
  concurrentRefusal(who: SetHolder, running: number): GatehouseError {
    return this.refused(
      who,
      new GatehouseError(
        "too_many_concurrent_calls",
        `this token has ${running} calls running, its most; try again once one has answered`,
        { retryAfterSeconds: 1 },
      ),
    );
  }

  /** The refusal of a call that would be `who`'s `pending`-th waiting one, audited as any limit's. */
  pendingRefusal(who: SetHolder, pending: number): GatehouseError {
    return this.refused(
      who,
      new GatehouseError(
        "too_many_pending",
        `this token has ${pending} calls waiting for a reviewer, its most; this one would wait too. Reads still run; try again once some are decided`,
        { retryAfterSeconds: 30 },
      ),
    );
  }

  /** Writes the counts still gathered (at stop). */
  async flush(): Promise<void> {
    for (const w of this.tally.values()) {
      if (w.more > 0) this.audit(w.actor, w.code, `${w.more} more in the minute from ${iso(w.since)}`);
    }
    this.tally.clear();
    await Promise.all([...this.writes]);
  }

  private refused(who: SetHolder, err: GatehouseError): GatehouseError {
    const key = `${who.name}\u0000${err.code}`;
    const now = this.now();
    const window = this.tally.get(key);
    if (window && now - window.since < REFUSALS_GATHERED_MS) {
      window.more++;
      return err;
    }
    this.tally.set(key, { actor: who.name, code: err.code, since: now, more: 0 });
    const before =
      window && window.more > 0 ? ` (and ${window.more} more in the minute from ${iso(window.since)})` : "";
    this.audit(who.name, err.code, `${err.message}${before}`);
    return err;
  }

  /** One `agent.limited` row, off the call's path (a failure is logged, never the call's). */
  private audit(actor: string, code: string, detail: string): void {
    const write = writeAudit(this.deps.db, { actor, action: "agent.limited", subject: code, detail })
      .catch((err: unknown) =>
        this.deps.log.warn(`agent ${actor}: a refusal could not be audited`, { error: String(err) }),
      )
      .finally(() => this.writes.delete(write));
    this.writes.add(write);
  }

  private now(): number {
    return (this.deps.now ?? Date.now)();
  }
}

const iso = (ms: number) => new Date(ms).toISOString();
