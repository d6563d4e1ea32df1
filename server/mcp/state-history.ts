/**
 * One server's history as owners see it: its supervisor's state changes with their time and, for
 * failures, the reason, newest last and at most {@link HISTORY_LENGTH}. With a
 * {@link HistoryStore} it outlives the process: the earlier runs' last changes come first, and
 * the first change of this run is marked `started` (Gatehouse (re)started there).
 */
import "server-only";
import type { ServerState } from "@/lib/api-types";
import { HISTORY_LENGTH, type HistoryEntry, type HistoryStore } from "./supervision";

export class StateHistory {
  private readonly entries: HistoryEntry[] = [];
  /** Whether no change has been recorded since the run began: the next one is marked `started`. */
  private firstOfRun = true;

  constructor(
    private readonly server: string,
    private readonly store: HistoryStore | undefined,
  ) {}

  /** Resolves once the earlier runs' entries are in (see {@link load}). */
  private loaded: Promise<void> = Promise.resolve();

  /**
   * Reads the earlier runs' entries from the store, in the background; call once, before the first
   * change of this run. They go before the changes recorded meanwhile, and this run's changes are
   * written to the store only after the read, so it never finds them. A store that cannot be read
   * leaves the earlier runs out. Resolves once they are in; never rejects.
   */
  load(): Promise<void> {
    const store = this.store;
    if (!store) return this.loaded;
    this.loaded = Promise.resolve()
      .then(() => store.load(this.server, HISTORY_LENGTH))
      .then(
        (earlier) => {
          this.entries.unshift(...earlier);
          while (this.entries.length > HISTORY_LENGTH) this.entries.shift();
        },
        () => undefined,
      );
    return this.loaded;
  }

  /** Records one change (kept, and written to the store). */
  record(state: ServerState, detail: string | null): void {
    const entry: HistoryEntry = { at: new Date().toISOString(), state, detail };
    if (this.firstOfRun) entry.started = true;
    this.firstOfRun = false;
    this.entries.push(entry);
    if (this.entries.length > HISTORY_LENGTH) this.entries.shift();
    const store = this.store;
    if (store) void this.loaded.then(() => store.append(this.server, entry, HISTORY_LENGTH));
  }

  /** A copy of the entries, oldest first. */
  snapshot(): HistoryEntry[] {
    return [...this.entries];
  }
}
