import "server-only";
import { listEnabledTools } from "../catalogue/catalogue";
import type { Logger } from "../log";
import type { Db } from "../store/db";
import { serversOf } from "./listings";
import type { ModernLeg } from "./modern";
import type { Session } from "./sessions";
import { toolsSignature } from "./tools";

export interface ListWatchDeps {
  db: Db;
  log: Logger;
  /** The 2025 sessions held now. */
  sessions: () => Session[];
  modern: ModernLeg;
  /** How long catalogue events are gathered before the lists are read again (ms). */
  debounceMs: number;
}

/**
 * Tells agents' `/mcp` sessions and 2026-07-28 listen streams when what they would be listed has
 * changed (`notifications/tools/list_changed`, and resources' and prompts' when the servers with
 * an enabled tool changed): after catalogue events, gathered for `debounceMs`, when the enabled
 * lists differ from the last look; and when an owner moved a token into another tool set, to that
 * token's sessions (its next list is judged by the new set). Listen streams of the 2026-07-28 leg
 * are told through the SDK's handler, which tells every open stream: a move tells the streams of
 * other tokens too, which then list again and find nothing changed.
 */
export class ListWatch {
  private debounceTimer: NodeJS.Timeout | null = null;
  /** The check the timer will run, settled once it has told everyone; null when none is scheduled. */
  private scheduled: Promise<void> | null = null;
  /** What `tools/list` and `resources/list` would show at the last check; null until first read. */
  private seen: { tools: string; servers: string } | null = null;
  /** The first read of the lists, then the check under way: checks run one at a time. Never rejects. */
  private checking: Promise<void>;
  private closed = false;

  constructor(private readonly deps: ListWatchDeps) {
    this.checking = this.check(false);
  }

  /** The catalogue changed: the lists are read again once `debounceMs` has passed. */
  schedule(): void {
    if (this.debounceTimer || this.closed) return;
    let done: () => void = () => undefined;
    this.scheduled = new Promise<void>((resolve) => {
      done = resolve;
    });
    this.debounceTimer = setTimeout(() => {
      this.debounceTimer = null;
      this.checking = this.checking
        .then(() => this.check())
        .catch((err) => this.deps.log.error(`agent sessions: lists not checked: ${String(err)}`))
        .finally(done);
    }, this.deps.debounceMs);
    this.debounceTimer.unref();
  }

  /** Resolves once every catalogue change seen so far has been checked, and told (tests). */
  async settled(): Promise<void> {
    await this.scheduled;
    await this.checking;
  }

  /** Token `name` was moved into another tool set: its sessions and streams are told at once. */
  tokenMoved(name: string): void {
    if (this.closed) return;
    const sessions = this.deps.sessions().filter((s) => s.tokenName === name);
    for (const s of sessions) this.tell(s, { tools: true, servers: true });
    if (this.deps.modern.hasExchangesOf(name)) this.deps.modern.listsChanged({ tools: true, servers: true });
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.debounceTimer) clearTimeout(this.debounceTimer);
    this.scheduled = null;
    await this.checking;
  }

  /** What `tools/list` and `resources/list` would show now to a token without a set, as strings to compare. */
  private async listsNow(): Promise<{ tools: string; servers: string }> {
    const enabled = await listEnabledTools(this.deps.db);
    return { tools: toolsSignature(enabled), servers: serversOf(enabled).join(",") };
  }

  /**
   * Tells every session, and every 2026-07-28 listen stream, when what `tools/list` or
   * `resources/list` would show has changed; `tell` false (at the start): only notes what they show.
   */
  private async check(tell = true): Promise<void> {
    let now: { tools: string; servers: string };
    try {
      now = await this.listsNow();
    } catch (err) {
      this.deps.log.error(`agent sessions: catalogue could not be read: ${String(err)}`);
      return;
    }
    // Not read at the start (logged then): both count as changed.
    const changed = { tools: now.tools !== this.seen?.tools, servers: now.servers !== this.seen?.servers };
    this.seen = now;
    if (!tell || (!changed.tools && !changed.servers)) return;
    this.deps.modern.listsChanged(changed);
    for (const s of this.deps.sessions()) this.tell(s, changed);
  }

  private tell(s: Session, changed: { tools: boolean; servers: boolean }): void {
    if (s.closing) return;
    const failed = (err: unknown) =>
      this.deps.log.debug(`agent session ${s.id}: list_changed not sent: ${String(err)}`);
    if (changed.tools) s.server.sendToolListChanged().catch(failed);
    if (changed.servers) {
      // Resources and prompts both come from the servers with an enabled tool.
      s.server.sendResourceListChanged().catch(failed);
      s.server.sendPromptListChanged().catch(failed);
    }
  }
}
