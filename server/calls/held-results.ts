import "server-only";
import { and, eq, gt, lte } from "drizzle-orm";
import type { CallView } from "@/lib/api-types";
import { type Db, first } from "../store/db";
import { heldResults } from "../store/schema";

/** How long the full result of a held call stays readable for the agent waiting on it (ms). */
export const HELD_RESULT_MS = 5 * 60 * 1000;

/**
 * The full results of held calls the store kept only truncated (RESULT_STORE_MAX_BYTES), for the
 * {@link HELD_RESULT_MS} after the call ended: the agent waiting on the call may ask another
 * replica than the one that ran it, or the same store after a restart. In memory first (the
 * replica that ran the call answers without the store); the `held_results` row is written only
 * when a held call's result was truncated, never on the common path, and the expired rows go
 * when the next one is written.
 */
export class HeldResults {
  /** Insertion order is time order (see {@link prune}). */
  private readonly recent = new Map<string, { result: unknown; at: number }>();

  constructor(
    private readonly db: Db,
    private readonly clock: () => number = Date.now,
  ) {}

  /**
   * Keeps `result`, the full answer to the held call `id`; written to the store too when the
   * stored one was `truncated` (the other replicas read it there). Rejects when that write fails.
   */
  async keep(id: string, result: unknown, truncated: boolean): Promise<void> {
    const now = this.clock();
    this.recent.set(id, { result, at: now });
    this.prune(now);
    if (!truncated) return;
    const keptUntil = new Date(now + HELD_RESULT_MS).toISOString();
    await this.db.delete(heldResults).where(lte(heldResults.keptUntil, new Date(now).toISOString()));
    const values = { callId: id, result: JSON.stringify(result), keptUntil };
    await this.db
      .insert(heldResults)
      .values(values)
      .onConflictDoUpdate({ target: heldResults.callId, set: values });
  }

  /** The full result of call `id` kept in this replica's memory, or undefined. */
  inMemory(id: string): unknown {
    return this.recent.get(id)?.result;
  }

  /**
   * `view` with the full result of its call when the stored one was truncated and the store still
   * keeps it whole; else `view` as it is.
   */
  async completed(view: CallView): Promise<CallView> {
    if (!view.resultTruncated) return view;
    const row = await first(
      this.db
        .select({ result: heldResults.result })
        .from(heldResults)
        .where(
          and(
            eq(heldResults.callId, view.id),
            gt(heldResults.keptUntil, new Date(this.clock()).toISOString()),
          ),
        ),
    );
    return row ? { ...view, result: JSON.parse(row.result) as unknown, resultTruncated: false } : view;
  }

  private prune(now: number): void {
    const cutoff = now - HELD_RESULT_MS;
    for (const [id, r] of this.recent) {
      if (r.at >= cutoff) break;
      this.recent.delete(id);
    }
  }
}
