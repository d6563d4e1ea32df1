/**
 * What the connection-lifecycle tests share: their per-test timeout, stdio servers with room
 * for many tools, the bookkeeping that stops or kills whatever a failing test left running, and
 * the probes for processes that are not our children.
 *
 * Waits are bounded waits on events (supervisor states, bus events, a child's output). Two kinds
 * of wait poll instead, and say so where they do: the liveness of a process that is not our
 * child (no event tells us a grandchild died), and the one quiet period that proves a failed
 * server is *not* restarted (an absence has no event to wait for).
 */
import type { ChildProcess } from "node:child_process";
import { existsSync, readFileSync, watch } from "node:fs";
import { dirname } from "node:path";
import { afterEach, expect, vi } from "vitest";
import { stdioServer as baseStdioServer, cleanUp } from "@/test/support/mcp-harness";
import type { ServerConfig } from "../config";

/** Per-test timeout: the machine has 2 cores and every test starts real processes. */
export const SLOW = 30_000;

// Saved before any test fakes the clock: the safety timeouts of our waits must stay real.
export const realSetTimeout = globalThis.setTimeout;
export const realClearTimeout = globalThis.clearTimeout;

/** Room for the paging fixtures' 25 and 100 tools. */
export function stdioServer(name: string, script: string, over: Partial<ServerConfig> = {}): ServerConfig {
  return baseStdioServer(name, script, { maxTools: 200, ...over });
}

/** What a test started that must be stopped after it: a runtime, say. */
export interface Stoppable {
  stop(): Promise<void>;
}

/** Stopped after each test. */
export const runtimes: Stoppable[] = [];
/** Gatehouse processes a test spawned: SIGKILLed after each test if still running. */
export const bootChildren: ChildProcess[] = [];
/** Every fixture pid a test saw: killed in afterEach if a failing test left it running. */
export const seenPids = new Set<number>();
/** PIDS_FILEs of wrappers: re-read in afterEach, as a restart may have written newer pids. */
const pidsFiles: string[] = [];

/**
 * Registers the afterEach that puts the clock back and stops or kills everything a test left:
 * runtimes, spawned Gatehouse processes, and every fixture pid it saw. Call it once at the top
 * of a test file, before its describes.
 */
export function registerLifecycleCleanup(): void {
  afterEach(async () => {
    vi.useRealTimers();
    await Promise.all(runtimes.splice(0).map((r) => r.stop()));
    await Promise.all(
      bootChildren.splice(0).map(async (child) => {
        if (child.exitCode !== null || child.signalCode !== null) return;
        const exited = new Promise((resolve) => child.once("exit", resolve));
        child.kill("SIGKILL");
        await exited;
      }),
    );
    for (const file of pidsFiles.splice(0)) {
      if (!existsSync(file)) continue;
      const pids = JSON.parse(readFileSync(file, "utf8")) as { wrapper: number; grandchild: number };
      seenPids.add(pids.wrapper).add(pids.grandchild);
    }
    for (const pid of seenPids) {
      if (isGone(pid)) continue;
      try {
        process.kill(pid, "SIGKILL");
      } catch (err) {
        // It died between the check and the kill.
        if ((err as NodeJS.ErrnoException).code !== "ESRCH") throw err;
      }
    }
    seenPids.clear();
    await cleanUp();
  });
}

/** Awaits `promise`, which must reject; returns the error. */
export async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error("expected the promise to reject, but it resolved");
}

/**
 * Whether process `pid` no longer runs: `kill(pid, 0)` says ESRCH, or it is a zombie (Linux
 * /proc state Z or X). A zombie has died and holds nothing but its pid; it lingers only until
 * its parent reaps it, and a grandchild whose parent died is reaped by PID 1, which on this
 * machine takes its time.
 */
export function isGone(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ESRCH") return true;
    throw err;
  }
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return true;
    throw err;
  }
  // "pid (comm) S ...": the state follows the last ")" (comm may itself contain parentheses).
  const state = stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3);
  return state === "Z" || state === "X";
}

/** `kill(pid, 0)` fails with ESRCH: the process is gone and reaped. */
export function isReaped(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return false;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ESRCH") return true;
    throw err;
  }
}

/**
 * Polls `probe` every 20 ms until it is true, failing after `timeoutMs`. Used only for the
 * liveness of processes that are not our children: there is no event for a grandchild's death.
 * Resolves with how long it took.
 */
export async function pollUntil(what: string, probe: () => boolean, timeoutMs = 5000): Promise<number> {
  const t0 = performance.now();
  while (!probe()) {
    if (performance.now() - t0 > timeoutMs) throw new Error(`${what} did not happen within ${timeoutMs} ms`);
    await new Promise((resolve) => realSetTimeout(resolve, 20));
  }
  return performance.now() - t0;
}

/** Pids an npx-wrapper fixture wrote to its PIDS_FILE. */
export function readPids(file: string): { wrapper: number; grandchild: number } {
  pidsFiles.push(file);
  const pids = JSON.parse(readFileSync(file, "utf8")) as { wrapper: number; grandchild: number };
  expect(Number.isInteger(pids.wrapper) && Number.isInteger(pids.grandchild)).toBe(true);
  seenPids.add(pids.wrapper);
  seenPids.add(pids.grandchild);
  return pids;
}

/** The fixture's log: one line per message received or thing done, across restarts. */
export function logged(file: string): string[] {
  return existsSync(file) ? readFileSync(file, "utf8").split("\n").filter(Boolean) : [];
}

/** Resolves once the log at `file` satisfies `probe`: checked now and on every change to its folder. */
export function untilLogged(
  file: string,
  what: string,
  probe: (lines: string[]) => boolean,
  timeoutMs = 15_000,
) {
  return new Promise<string[]>((resolve, reject) => {
    const check = () => {
      const lines = logged(file);
      if (!probe(lines)) return;
      done();
      resolve(lines);
    };
    const watcher = watch(dirname(file), check);
    const timer = realSetTimeout(() => {
      done();
      reject(new Error(`no ${what} within ${timeoutMs} ms; the server logged: ${logged(file).join(" | ")}`));
    }, timeoutMs);
    const done = () => {
      realClearTimeout(timer);
      watcher.close();
    };
    check();
  });
}
