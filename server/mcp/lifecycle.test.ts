import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { eq } from "drizzle-orm";
import { afterEach, describe, expect, it, vi } from "vitest";
import {
  stdioServer as baseStdioServer,
  cleanUp,
  FIXTURES,
  gatehouse,
  Harness,
  NODE,
  ROOT,
  tempDir,
  text,
} from "@/test/support/mcp-harness";
import { waitForEvent } from "@/test/support/runtime";
import { setToolStatus } from "../catalogue/catalogue";
import type { ServerConfig } from "../config";
import { createRuntime, type Runtime } from "../runtime";
import { tools as toolsTable } from "../store/schema";
import { CRASH_LOOP, MAX_TOOL_PAGES, STABLE_AFTER_MS } from "./supervisor";

/**
 * The life of a connection against real misbehaving programs (issue 3, behaviours 5–7): crash
 * loops and the backoff reset, process hygiene (process groups, staged stop, no orphan when
 * Gatehouse itself is stopped by a signal), and catalogue freshness (paging, list_changed,
 * periodic refresh) end to end through a real runtime and its SQLite catalogue.
 *
 * Waits are bounded waits on events (supervisor states, bus events, a child's output). Two kinds
 * of wait poll instead, and say so where they do: the liveness of a process that is not our
 * child (no event tells us a grandchild died), and the one quiet period that proves a failed
 * server is *not* restarted (an absence has no event to wait for).
 */

const CRASH_ON_START = join(FIXTURES, "crash-on-start.mjs");
const CRASH_ON_CALL = join(FIXTURES, "crash-on-call.mjs");
const WRAPPER = join(FIXTURES, "npx-wrapper.mjs");
const STUBBORN = join(FIXTURES, "stubborn.mjs");
const PAGED = join(FIXTURES, "paged.mjs");
const GROWING = join(FIXTURES, "growing.mjs");
const DRIFTING = join(FIXTURES, "drifting.mjs");
/** Per-test timeout: the machine has 2 cores and every test starts real processes. */
const SLOW = 30_000;
/** The staged stop's default grace periods (stdio-transport.ts): stdin close, then SIGTERM. */
const STOP_GRACE_MS = 1000 + 2000;

// Saved before any test fakes the clock: the safety timeouts of our waits must stay real.
const realSetTimeout = globalThis.setTimeout;
const realClearTimeout = globalThis.clearTimeout;

/** Room for the paging fixtures' 25 and 100 tools. */
function stdioServer(name: string, script: string, over: Partial<ServerConfig> = {}): ServerConfig {
  return baseStdioServer(name, script, { maxTools: 200, ...over });
}

const runtimes: Runtime[] = [];
const bootChildren: ChildProcess[] = [];
/** Every fixture pid a test saw: killed in afterEach if a failing test left it running. */
const seenPids = new Set<number>();
/** PIDS_FILEs of wrappers: re-read in afterEach, as a restart may have written newer pids. */
const pidsFiles: string[] = [];

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

/** Awaits `promise`, which must reject; returns the error. */
async function rejection(promise: Promise<unknown>): Promise<unknown> {
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
function isGone(pid: number): boolean {
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
function isReaped(pid: number): boolean {
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
async function pollUntil(what: string, probe: () => boolean, timeoutMs = 5000): Promise<number> {
  const t0 = performance.now();
  while (!probe()) {
    if (performance.now() - t0 > timeoutMs) throw new Error(`${what} did not happen within ${timeoutMs} ms`);
    await new Promise((resolve) => realSetTimeout(resolve, 20));
  }
  return performance.now() - t0;
}

/** Pids an npx-wrapper fixture wrote to its PIDS_FILE. */
function readPids(file: string): { wrapper: number; grandchild: number } {
  pidsFiles.push(file);
  const pids = JSON.parse(readFileSync(file, "utf8")) as { wrapper: number; grandchild: number };
  expect(Number.isInteger(pids.wrapper) && Number.isInteger(pids.grandchild)).toBe(true);
  seenPids.add(pids.wrapper);
  seenPids.add(pids.grandchild);
  return pids;
}

// ---------------------------------------------------------------------------------------------
// 5. Crash and restart

describe("crash loop", () => {
  /** Small steps so that five crashes take well under a second of backoff. */
  const SMALL_BACKOFF = { baseMs: 50, capMs: 200 };
  /**
   * The one fixed wait of this file, proving an absence: after "failed" no process may start.
   * Were a retry still scheduled, it would fire within capMs (200 ms) and its process would log
   * its start within a few hundred ms more even on a busy 2-core machine; 1.5 s is several
   * times that. Nothing else could be awaited: a retry that does not happen emits nothing.
   */
  const QUIET_MS = 1500;

  function starts(log: string): number {
    return existsSync(log) ? readFileSync(log, "utf8").split("\n").filter(Boolean).length : 0;
  }

  it.each(["start", "initialize"] as const)(
    "a server that dies at %s five times is failed with its last error, starts no more processes, until reconnectNow()",
    async (crashAt) => {
      const startLog = join(tempDir(), "starts.log");
      const harness = new Harness(
        gatehouse([stdioServer("loop", CRASH_ON_START, { env: { START_LOG: startLog, CRASH_AT: crashAt } })]),
        SMALL_BACKOFF,
      );
      const t0 = performance.now();
      harness.manager.start();

      const failed = await harness.waitForState("loop", "failed");
      const failedMs = performance.now() - t0;
      const { snapshot } = failed;
      expect(snapshot.lastError).toBeTruthy();
      if (crashAt === "initialize") expect(snapshot.lastError).toContain("code 7");
      expect(snapshot.nextRetryAt).toBeNull();
      expect(snapshot.history.at(-1)).toEqual({
        at: expect.any(String),
        state: "failed",
        detail: snapshot.lastError,
      });
      // Four backoffs, then the fifth crash within the window is the crash loop.
      expect(harness.statesOf("loop").filter((s) => s === "backoff")).toHaveLength(CRASH_LOOP.crashes - 1);
      expect(harness.statesOf("loop")).not.toContain("ready");
      expect(starts(startLog)).toBe(CRASH_LOOP.crashes);

      await new Promise((resolve) => realSetTimeout(resolve, QUIET_MS));
      expect(starts(startLog)).toBe(CRASH_LOOP.crashes);
      expect(harness.events).toHaveLength(failed.index + 1);
      expect(harness.manager.get("loop").snapshot().state).toBe("failed");
      const refused = await rejection(harness.manager.callTool("loop", "anything", {}));
      expect(String(refused)).toContain("failed");

      harness.manager.get("loop").reconnectNow();
      const again = await harness.waitForState("loop", "connecting", failed.index + 1);
      // The owner's reconnect starts a fresh count: the next crash is a backoff, not "failed".
      const next = await harness.waitFor("the next failure after reconnecting", () => {
        const e = harness.events
          .slice(again.index + 1)
          .find((s) => s.state === "backoff" || s.state === "failed");
        return e?.state;
      });
      expect(next).toBe("backoff");
      expect(starts(startLog)).toBe(CRASH_LOOP.crashes + 1);
      console.info(
        `[timing] crash loop (${crashAt}): failed after ${failedMs.toFixed(0)} ms and ${CRASH_LOOP.crashes} starts (backoff base ${SMALL_BACKOFF.baseMs} ms, cap ${SMALL_BACKOFF.capMs} ms); lastError "${snapshot.lastError}"`,
      );
    },
    SLOW,
  );
});

describe("backoff reset and crash window (fake clock, real processes)", () => {
  /**
   * Only the clock is faked (timers and Date); the child processes, pipes and the MCP exchange
   * are real. Crashes are made by calling `crash` on crash-on-call.mjs, retries by advancing the
   * fake clock by exactly the announced delay.
   */
  function crashyHarness(): {
    harness: Harness;
    crash(): Promise<number>;
    retry(delayMs: number): Promise<void>;
  } {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "setInterval", "clearInterval", "Date"] });
    const harness = new Harness(gatehouse([stdioServer("crashy", CRASH_ON_CALL)]));
    harness.manager.start();
    return {
      harness,
      /** Crashes the ready server; resolves with the backoff delay it announced. */
      async crash() {
        const from = harness.events.length;
        await rejection(harness.manager.callTool("crashy", "crash", {}));
        const { snapshot } = await harness.waitForState("crashy", "backoff", from);
        return Date.parse(snapshot.nextRetryAt ?? "") - Date.now();
      },
      /** Moves the clock to the retry and waits for the new connection to be ready. */
      async retry(delayMs: number) {
        const from = harness.events.length;
        vi.advanceTimersByTime(delayMs);
        await harness.waitForState("crashy", "ready", from);
      },
    };
  }

  /** The jittered delay of retry number `attempt` lies in [50 %, 100 %] of 1 s · 2^(attempt-1). */
  function expectAttempt(delayMs: number, attempt: number): void {
    const step = 1000 * 2 ** (attempt - 1);
    expect(delayMs).toBeGreaterThanOrEqual(step / 2);
    expect(delayMs).toBeLessThanOrEqual(step);
  }

  it(
    "the backoff exponent resets only once the connection has stayed ready for STABLE_AFTER_MS",
    async () => {
      const { harness, crash, retry } = crashyHarness();
      await harness.waitForState("crashy", "ready");

      const d1 = await crash();
      expectAttempt(d1, 1);
      await retry(d1);
      // Crashing again at once: the exponent grows.
      const d2 = await crash();
      expectAttempt(d2, 2);
      await retry(d2);
      // Ready for just under STABLE_AFTER_MS is not yet stable.
      vi.advanceTimersByTime(STABLE_AFTER_MS - 1);
      const d3 = await crash();
      expectAttempt(d3, 3);
      await retry(d3);
      // Ready for STABLE_AFTER_MS: the next failure starts over at the first step.
      vi.advanceTimersByTime(STABLE_AFTER_MS);
      const d4 = await crash();
      expectAttempt(d4, 1);
      expect(harness.statesOf("crashy")).not.toContain("failed");
      console.info(`[timing] backoff reset: delays ${[d1, d2, d3, d4].join(", ")} ms (fake clock)`);
    },
    SLOW,
  );

  it(
    "crashes spread wider than the crash-loop window never make the server failed",
    async () => {
      const { harness, crash, retry } = crashyHarness();
      await harness.waitForState("crashy", "ready");
      // Seven crashes, each after a stable minute: never more than three in any 3-minute window.
      const crashes = CRASH_LOOP.crashes + 2;
      for (let i = 0; i < crashes; i++) {
        vi.advanceTimersByTime(STABLE_AFTER_MS + 1000);
        const delay = await crash();
        expectAttempt(delay, 1);
        if (i < crashes - 1) await retry(delay);
      }
      expect(harness.statesOf("crashy").filter((s) => s === "backoff")).toHaveLength(crashes);
      expect(harness.statesOf("crashy")).not.toContain("failed");
    },
    SLOW,
  );
});

// ---------------------------------------------------------------------------------------------
// 6. Process hygiene

describe("process hygiene", () => {
  it(
    "kill -9 of an npx-style wrapper is noticed although its grandchild holds the pipes, and the grandchild is killed",
    async () => {
      const pidsFile = join(tempDir(), "pids.json");
      // The grandchild must outlive its closed stdin: Node destroys a child's stdin when the child
      // exits, and a plain server (env-echo, the demo) then exits on its own and closes the pipes,
      // which would let a host that only listens for 'close' notice after all.
      const harness = new Harness(
        gatehouse([stdioServer("wrapped", WRAPPER, { env: { PIDS_FILE: pidsFile, GRANDCHILD: STUBBORN } })]),
      );
      harness.manager.start();
      const ready = await harness.waitForState("wrapped", "ready");
      const pids = readPids(pidsFile);
      // The MCP conversation is with the grandchild, through pipes it inherited from the wrapper.
      expect(Number(text(await harness.manager.callTool("wrapped", "pid", {})))).toBe(pids.grandchild);
      expect(isGone(pids.wrapper) || isGone(pids.grandchild)).toBe(false);

      const t0 = performance.now();
      process.kill(pids.wrapper, "SIGKILL");
      const { snapshot } = await harness.waitForState("wrapped", "backoff", ready.index + 1);
      const noticedMs = performance.now() - t0;
      expect(snapshot.lastError).toContain("SIGKILL");
      expect(harness.statesOf("wrapped", ready.index + 1)[0]).toBe("backoff");
      // Polled: the grandchild is not our child, so no event reports its death.
      const goneMs = await pollUntil("the grandchild's death", () => isGone(pids.grandchild), 5000);
      console.info(
        `[timing] wrapper kill -9: backoff after ${noticedMs.toFixed(0)} ms; grandchild gone ${goneMs.toFixed(0)} ms after that`,
      );
    },
    SLOW,
  );

  it(
    "stop() ends both the wrapper and a grandchild that ignores SIGTERM (the whole process group)",
    async () => {
      const pidsFile = join(tempDir(), "pids.json");
      const harness = new Harness(
        gatehouse([stdioServer("wrapped", WRAPPER, { env: { PIDS_FILE: pidsFile, GRANDCHILD: STUBBORN } })]),
      );
      harness.manager.start();
      await harness.waitForState("wrapped", "ready");
      const pids = readPids(pidsFile);
      expect(Number(text(await harness.manager.callTool("wrapped", "pid", {})))).toBe(pids.grandchild);

      const t0 = performance.now();
      await harness.manager.stop();
      const stopMs = performance.now() - t0;
      // Our own child is reaped by the time stop() resolves.
      expect(isReaped(pids.wrapper)).toBe(true);
      const goneMs = await pollUntil("the grandchild's death", () => isGone(pids.grandchild), 2000);
      expect(harness.manager.get("wrapped").snapshot().state).toBe("closed");
      console.info(
        `[timing] stop() of wrapper + stubborn grandchild: ${stopMs.toFixed(0)} ms; grandchild gone ${goneMs.toFixed(0)} ms later`,
      );
    },
    SLOW,
  );

  it(
    "stop() ends a server that ignores SIGTERM and its closed stdin, at the SIGKILL stage",
    async () => {
      const harness = new Harness(gatehouse([stdioServer("stubborn", STUBBORN)]));
      harness.manager.start();
      await harness.waitForState("stubborn", "ready");
      const pid = Number(text(await harness.manager.callTool("stubborn", "pid", {})));
      seenPids.add(pid);
      expect(isGone(pid)).toBe(false);

      const t0 = performance.now();
      await harness.manager.stop();
      const stopMs = performance.now() - t0;
      expect(isReaped(pid)).toBe(true);
      // It outlived both earlier stages, so only SIGKILL can have ended it.
      expect(stopMs).toBeGreaterThanOrEqual(STOP_GRACE_MS - 50);
      expect(stopMs).toBeLessThan(STOP_GRACE_MS + 2000);
      console.info(
        `[timing] stop() of stubborn: ${stopMs.toFixed(0)} ms (grace 1000 + 2000 ms, then SIGKILL)`,
      );
    },
    SLOW,
  );
});

describe("Gatehouse stopped by a signal", () => {
  /** Resolves once `output()` matches every pattern; rejects if the child exits first or after `timeoutMs`. */
  function outputMatches(child: ChildProcess, output: () => string, patterns: RegExp[], timeoutMs: number) {
    return new Promise<void>((resolve, reject) => {
      const done = () => {
        realClearTimeout(timer);
        child.stdout?.off("data", check);
        child.stderr?.off("data", check);
        child.off("exit", exited);
      };
      const check = () => {
        if (patterns.every((p) => p.test(output()))) {
          done();
          resolve();
        }
      };
      const exited = (code: number | null, signal: string | null) => {
        done();
        reject(new Error(`Gatehouse exited (${signal ?? code}) before it was ready; output:\n${output()}`));
      };
      const timer = realSetTimeout(() => {
        done();
        reject(new Error(`Gatehouse not ready within ${timeoutMs} ms; output:\n${output()}`));
      }, timeoutMs);
      child.stdout?.on("data", check);
      child.stderr?.on("data", check);
      child.once("exit", exited);
      check();
    });
  }

  it.each(["SIGTERM", "SIGINT"] as const)(
    "on %s Gatehouse stops every stdio child (an npx-style wrapper's grandchild too), exits 0 and leaves no orphan",
    async (signal) => {
      const dir = tempDir();
      const configFile = join(dir, "gatehouse.json");
      const pidsFile = join(dir, "wrapper-pids.json");
      const stubbornPidFile = join(dir, "stubborn.pid");
      writeFileSync(
        configFile,
        JSON.stringify({
          mcpServers: {
            wrapped: {
              command: NODE,
              args: [WRAPPER],
              env: { PIDS_FILE: pidsFile, GRANDCHILD: STUBBORN },
              enabled: true,
            },
            stubborn: { command: NODE, args: [STUBBORN], env: { PID_FILE: stubbornPidFile }, enabled: true },
          },
          catalogue: { refreshSeconds: 0 },
        }),
      );
      // Only what boot needs, not the test runner's environment.
      const bootEnv: Record<string, string> = {
        PATH: process.env.PATH ?? "/usr/bin:/bin",
        HOME: process.env.HOME ?? dir,
        TMPDIR: tmpdir(),
        GATEHOUSE_CONFIG: configFile,
        GATEHOUSE_DB: join(dir, "data", "gatehouse.db"),
        GATEHOUSE_LOG_LEVEL: "info",
      };
      const child = spawn(
        NODE,
        [
          "--conditions=react-server",
          "--import",
          "tsx",
          "-e",
          "import('./server/boot.ts').then(m => m.boot())",
        ],
        {
          cwd: ROOT,
          // Next's ProcessEnv type requires NODE_ENV, which boot does not need.
          env: bootEnv as NodeJS.ProcessEnv,
          stdio: ["ignore", "pipe", "pipe"],
        },
      );
      bootChildren.push(child);
      let output = "";
      child.stdout?.setEncoding("utf8");
      child.stderr?.setEncoding("utf8");
      child.stdout?.on("data", (chunk: string) => {
        output += chunk;
      });
      child.stderr?.on("data", (chunk: string) => {
        output += chunk;
      });
      const exit = new Promise<{ code: number | null; signal: string | null }>((resolve) =>
        child.once("exit", (code, sig) => resolve({ code, signal: sig })),
      );

      await outputMatches(
        child,
        () => output,
        [/\[mcp\] server wrapped ready/, /\[mcp\] server stubborn ready/],
        20_000,
      );
      const pids = readPids(pidsFile);
      const stubborn = Number(readFileSync(stubbornPidFile, "utf8"));
      seenPids.add(stubborn);
      const all = [pids.wrapper, pids.grandchild, stubborn];
      expect(all.filter(isGone)).toEqual([]);

      const t0 = performance.now();
      expect(child.kill(signal)).toBe(true);
      const exited = await Promise.race([
        exit,
        new Promise<never>((_, reject) =>
          realSetTimeout(() => reject(new Error(`Gatehouse did not exit; output:\n${output}`)), 15_000),
        ),
      ]);
      const exitMs = performance.now() - t0;
      expect(exited).toEqual({ code: 0, signal: null });
      expect(output).toContain(`${signal}: stopping tool servers`);
      // Polled: once Gatehouse has exited none of these is our child, and no event reports them.
      const goneMs = await pollUntil("every tool server process's death", () => all.every(isGone), 2000);
      console.info(
        `[timing] boot ${signal}: exit 0 after ${exitMs.toFixed(0)} ms; all ${all.length} pids gone ${goneMs.toFixed(0)} ms after exit`,
      );
    },
    SLOW,
  );
});

// ---------------------------------------------------------------------------------------------
// 7. Catalogue freshness, through a real runtime and its SQLite catalogue

describe("catalogue freshness", () => {
  function startRuntime(servers: ServerConfig[], refreshSeconds = 0): Runtime {
    // `gatehouse()` bypasses validateConfig, whose minimum refreshSeconds is 10.
    const runtime = createRuntime({
      config: gatehouse(servers, refreshSeconds),
      dbFile: join(tempDir(), "gatehouse.db"),
    });
    runtimes.push(runtime);
    return runtime;
  }

  /** remote tool name → status of the catalogue rows of `server`. */
  function rowsOf(runtime: Runtime, server: string): Map<string, string> {
    const rows = runtime.db
      .select({ name: toolsTable.remoteName, status: toolsTable.status })
      .from(toolsTable)
      .where(eq(toolsTable.server, server))
      .all();
    return new Map(rows.map((r) => [r.name, r.status]));
  }

  /** Resolves once the catalogue of `server` satisfies `probe` (checked now and on every catalogue event). */
  async function catalogueUntil(
    runtime: Runtime,
    server: string,
    what: string,
    probe: (rows: Map<string, string>) => boolean,
    timeoutMs = 15_000,
  ): Promise<void> {
    const ok = () => probe(rowsOf(runtime, server));
    await waitForEvent(runtime.bus, (e) => e.type === "catalogue" && e.server === server && ok(), {
      already: ok,
      timeoutMs,
      what: () => `${what} (catalogue of ${server}: ${JSON.stringify([...rowsOf(runtime, server)])})`,
    });
  }

  async function ready(runtime: Runtime, server: string): Promise<void> {
    const isReady = () => runtime.manager.get(server).snapshot().state === "ready";
    await waitForEvent(runtime.bus, (e) => e.type === "server" && e.name === server && isReady(), {
      already: isReady,
      timeoutMs: 15_000,
      what: () => `${server} to be ready (${JSON.stringify(runtime.manager.get(server).snapshot())})`,
    });
  }

  async function listCount(runtime: Runtime, server: string): Promise<number> {
    return Number(text(await runtime.manager.callTool(server, "list_count", {})));
  }

  it(
    "tools/list follows nextCursor: 25 tools over 3 pages all reach the catalogue",
    async () => {
      const runtime = startRuntime([stdioServer("paged", PAGED)]);
      await catalogueUntil(runtime, "paged", "25 rows", (rows) => rows.size === 25);
      await ready(runtime, "paged");
      const expected = [
        "list_count",
        ...Array.from({ length: 24 }, (_, i) => `tool_${String(i + 1).padStart(2, "0")}`),
      ];
      const rows = rowsOf(runtime, "paged");
      expect([...rows.keys()].sort()).toEqual(expected.sort());
      expect(new Set(rows.values())).toEqual(new Set(["proposed"]));
      expect(runtime.manager.get("paged").snapshot().listedTools).toBe(25);
      expect(await listCount(runtime, "paged")).toBe(3);
    },
    SLOW,
  );

  it(
    "a server that never stops paging is read for MAX_TOOL_PAGES pages, and still becomes ready",
    async () => {
      const runtime = startRuntime([
        stdioServer("endless", PAGED, { env: { ENDLESS: "1", PAGE_SIZE: "5" } }),
      ]);
      const t0 = performance.now();
      await ready(runtime, "endless");
      const readyMs = performance.now() - t0;
      expect(runtime.manager.get("endless").snapshot().listedTools).toBe(MAX_TOOL_PAGES * 5);
      expect(rowsOf(runtime, "endless").size).toBe(MAX_TOOL_PAGES * 5);
      expect(await listCount(runtime, "endless")).toBe(MAX_TOOL_PAGES);
      console.info(
        `[timing] endless paging: ready after ${readyMs.toFixed(0)} ms, ${MAX_TOOL_PAGES} pages read`,
      );
    },
    SLOW,
  );

  it(
    "list_changed refreshes the catalogue: the new tool is proposed and existing rows keep their status",
    async () => {
      const runtime = startRuntime([stdioServer("growing", GROWING)]);
      await ready(runtime, "growing");
      expect(rowsOf(runtime, "growing")).toEqual(
        new Map([
          ["grow", "proposed"],
          ["list_count", "proposed"],
        ]),
      );
      setToolStatus(runtime.db, { localName: "growing_grow", status: "enabled", actor: "test" });
      setToolStatus(runtime.db, { localName: "growing_list_count", status: "disabled", actor: "test" });

      const t0 = performance.now();
      expect(text(await runtime.manager.callTool("growing", "grow", {}))).toBe("grown_1");
      await catalogueUntil(runtime, "growing", "a row for grown_1", (rows) => rows.has("grown_1"));
      const ms = performance.now() - t0;
      expect(rowsOf(runtime, "growing")).toEqual(
        new Map([
          ["grow", "enabled"],
          ["grown_1", "proposed"],
          ["list_count", "disabled"],
        ]),
      );
      expect(runtime.manager.get("growing").snapshot().listedTools).toBe(3);
      console.info(`[timing] list_changed: new row ${ms.toFixed(0)} ms after the grow call started`);
    },
    SLOW,
  );

  it(
    "a burst of 5 list_changed notifications leads to far fewer than 5 tools/list requests",
    async () => {
      const runtime = startRuntime([stdioServer("growing", GROWING)]);
      await ready(runtime, "growing");
      const before = await listCount(runtime, "growing");
      expect(before).toBe(1);

      // The fixture sends all 5 notifications before it answers, on the same ordered stream: by
      // the time the call resolves, every refresh they cause has been scheduled, and the first
      // catalogue event that has grown_1 is that refresh.
      expect(text(await runtime.manager.callTool("growing", "grow", { notify: 5 }))).toBe("grown_1");
      await catalogueUntil(runtime, "growing", "a row for grown_1", (rows) => rows.has("grown_1"));
      const lists = (await listCount(runtime, "growing")) - before;
      expect(lists).toBeGreaterThanOrEqual(1);
      expect(lists).toBeLessThanOrEqual(2);
      console.info(`[timing] list_changed burst: 5 notifications → ${lists} tools/list request(s)`);
    },
    SLOW,
  );

  it(
    "the periodic refresh (refreshSeconds 1) finds a tool added without any notification",
    async () => {
      const runtime = startRuntime([stdioServer("drifting", DRIFTING)], 1);
      await ready(runtime, "drifting");
      expect(rowsOf(runtime, "drifting")).toEqual(new Map([["steady", "proposed"]]));
      const t0 = performance.now();
      await catalogueUntil(runtime, "drifting", "a row for late", (rows) => rows.has("late"), 10_000);
      const ms = performance.now() - t0;
      expect(rowsOf(runtime, "drifting")).toEqual(
        new Map([
          ["late", "proposed"],
          ["steady", "proposed"],
        ]),
      );
      console.info(
        `[timing] periodic refresh: "late" catalogued ${ms.toFixed(0)} ms after ready (refreshSeconds 1)`,
      );
    },
    SLOW,
  );
});
