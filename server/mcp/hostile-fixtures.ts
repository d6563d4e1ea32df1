import { type ChildProcess, spawn } from "node:child_process";
import { join } from "node:path";
import { setTimeout as delay } from "node:timers/promises";
import { cleanUp, FIXTURES, MiB, NODE, rejection, stdioServer } from "@/test/support/mcp-harness";
import type { ServerConfig } from "../config";

// What the hostile-server suite (hostile.test.ts) needs besides its tests: the protocol era a
// fixture program is started in, stdio server configs, fixture programs the tests start themselves,
// an RSS sampler and a bounded poll.

/**
 * The protocol era a fixture program speaks: with `--modern` the fixtures in test/fixtures/servers
 * are modern-only 2026-07-28 servers (modern-era.mjs: `server/discover`, `initialize` refused),
 * without it 2025 servers.
 */
export interface FixtureEra {
  /** The era as test titles name it. */
  readonly name: "2025" | "2026-07-28";
  /** Arguments after the script: `["--modern"]` or none. */
  readonly args: readonly string[];
}

/** A stdio server running `node script ...era.args`, otherwise as {@link stdioServer}. */
export function eraStdio(
  era: FixtureEra,
  name: string,
  script: string,
  over: Partial<ServerConfig> = {},
): ServerConfig {
  return stdioServer(name, script, { args: [script, ...era.args], ...over });
}

/** Per-test timeout: the machine has 2 cores and every test starts real processes. */
export const SLOW = 30_000;

/** A fixture program started by a test (not by Gatehouse), with its output kept; killed by {@link killFixtures}. */
export class Fixture {
  stdout = "";
  stderr = "";
  private readonly listeners = new Set<() => void>();

  constructor(readonly child: ChildProcess) {
    child.stdout?.setEncoding("utf8");
    child.stderr?.setEncoding("utf8");
    child.stdout?.on("data", (chunk: string) => {
      this.stdout += chunk;
      this.notify();
    });
    child.stderr?.on("data", (chunk: string) => {
      this.stderr += chunk;
      this.notify();
    });
    child.once("exit", () => this.notify());
    fixtures.push(this);
  }

  private notify(): void {
    for (const listener of [...this.listeners]) listener();
  }

  get exited(): boolean {
    return this.child.exitCode !== null || this.child.signalCode !== null;
  }

  /** Resolves with the first match of `pattern` in the process's `stream` output. */
  waitForOutput(stream: "stdout" | "stderr", pattern: RegExp, timeoutMs = 15_000): Promise<RegExpExecArray> {
    return new Promise((resolve, reject) => {
      const done = () => {
        clearTimeout(timer);
        this.listeners.delete(check);
      };
      const check = () => {
        const match = pattern.exec(this[stream]);
        if (match) {
          done();
          resolve(match);
        } else if (this.exited) {
          done();
          reject(new Error(`fixture exited before ${pattern} on ${stream}; stderr: ${this.stderr}`));
        }
      };
      const timer = setTimeout(() => {
        done();
        reject(new Error(`no ${pattern} on ${stream} within ${timeoutMs} ms; stderr: ${this.stderr}`));
      }, timeoutMs);
      this.listeners.add(check);
      check();
    });
  }

  async kill(): Promise<void> {
    if (this.exited) return;
    const exited = new Promise((resolve) => this.child.once("exit", resolve));
    this.child.kill("SIGKILL");
    await exited;
  }
}

const fixtures: Fixture[] = [];

/** Kills every fixture started since the last call, and stops every harness; for afterEach. */
export async function killFixtures(): Promise<void> {
  await Promise.all(fixtures.splice(0).map((f) => f.kill()));
  await cleanUp();
}

/** Polls `probe` every 10 ms until it yields a value; for conditions that emit no event. */
export async function poll<T>(what: string, probe: () => T | undefined, timeoutMs = 5_000): Promise<T> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const value = probe();
    if (value !== undefined) return value;
    if (performance.now() > deadline) throw new Error(`no ${what} within ${timeoutMs} ms`);
    await delay(10);
  }
}

export const mib = (bytes: number) => (bytes / MiB).toFixed(1);

/** Runs `call`, which must reject, sampling this process's RSS every 5 ms meanwhile. */
export async function sampled(call: () => Promise<unknown>) {
  const before = process.memoryUsage().rss;
  let peak = before;
  const sample = () => {
    peak = Math.max(peak, process.memoryUsage().rss);
  };
  const sampler = setInterval(sample, 5);
  let outcome: { error: unknown; ms: number };
  try {
    const t0 = performance.now();
    outcome = await rejection(call(), t0);
  } finally {
    clearInterval(sampler);
    sample();
  }
  return { outcome, before, peak, growth: peak - before };
}

/** Starts test/fixtures/servers/http-flood.mjs in `mode` and `era`; resolves once it listens. */
export async function httpFlood(mode: string, era: FixtureEra): Promise<{ fixture: Fixture; url: string }> {
  const fixture = new Fixture(
    spawn(NODE, [join(FIXTURES, "http-flood.mjs"), ...era.args], {
      env: { ...process.env, PORT: "0", MODE: mode },
      stdio: ["ignore", "pipe", "pipe"],
    }),
  );
  const match = await fixture.waitForOutput("stdout", /listening (\d+)\n/);
  return { fixture, url: `http://127.0.0.1:${match[1]}/mcp` };
}
