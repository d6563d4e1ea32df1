/**
 * `npm start` (scripts/start.mjs) as a person runs it, with real processes: the first start's
 * build says how long it takes and shows that it is still at work through a silent stretch, and
 * the launcher's signals (Ctrl-C to the terminal's whole process group, a SIGTERM to the launcher
 * alone) end the server it started in order, its store's lock file removed.
 *
 * Building the real app takes minutes, so the build test runs the launcher from a copy of
 * scripts/ whose `next build` and server bundling are stand-ins; the signal test runs the
 * launcher in place, on a build folder (`NEXT_DIST_DIR`) whose server bundle runs `boot()` as
 * server/main.ts does (test/fixtures/boot-host.ts).
 */
import { type ChildProcess, spawn } from "node:child_process";
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { afterEach, describe, expect, it } from "vitest";

const REPO_ROOT = path.resolve(__dirname, "..");
const BOOT_HOST = path.join(REPO_ROOT, "test", "fixtures", "boot-host.ts");
const STUBBORN_SERVER = path.join(REPO_ROOT, "test", "fixtures", "servers", "stubborn.mjs");
/** Real child processes (tsx, a runtime, tool servers) on a 2-core machine shared with others. */
const SLOW_TEST = 60_000;

const launchers: ChildProcess[] = [];
const dirs: string[] = [];
const pidFiles: string[] = [];

afterEach(() => {
  for (const child of launchers.splice(0)) {
    if (child.exitCode !== null || child.signalCode !== null || child.pid === undefined) continue;
    try {
      // The launcher leads its own process group: this ends it and the server it started.
      process.kill(-child.pid, "SIGKILL");
    } catch {
      // Already gone.
    }
  }
  for (const file of pidFiles.splice(0)) {
    if (!existsSync(file)) continue;
    try {
      process.kill(Number(readFileSync(file, "utf8")), "SIGKILL");
    } catch {
      // Already gone.
    }
  }
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function tempDir(): string {
  const dir = mkdtempSync(path.join(tmpdir(), "gatehouse-start-"));
  dirs.push(dir);
  return dir;
}

/** A launcher watched as it runs: everything it and its children printed so far, and its end. */
interface Launch {
  child: ChildProcess;
  output(): string;
  /** Resolves once the output matches `pattern`; rejects if the launcher ends first. */
  printed(pattern: RegExp): Promise<void>;
  ended: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** Only what a launcher needs, not the test runner's environment (`NODE_ENV` is not among it). */
function launcherEnv(env: Record<string, string>): NodeJS.ProcessEnv {
  const out: Record<string, string> = {
    PATH: process.env.PATH ?? "/usr/bin:/bin",
    HOME: process.env.HOME ?? tmpdir(),
    ...env,
  };
  return out as NodeJS.ProcessEnv;
}

/** `node <root>/scripts/start.mjs`, run from the repository, leading a process group of its own as a terminal job does. */
function launch(root: string, env: Record<string, string>): Launch {
  const child = spawn(process.execPath, [path.join(root, "scripts", "start.mjs")], {
    cwd: REPO_ROOT,
    env: launcherEnv(env),
    stdio: ["ignore", "pipe", "pipe"],
    detached: true,
  });
  launchers.push(child);
  let seen = "";
  const watchers = new Set<() => void>();
  const take = (chunk: Buffer) => {
    seen += chunk.toString();
    for (const watcher of [...watchers]) watcher();
  };
  child.stdout?.on("data", take);
  child.stderr?.on("data", take);
  const ended = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once("exit", (code, signal) => resolve({ code, signal })),
  );
  return {
    child,
    output: () => seen,
    printed: (pattern) =>
      new Promise<void>((resolve, reject) => {
        const check = () => {
          if (!pattern.test(seen)) return;
          watchers.delete(check);
          resolve();
        };
        watchers.add(check);
        check();
        void ended.then(() => {
          if (!watchers.delete(check)) return;
          reject(new Error(`the launcher ended before printing ${pattern}; it printed:\n${seen}`));
        });
      }),
    ended,
  };
}

describe("the first start's build", () => {
  it(
    "says it takes minutes, passes the build's own lines through, and says it is still at work through a silent stretch",
    async () => {
      const root = tempDir();
      mkdirSync(path.join(root, "scripts"));
      for (const script of ["start.mjs", "server-command.mjs"])
        copyFileSync(path.join(REPO_ROOT, "scripts", script), path.join(root, "scripts", script));
      // The config check passes; `next build` prints a line, then nothing until it is told to end.
      mkdirSync(path.join(root, "server", "cli"), { recursive: true });
      writeFileSync(path.join(root, "server", "cli", "main.ts"), "process.exit(0);\n");
      const finish = path.join(root, "finish-build");
      const nextBin = path.join(root, "node_modules", "next", "dist", "bin");
      mkdirSync(nextBin, { recursive: true });
      writeFileSync(
        path.join(nextBin, "next"),
        `const fs = require("node:fs");
console.log("   Creating an optimized production build ...");
const done = () => {
  if (!fs.existsSync(${JSON.stringify(finish)})) return;
  fs.writeFileSync(".next/BUILD_ID", "stand-in");
  process.exit(0);
};
fs.mkdirSync(".next", { recursive: true });
fs.watch(${JSON.stringify(root)}, done);
done();
`,
      );
      writeFileSync(
        path.join(root, "scripts", "build-server.mjs"),
        `import { writeFileSync } from "node:fs";
writeFileSync(".next/gatehouse-server.mjs", 'console.log("SERVER UP"); setInterval(() => {}, 1 << 30);\\n');
`,
      );

      const start = launch(root, {});
      await start.printed(/still building the app \(next build\)/);
      writeFileSync(finish, "");
      await start.printed(/SERVER UP/);
      const out = start.output();
      expect(out).toContain("This takes one to three minutes");
      expect(out).not.toContain("about a minute");
      expect(out).toContain("Creating an optimized production build ...");
      expect(out).toMatch(/Built in \d+ s; starting Gatehouse\./);

      start.child.kill("SIGTERM");
      expect((await start.ended).signal).toBeNull();
    },
    SLOW_TEST,
  );
});

describe("npm start's signals", () => {
  for (const [signal, to] of [
    ["SIGINT", "the launcher's whole process group, as Ctrl-C in a terminal"],
    ["SIGTERM", "the launcher alone, which forwards it"],
  ] as const) {
    it(
      `a ${signal} to ${to} stops the server it started, whose lock file is gone`,
      async () => {
        const dir = tempDir();
        // A build folder whose server bundle is boot() as server/main.ts runs it.
        const dist = path.join(dir, "build");
        mkdirSync(dist);
        writeFileSync(path.join(dist, "BUILD_ID"), "stand-in");
        writeFileSync(
          path.join(dist, "gatehouse-server.mjs"),
          `await import(${JSON.stringify(pathToFileURL(BOOT_HOST).href)});\n`,
        );
        const pidFile = path.join(dir, "stubborn.pid");
        pidFiles.push(pidFile);
        const config = path.join(dir, "gatehouse.json");
        const db = path.join(dir, "gatehouse.db");
        writeFileSync(
          config,
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
        const start = launch(REPO_ROOT, {
          GATEHOUSE_CONFIG: config,
          GATEHOUSE_DB: db,
          GATEHOUSE_LOG_LEVEL: "info",
          NEXT_DIST_DIR: path.relative(REPO_ROOT, dist),
          // The stand-in bundle is TypeScript run as the build would run it: server code.
          NODE_OPTIONS: "--conditions=react-server --import tsx",
        });
        await start.printed(/BOOTED \d+/);
        await start.printed(/server stubborn ready/);
        const server = Number(/BOOTED (\d+)/.exec(start.output())?.[1]);
        const lock = JSON.parse(readFileSync(`${db}.lock`, "utf8")) as { pid: number };
        expect(lock.pid).toBe(server);
        expect(server).not.toBe(start.child.pid);

        const launcher = start.child.pid ?? 0;
        process.kill(signal === "SIGINT" ? -launcher : launcher, signal);

        const end = await start.ended;
        expect(end, start.output()).toEqual({ code: 0, signal: null });
        expect(existsSync(`${db}.lock`)).toBe(false);
        expect(() => process.kill(server, 0)).toThrow();
      },
      SLOW_TEST,
    );
  }
});
