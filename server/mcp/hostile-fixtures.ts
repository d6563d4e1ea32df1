import type { ChildProcess } from "node:child_process";
import { setTimeout as delay } from "node:timers/promises";
import { cleanUp, MiB, stdioServer } from "@/test/support/mcp-harness";
import type { ServerConfig } from "../config";

// What the hostile-server suites of both protocol eras (hostile.test.ts, hostile-modern.test.ts)
// share: HTTP server configs, fixture programs the tests start themselves, and a bounded poll.

/** Per-test timeout: the machine has 2 cores and every test starts real processes. */
export const SLOW = 30_000;

export function httpServer(
  name: string,
  url: string,
  over: Partial<ServerConfig> & Pick<ServerConfig, "transport">,
): ServerConfig {
  return {
    ...stdioServer(name, ""),
    command: null,
    args: [],
    cwd: null,
    url,
    allowPrivate: true,
    ...over,
  };
}

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
