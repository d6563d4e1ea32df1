/**
 * One process per store, with real processes: a second Gatehouse server (test/fixtures/boot-host.ts
 * runs `boot()` as server/main.ts does) on the store of a running one exits non-zero naming the
 * holder and changes nothing — the first one's running call stays running; a lock left by a
 * server killed with SIGKILL is taken over by the next; and the CLI, which takes no lock, works
 * beside a running server.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { createInterface } from "node:readline";
import { eq } from "drizzle-orm";
import { afterEach, describe, expect, it } from "vitest";
import { getToolRow } from "@/server/catalogue/catalogue";
import {
  callStatus,
  DEMO_SERVER,
  enableTool,
  REPO_ROOT,
  startTestRuntime,
  type TestRuntime,
  waitForEvent,
} from "@/test/support/runtime";
import { sqliteOf } from "./db";
import { auditEvents } from "./schema";

const BOOT_HOST = path.join(REPO_ROOT, "test", "fixtures", "boot-host.ts");
const SLOW_SERVER = path.join(REPO_ROOT, "test", "fixtures", "servers", "slow.mjs");
/** A tool server that ignores its closed stdin and SIGTERM: a stop waits for its SIGKILL stage. */
const STUBBORN_SERVER = path.join(REPO_ROOT, "test", "fixtures", "servers", "stubborn.mjs");
/** Real child processes (tsx, a runtime, tool servers) on a 2-core machine shared with others. */
const SLOW_TEST = 60_000;

const children: ChildProcess[] = [];
const dirs: string[] = [];
/** Files where the slow tool server writes its pid. */
const pidFiles: string[] = [];
let rt: TestRuntime | undefined;

afterEach(async () => {
  for (const child of children.splice(0)) {
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((resolve) => child.once("exit", resolve));
      child.kill("SIGKILL");
      await exited;
    }
  }
  // A runtime's stop waits for its running calls: end the slow one by stopping its tool server.
  for (const file of pidFiles.splice(0)) {
    if (!existsSync(file)) continue;
    for (const pid of readFileSync(file, "utf8").split("\n").filter(Boolean)) {
      try {
        process.kill(Number(pid), "SIGKILL");
      } catch {
        // Already gone.
      }
    }
  }
  await rt?.stop();
  rt = undefined;
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

interface Outcome {
  /** Null while running (it printed BOOTED). */
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Only what a server needs, not the test runner's environment (`NODE_ENV` is not among it). */
function serverEnv(env: Record<string, string>): NodeJS.ProcessEnv {
  const out: Record<string, string> = {
    PATH: process.env.PATH ?? "/usr/bin:/bin",
    HOME: process.env.HOME ?? tmpdir(),
    ...env,
  };
  return out as NodeJS.ProcessEnv;
}

/** A boot-host process on `env`; resolves once it has booted (printed BOOTED) or exited. */
function bootHost(env: Record<string, string>): { child: ChildProcess; outcome: Promise<Outcome> } {
  const child = spawn(process.execPath, ["--conditions=react-server", "--import", "tsx", BOOT_HOST], {
    cwd: REPO_ROOT,
    env: serverEnv(env),
    stdio: ["ignore", "pipe", "pipe"],
  });
  children.push(child);
  let stdout = "";
  let stderr = "";
  child.stderr?.setEncoding("utf8").on("data", (c: string) => {
    stderr += c;
  });
  const outcome = new Promise<Outcome>((resolve) => {
    createInterface({ input: child.stdout as NodeJS.ReadableStream }).on("line", (line) => {
      stdout += `${line}\n`;
      if (line.startsWith("BOOTED ")) resolve({ code: null, stdout, stderr });
    });
    child.once("exit", (code) => resolve({ code, stdout, stderr }));
  });
  return { child, outcome };
}

/** Resolves once `child` has written a line matching `pattern` to stdout or stderr. */
function printed(child: ChildProcess, pattern: RegExp): Promise<void> {
  return new Promise((resolve, reject) => {
    let seen = "";
    const look = (chunk: Buffer) => {
      seen += chunk.toString();
      if (!pattern.test(seen)) return;
      child.stdout?.off("data", look);
      child.stderr?.off("data", look);
      resolve();
    };
    child.stdout?.on("data", look);
    child.stderr?.on("data", look);
    child.once("exit", () => reject(new Error(`exited before printing ${pattern}; printed: ${seen}`)));
  });
}

/** How `child` ended: its exit code, or the signal that killed it. */
function ended(child: ChildProcess): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  if (child.exitCode !== null || child.signalCode !== null)
    return Promise.resolve({ code: child.exitCode, signal: child.signalCode });
  return new Promise((resolve) => child.once("exit", (code, signal) => resolve({ code, signal })));
}

function exited(child: ChildProcess): Promise<number | null> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(child.exitCode);
  return new Promise((resolve) => child.once("exit", (code) => resolve(code)));
}

function lockRecord(dbFile: string): { pid: number; since: string; token: string } {
  return JSON.parse(readFileSync(`${dbFile}.lock`, "utf8")) as { pid: number; since: string; token: string };
}

function tempDir(): string {
  const dir = mkdtempSync(path.join(tmpdir(), "gatehouse-lock-proc-"));
  dirs.push(dir);
  return dir;
}

describe("one Gatehouse process per store", () => {
  it(
    "a second server on the store exits non-zero naming the first, and the first's running call stays running",
    async () => {
      const work = tempDir();
      const pidFile = path.join(work, "slow-pids.txt");
      pidFiles.push(pidFile);
      rt = await startTestRuntime({
        servers: {
          slow: {
            command: process.execPath,
            args: [SLOW_SERVER],
            env: { RUNS_FILE: path.join(work, "slow-runs.json"), PID_FILE: pidFile, SLOW_MS: "120000" },
            timeoutMs: 180_000,
            enabled: true,
          },
        },
      });
      const { runtime, dbFile } = rt;
      const slowReady = async () =>
        runtime.manager.get("slow").snapshot().state === "ready" &&
        (await getToolRow(runtime.db, "slow_write")) !== null;
      await waitForEvent(runtime.bus, slowReady, {
        already: slowReady,
        timeoutMs: 20_000,
        what: () => "slow",
      });
      await enableTool(runtime, "slow_write");
      const { call } = await runtime.broker.request(
        { kind: "agent", name: "agent-a" },
        { tool: "slow_write", arguments: {} },
      );
      expect(call.status).toBe("pending");
      await runtime.broker.approve("alice", call.id);
      expect(await callStatus(runtime, call.id)).toBe("running");
      const auditBefore = await runtime.db.select().from(auditEvents).where(eq(auditEvents.callId, call.id));
      const lockBefore = existsSync(`${dbFile}.lock`) ? readFileSync(`${dbFile}.lock`, "utf8") : null;

      const config = path.join(work, "gatehouse.json");
      writeFileSync(
        config,
        // Switched on: a dark server's warning would precede the refusal on stderr.
        JSON.stringify({ mcpServers: { demo: { command: "node", args: [DEMO_SERVER], enabled: true } } }),
      );
      const second = bootHost({
        GATEHOUSE_CONFIG: config,
        GATEHOUSE_DB: dbFile,
        GATEHOUSE_LOG_LEVEL: "warn",
      });
      const out = await second.outcome;

      // Nothing changed: the call still runs, no audit row was added, the lock is still the first's.
      expect(await callStatus(runtime, call.id)).toBe("running");
      expect(await runtime.db.select().from(auditEvents).where(eq(auditEvents.callId, call.id))).toEqual(
        auditBefore,
      );
      expect(out.stdout).not.toContain("BOOTED");
      expect(out.code).toBe(1);
      const held = lockRecord(dbFile);
      expect(readFileSync(`${dbFile}.lock`, "utf8")).toBe(lockBefore);
      expect(out.stderr).toBe(
        `Gatehouse cannot start: the store ${dbFile} is in use by Gatehouse pid ${process.pid} since ` +
          `${held.since}; stop it first (if pid ${process.pid} is not Gatehouse, delete ${dbFile}.lock)\n`,
      );
    },
    SLOW_TEST,
  );

  it(
    "a lock left by a server killed with SIGKILL is taken over by the next, which says so; a clean stop releases it",
    async () => {
      const dir = tempDir();
      const env = {
        GATEHOUSE_CONFIG: path.join(dir, "gatehouse.json"),
        GATEHOUSE_DB: path.join(dir, "gatehouse.db"),
        GATEHOUSE_LOG_LEVEL: "warn",
      };
      const dbFile = env.GATEHOUSE_DB;
      writeFileSync(env.GATEHOUSE_CONFIG, JSON.stringify({ mcpServers: {} }));

      const first = bootHost(env);
      expect((await first.outcome).code, (await first.outcome).stderr).toBeNull();
      const killed = lockRecord(dbFile);
      expect(killed.pid).toBe(first.child.pid);
      first.child.kill("SIGKILL");
      await exited(first.child);
      expect(lockRecord(dbFile)).toEqual(killed);

      const next = bootHost(env);
      const out = await next.outcome;
      expect(out.code, out.stderr).toBeNull();
      expect(out.stderr).toContain(
        `WARN [store] took over the lock of ${dbFile}: Gatehouse pid ${killed.pid} (since ${killed.since}) is gone`,
      );
      expect(lockRecord(dbFile).pid).toBe(next.child.pid);

      next.child.kill("SIGTERM");
      expect(await exited(next.child)).toBe(0);
      expect(existsSync(`${dbFile}.lock`)).toBe(false);
    },
    SLOW_TEST,
  );

  for (const signal of ["SIGINT", "SIGTERM"] as const) {
    it(
      `a ${signal} delivered twice while the tool servers stop (to the whole process group, and again forwarded by npm start) leaves no lock file`,
      async () => {
        const dir = tempDir();
        const pidFile = path.join(dir, "stubborn.pid");
        pidFiles.push(pidFile);
        const env = {
          GATEHOUSE_CONFIG: path.join(dir, "gatehouse.json"),
          GATEHOUSE_DB: path.join(dir, "gatehouse.db"),
          GATEHOUSE_LOG_LEVEL: "info",
        };
        writeFileSync(
          env.GATEHOUSE_CONFIG,
          JSON.stringify({
            mcpServers: {
              stubborn: {
                command: process.execPath,
                args: [STUBBORN_SERVER],
                env: { PID_FILE: pidFile },
                enabled: true,
              },
            },
          }),
        );
        const host = bootHost(env);
        const ready = printed(host.child, /server stubborn ready/);
        const out = await host.outcome;
        expect(out.code, out.stderr).toBeNull();
        await ready;
        expect(lockRecord(env.GATEHOUSE_DB).pid).toBe(host.child.pid);

        const stopping = printed(host.child, new RegExp(`${signal}: stopping`));
        host.child.kill(signal);
        await stopping;
        // The stubborn server holds the stop for seconds: the second signal comes in the middle.
        host.child.kill(signal);

        const end = await ended(host.child);
        expect(end.signal).toBeNull();
        expect(existsSync(`${env.GATEHOUSE_DB}.lock`)).toBe(false);
      },
      SLOW_TEST,
    );
  }

  it(
    "the CLI adds a user, creates a token and tests rules beside a running server, whose lock stays",
    async () => {
      rt = await startTestRuntime();
      const { runtime, dbFile, dir } = rt;
      const held = lockRecord(dbFile);
      const config = path.join(dir, "gatehouse.json");
      writeFileSync(
        config,
        JSON.stringify({ mcpServers: { demo: { command: "node", args: [DEMO_SERVER] } } }),
      );
      const env = { GATEHOUSE_DB: dbFile, GATEHOUSE_CONFIG: config };

      const added = await cli(["user", "add", "rita", "--role", "reviewer"], env, "a-long-password-1\n");
      expect(added.code, added.stderr).toBe(0);
      const token = await cli(["token", "create", "build-bot"], env);
      expect(token.code, token.stderr).toBe(0);
      const dry = await cli(["rules", "test", "demo_list_notes", "{}"], env);
      expect(dry.code, dry.stderr).toBe(0);
      expect(dry.stdout).toContain("demo_list_notes");

      // The running server sees what the CLI wrote, and still holds its lock.
      expect(sqliteOf(runtime.db)?.prepare("select name from users").all()).toEqual([{ name: "rita" }]);
      expect(lockRecord(dbFile)).toEqual(held);
    },
    SLOW_TEST,
  );
});

function cli(args: string[], env: Record<string, string>, stdin = ""): Promise<Outcome> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      ["--conditions=react-server", "--import", "tsx", "server/cli/main.ts", ...args],
      { cwd: REPO_ROOT, env: { ...process.env, ...env } },
    );
    children.push(child);
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (c: Buffer) => {
      stdout += c.toString();
    });
    child.stderr.on("data", (c: Buffer) => {
      stderr += c.toString();
    });
    child.once("error", reject);
    child.once("exit", (code) => resolve({ code, stdout, stderr }));
    child.stdin.end(stdin);
  });
}
