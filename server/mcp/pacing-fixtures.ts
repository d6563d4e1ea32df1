/**
 * What the pacing tests share: a clock that moves only when a test moves it. Its timers run in
 * due order, each at its own time, so `advance` is the only way time passes.
 */
import type { PacingClock } from "./refresh-pacing";

export class ManualClock implements PacingClock {
  private time = 1_000_000;
  private timers: { at: number; seq: number; fn: () => void }[] = [];
  private seq = 0;

  now(): number {
    return this.time;
  }

  after(ms: number, fn: () => void): () => void {
    const timer = { at: this.time + Math.max(0, ms), seq: this.seq++, fn };
    this.timers.push(timer);
    return () => {
      this.timers = this.timers.filter((t) => t !== timer);
    };
  }

  /** Moves time forward by `ms`, running every timer that falls due on the way. */
  advance(ms: number): void {
    const end = this.time + ms;
    for (;;) {
      const due = this.timers.filter((t) => t.at <= end).sort((a, b) => a.at - b.at || a.seq - b.seq)[0];
      if (!due) break;
      this.timers = this.timers.filter((t) => t !== due);
      this.time = due.at;
      due.fn();
    }
    this.time = end;
  }

  /** Time until the next timer is due, or null when none is set. */
  nextIn(): number | null {
    const next = Math.min(...this.timers.map((t) => t.at));
    return Number.isFinite(next) ? next - this.time : null;
  }
}
