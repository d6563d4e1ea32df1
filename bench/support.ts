/** Process and measurement helpers for the benchmark (bench/run.ts). */
import { type ChildProcess, spawn } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import net from "node:net";
import path from "node:path";
import type { CallerResult, CallerSpec } from "./caller";

export const root = new URL("..", import.meta.url).pathname;

export interface Started {
  child: ChildProcess;
  port: number;
  output: () => string;
  stop(): Promise<void>;
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const addr = srv.address();
      srv.close(() => (addr && typeof addr === "object" ? resolve(addr.port) : reject(new Error("no port"))));
    });
  });
}

/**
 * Starts a process in its own group and resolves when its stdout matches `ready` (the first
 * capture group, when numeric, is taken as the port). Stop kills the whole group.
 */
export function startProcess(
  cmd: string,
  args: string[],
  opts: { env?: Record<string, string>; ready: RegExp; port?: number; timeoutMs?: number },
): Promise<Started> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, {
      cwd: root,
      env: { ...process.env, ...opts.env },
      stdio: ["ignore", "pipe", "pipe"],
      detached: true,
    });
    let out = "";
    const timer = setTimeout(
      () => reject(new Error(`${cmd} ${args.join(" ")} not ready in time:\n${out.slice(-2000)}`)),
      opts.timeoutMs ?? 60_000,
    );
    const stop = async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise<void>((r) => child.once("exit", () => r()));
      try {
        process.kill(-(child.pid ?? 0), "SIGTERM");
      } catch {
        return;
      }
      const killer = setTimeout(() => {
        try {
          process.kill(-(child.pid ?? 0), "SIGKILL");
        } catch {
          // Gone already.
        }
      }, 5000);
      await exited;
      clearTimeout(killer);
      // npm exits at the signal; what it started (the server, its tool servers) may take its time
      // or hang in its shutdown (a server profiled, its database gone). Nothing of the group may
      // outlive the row: whatever is left after 5 s is killed.
      const group = -(child.pid ?? 0);
      const alive = () => {
        try {
          process.kill(group, 0);
          return true;
        } catch {
          return false;
        }
      };
      const deadline = Date.now() + 5000;
      while (alive() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
      if (alive()) {
        try {
          process.kill(group, "SIGKILL");
        } catch {
          // Gone meanwhile.
        }
      }
    };
    const onData = (chunk: Buffer) => {
      out += chunk.toString("utf8");
      const m = opts.ready.exec(out);
      if (m) {
        clearTimeout(timer);
        child.stdout?.off("data", onData);
        child.stdout?.on("data", (c: Buffer) => {
          out += c.toString("utf8");
        });
        const port = m[1] && /^\d+$/.test(m[1]) ? Number(m[1]) : (opts.port ?? 0);
        resolve({ child, port, output: () => out, stop });
      }
    };
    child.stdout?.on("data", onData);
    child.stderr?.on("data", (c: Buffer) => {
      out += c.toString("utf8");
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`${cmd} exited with ${code} before it was ready:\n${out.slice(-2000)}`));
    });
  });
}

export interface Stats {
  p50: number;
  p99: number;
  n: number;
}

export function percentiles(samples: number[]): Stats {
  const s = [...samples].sort((a, b) => a - b);
  const at = (q: number) => s[Math.min(s.length - 1, Math.floor(q * s.length))] ?? Number.NaN;
  return { p50: at(0.5), p99: at(0.99), n: s.length };
}

/** `n` sequential calls after `warmup` unmeasured ones; milliseconds per call. */
export async function sequential(fn: () => Promise<unknown>, n: number, warmup: number): Promise<Stats> {
  for (let i = 0; i < warmup; i++) await fn();
  const samples: number[] = [];
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    await fn();
    samples.push(performance.now() - t);
  }
  return percentiles(samples);
}

/** `total` calls shared by `concurrency` callers; calls per second. */
export async function concurrent(
  fn: () => Promise<unknown>,
  total: number,
  concurrency: number,
): Promise<number> {
  let next = 0;
  const t = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < total) {
        next++;
        await fn();
      }
    }),
  );
  return total / ((performance.now() - t) / 1000);
}

/** CPU time (user + system) a process has used so far, in milliseconds, from /proc. */
export function cpuMsOf(pid: number): number {
  // Fields after the command name (which may contain spaces) start at the state, field 3.
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.split(" ") ?? [];
  const ticks = Number(fields[11] ?? 0) + Number(fields[12] ?? 0);
  return (ticks * 1000) / CLOCK_TICKS;
}

/**
 * CPU time (user + system) of a process and all its descendants so far, in milliseconds: each
 * live process's own time plus what its children that ended and were waited for used (the
 * cutime/cstime fields), so a backend that exits between two readings is still counted.
 */
export function treeCpuMs(pid: number): number {
  const stats = new Map<number, string[]>();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const fields = readFileSync(`/proc/${entry}/stat`, "utf8").split(") ")[1]?.split(" ") ?? [];
      stats.set(Number(entry), fields);
    } catch {
      // Gone between the listing and the read.
    }
  }
  let ticks = 0;
  const pending = [pid];
  for (let p = pending.pop(); p !== undefined; p = pending.pop()) {
    const f = stats.get(p);
    if (!f) continue;
    ticks += Number(f[11] ?? 0) + Number(f[12] ?? 0) + Number(f[13] ?? 0) + Number(f[14] ?? 0);
    for (const [child, cf] of stats) if (Number(cf[1]) === p) pending.push(child);
  }
  return (ticks * 1000) / CLOCK_TICKS;
}
/** USER_HZ: Linux reports /proc times in 1/100 s on every architecture Node runs on. */
const CLOCK_TICKS = 100;

/** Resident set size of a process in bytes, from /proc. */
export function rssOf(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const kb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
  return kb * 1024;
}

export const mib = (bytes: number) => (bytes / 1024 / 1024).toFixed(1);

/** Parent pid of a process, from /proc; null once it is gone. */
function parentOf(pid: number): number | null {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.split(" ") ?? [];
    return Number(fields[1] ?? 0);
  } catch {
    return null;
  }
}

/**
 * The first descendant of `ancestor` whose command line matches `pattern`, or null: a process
 * started through `npm start` is a grandchild of what the benchmark spawned (npm, a shell,
 * scripts/start.mjs, then the server), and it is the server's CPU and RSS that are measured.
 */
export function descendantMatching(ancestor: number, pattern: RegExp): number | null {
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    const pid = Number(entry);
    let cmdline: string;
    try {
      cmdline = readFileSync(`/proc/${pid}/cmdline`, "utf8").replaceAll("\0", " ");
    } catch {
      continue;
    }
    if (!pattern.test(cmdline)) continue;
    for (let p: number | null = parentOf(pid); p !== null && p > 1; p = parentOf(p)) {
      if (p === ancestor) return pid;
    }
  }
  return null;
}

/** Runs one caller process (bench/caller.ts) with `spec` and returns what it measured. */
export async function runCaller(spec: CallerSpec): Promise<CallerResult> {
  const caller = await startProcess(
    process.execPath,
    [
      "--conditions=react-server",
      "--import",
      "tsx",
      path.join(root, "bench", "caller.ts"),
      JSON.stringify(spec),
    ],
    { ready: /^\{"seq".*\}$/m, timeoutMs: 600_000 },
  );
  const line = /^\{"seq".*\}$/m.exec(caller.output())?.[0] ?? "{}";
  await caller.stop();
  return JSON.parse(line) as CallerResult;
}
