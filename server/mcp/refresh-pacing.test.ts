import { describe, expect, it } from "vitest";
import { ManualClock } from "./pacing-fixtures";
import { pacingNote, REFRESH_DEBOUNCE_MS, REFRESH_PACING, RefreshPacing } from "./refresh-pacing";

/** A pacing on a manual clock that records its re-lists (by time) and its notes. */
function paced(limits = REFRESH_PACING) {
  const clock = new ManualClock();
  const start = clock.now();
  const runs: number[] = [];
  const notes: (string | null)[] = [];
  const pacing = new RefreshPacing({
    run: async () => {
      runs.push(clock.now() - start);
    },
    onNote: (note) => notes.push(note),
    limits,
    clock,
  });
  return { clock, pacing, runs, notes };
}

/** Lets a re-list that was started settle (a turn of the event loop, not a wait). */
const settled = () => new Promise((resolve) => setImmediate(resolve));

/** Requests a re-list every `everyMs` for `forMs` (a server sending list_changed in a loop). */
async function flood(clock: ManualClock, pacing: RefreshPacing, forMs: number, everyMs = 10): Promise<void> {
  for (let t = 0; t < forMs; t += everyMs) {
    pacing.request();
    const before = clock.now();
    clock.advance(everyMs);
    if (clock.now() > before) await settled();
  }
}

describe("re-lists are paced per server", () => {
  it("a re-list due while the last is still under way starts once it has ended, and only once", async () => {
    const clock = new ManualClock();
    let runs = 0;
    let finish: () => void = () => {};
    const pacing = new RefreshPacing({
      run: () =>
        new Promise<void>((resolve) => {
          runs++;
          finish = resolve;
        }),
      onNote: () => {},
      clock,
    });
    pacing.request();
    clock.advance(REFRESH_DEBOUNCE_MS);
    expect(runs).toBe(1);
    // Two more fall due while the first listing is slow to come back.
    for (let i = 0; i < 2; i++) {
      pacing.request();
      clock.advance(REFRESH_DEBOUNCE_MS);
    }
    expect(runs).toBe(1);
    finish();
    await settled();
    expect(runs).toBe(2);
    finish();
    await settled();
    expect(runs).toBe(2);
  });

  it("a burst of requests becomes one re-list, after the debounce", () => {
    const { clock, pacing, runs, notes } = paced();
    for (let i = 0; i < 50; i++) pacing.request();
    clock.advance(REFRESH_DEBOUNCE_MS - 1);
    expect(runs).toEqual([]);
    clock.advance(1);
    expect(runs).toEqual([REFRESH_DEBOUNCE_MS]);
    expect(notes).toEqual([]);
  });

  it("a flood of list_changed gets `burst` quick re-lists, then at most one every intervalMs, and a note", async () => {
    const { clock, pacing, runs, notes } = paced();
    // Two minutes of a notification every 10 ms.
    await flood(clock, pacing, 120_000);
    const { burst, intervalMs } = REFRESH_PACING;
    expect(runs.length).toBeLessThanOrEqual(burst + 120_000 / intervalMs);
    expect(runs.slice(0, burst)).toEqual([300, 600, 900]);
    // The bucket's bound holds in every window: at most burst + (its length / intervalMs) re-lists.
    for (let i = 0; i < runs.length; i++) {
      for (let j = i; j < runs.length; j++) {
        const span = (runs[j] ?? 0) - (runs[i] ?? 0);
        expect(j - i + 1).toBeLessThanOrEqual(burst + span / intervalMs);
      }
    }
    // Once the bucket is empty, re-lists come one intervalMs apart.
    const steady = runs.slice(burst + 1).map((t, i) => t - (runs[burst + i] ?? 0));
    expect(new Set(steady)).toEqual(new Set([intervalMs]));
    expect(notes).toEqual([pacingNote(REFRESH_PACING)]);
    expect(pacing.note).toBe(
      "tool list changes arrive faster than 6 per minute; re-listing at most every 10 s",
    );
  });

  it("the note goes once the bucket has filled again with nothing kept waiting, and the pace recovers", async () => {
    const { clock, pacing, runs, notes } = paced();
    await flood(clock, pacing, 30_000);
    expect(pacing.note).not.toBeNull();
    const last = runs.length;
    // Quiet: whatever was scheduled runs, then after burst × intervalMs the note goes.
    clock.advance(REFRESH_PACING.burst * REFRESH_PACING.intervalMs + REFRESH_PACING.intervalMs);
    await settled();
    expect(pacing.note).toBeNull();
    expect(notes).toEqual([pacingNote(REFRESH_PACING), null]);
    expect(clock.nextIn()).toBeNull();
    // A full bucket again: the next request is only debounced.
    const before = runs.length;
    expect(before).toBeGreaterThanOrEqual(last);
    pacing.request();
    clock.advance(REFRESH_DEBOUNCE_MS);
    expect(runs).toHaveLength(before + 1);
  });

  it("requests at the pace the bucket allows never show the note", async () => {
    const { clock, pacing, runs, notes } = paced();
    for (let i = 0; i < 20; i++) {
      pacing.request();
      clock.advance(REFRESH_PACING.intervalMs);
      await settled();
    }
    expect(runs).toHaveLength(20);
    expect(notes).toEqual([]);
  });

  it("stop cancels a scheduled re-list and the note's end", async () => {
    const { clock, pacing, runs } = paced();
    await flood(clock, pacing, 2_000);
    const before = runs.length;
    pacing.request();
    pacing.stop();
    expect(clock.nextIn()).toBeNull();
    clock.advance(60_000);
    expect(runs).toHaveLength(before);
  });

  it("the note's words follow the limits", () => {
    expect(pacingNote({ burst: 2, intervalMs: 30_000 })).toBe(
      "tool list changes arrive faster than 2 per minute; re-listing at most every 30 s",
    );
    expect(pacingNote({ burst: 1, intervalMs: 1_500 })).toBe(
      "tool list changes arrive faster than 40 per minute; re-listing at most every 1.5 s",
    );
  });
});
