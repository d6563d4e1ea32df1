import "server-only";
import type { Tool } from "@modelcontextprotocol/client";
import type { ServerHistoryEntry, ServerState } from "@/lib/api-types";
import type { ServerConfig } from "../config";
import type { Logger } from "../log";
import type { PacingClock, RefreshLimits } from "./refresh-pacing";
import type { SignInSource } from "./sign-in";

// The supervisor's policy (limits, backoff steps, what it reports) and the one wait it needs,
// apart from the state machine in supervisor.ts.

/** Longest a server's cache hint (`ttlMs`) keeps the periodic refresh away: a day, as the SDK clamps it. */
export const MAX_LIST_TTL_MS = 24 * 60 * 60 * 1000;

/** Most pages of `tools/list` followed in one refresh. */
export const MAX_TOOL_PAGES = 20;
/** Backoff after a failure: base 1 s doubling to a 60 s cap, with jitter in [50 %, 100 %]. */
export const BACKOFF = { baseMs: 1000, capMs: 60_000 } as const;
/** A connection must stay ready this long before the backoff exponent resets. */
export const STABLE_AFTER_MS = 60_000;
/**
 * A crash loop: this many crashes within `windowMs` stop the retries until the owner presses
 * Reconnect. Every failure of a stdio server counts (its process died or never started); an
 * HTTP server's failures count only after it was ready, so an endpoint that is merely down
 * keeps being retried at the backoff cap.
 */
export const CRASH_LOOP = { crashes: 5, windowMs: 3 * 60_000 } as const;
/** Transitions kept for the owner's view of a server's history. */
export const HISTORY_LENGTH = 50;

export interface SupervisorSnapshot {
  name: string;
  state: ServerState;
  lastError: string | null;
  nextRetryAt: string | null;
  readySince: string | null;
  serverInfo: { name: string; version: string } | null;
  /**
   * The protocol revision the live connection speaks (`"2026-07-28"` when the server answered
   * `server/discover`, a 2025 revision such as `"2025-11-25"` after `initialize`); null while
   * not connected.
   */
  protocolVersion: string | null;
  listedTools: number;
  stderrTail: string[];
  /**
   * Set while re-lists of this server are held back because its tool list changes faster than
   * the pacing allows (see `RefreshPacing`); null otherwise. Shown next to the state.
   */
  refreshNote: string | null;
  /**
   * Newest last: state changes with their time and, for failures, the reason; with a
   * {@link HistoryStore}, the earlier runs' last changes first. At most {@link HISTORY_LENGTH}.
   */
  history: HistoryEntry[];
  /** True when another replica runs this server (a stdio server held elsewhere, see `RemoteSupervisor`). */
  elsewhere?: boolean;
}

/**
 * One state change of a server, as owners see it (`started` on the first change of a
 * supervisor's run: Gatehouse (re)started there).
 */
export type HistoryEntry = ServerHistoryEntry;

/**
 * Where a server's history outlives the process (the store, `server/servers/history.ts`). Called
 * on the supervisor's own path, so neither may throw nor wait long; a write that cannot be made
 * is the store's to report.
 */
export interface HistoryStore {
  /** The server's last `limit` entries from earlier runs, oldest first. */
  load(server: string, limit: number): HistoryEntry[] | Promise<HistoryEntry[]>;
  /** Records one entry, keeping only the server's last `limit`. */
  append(server: string, entry: HistoryEntry, limit: number): void;
}

export interface SupervisorDeps {
  log: Logger;
  /** Periodic refresh of the tool list; 0 disables it. */
  refreshSeconds: number;
  onState(snapshot: SupervisorSnapshot): void;
  /** Receives every complete tool list (awaited: the server is `ready` after); must not throw or reject. */
  onTools(server: ServerConfig, tools: Tool[]): void | Promise<void>;
  /** Backoff steps; default {@link BACKOFF}. Tests pass smaller ones to run a crash loop quickly. */
  backoff?: { baseMs: number; capMs: number };
  /** Pace of re-lists; default `REFRESH_PACING` (3 at once, then one every 10 s). */
  refreshLimits?: RefreshLimits;
  /** The pacing's clock; default the system's. Tests pass one they move themselves. */
  clock?: PacingClock;
  /** OAuth sign-ins (the runtime's `server/oauth`); without one, no server is dialled with OAuth. */
  signIn?: SignInSource;
  /** Keeps the history across restarts; without one it lasts as long as the process. */
  history?: HistoryStore;
  /** Hears how long each `tools/list` request took and how it ended (metrics); must not throw. */
  onUpstream?: UpstreamObserver;
}

/**
 * Hears one request to a tool server: its method, how it ended (`ok`, `timeout`, or any other
 * `error`) and how long it took (s). Must not throw.
 */
export type UpstreamObserver = (
  server: string,
  method: "tools/call" | "tools/list",
  outcome: "ok" | "timeout" | "error",
  seconds: number,
) => void;

/** Delay before retry number `attempt` (1-based), with jitter from `random` in [0, 1). */
export function backoffDelay(
  attempt: number,
  random: number = Math.random(),
  steps: { baseMs: number; capMs: number } = BACKOFF,
): number {
  const exp = Math.min(steps.capMs, steps.baseMs * 2 ** Math.max(0, attempt - 1));
  return Math.round(exp * (0.5 + random / 2));
}

/**
 * Resolves with the first defined value of `probe`, checked now and each time the owner of
 * `watchers` runs them (on every state change); rejects when `probe` throws, and with
 * `late()` after `timeoutMs`. The timer is unref'd: a wait never keeps the process up.
 */
export function watchUntil<T>(
  watchers: Set<() => void>,
  timeoutMs: number,
  late: () => Error,
  probe: () => T | undefined,
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const done = () => {
      clearTimeout(timer);
      watchers.delete(check);
    };
    const check = () => {
      try {
        const value = probe();
        if (value === undefined) return;
        done();
        resolve(value);
      } catch (err) {
        done();
        reject(err);
      }
    };
    const timer = setTimeout(() => {
      done();
      reject(late());
    }, timeoutMs);
    timer.unref();
    watchers.add(check);
    check();
  });
}
