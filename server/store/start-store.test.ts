import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import pg from "pg";
import { afterEach, describe, expect, it } from "vitest";
import { REPO_ROOT } from "@/test/support/runtime";
import { freshDatabaseUrl, testDialect } from "@/test/support/store";

/**
 * How a start goes with each kind of `DATABASE_URL`: `server/boot.ts` in a process of its own
 * (test/fixtures/boot-host.ts), as `npm start` runs it.
 */

const BOOT_HOST = path.join(REPO_ROOT, "test", "fixtures", "boot-host.ts");
const KEY = "b".repeat(64);
/** Real child processes (tsx, a runtime) on a 2-core machine shared with others. */
const SLOW_TEST = 60_000;

const children: ChildProcess[] = [];
const dirs: string[] = [];
afterEach(async () => {
  for (const child of children.splice(0)) {
    if (child.exitCode !== null || child.signalCode !== null) continue;
    const exited = new Promise((resolve) => child.once("exit", resolve));
    child.kill("SIGTERM");
    await exited;
  }
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** A config with no tool servers, and a place for a SQLite file that must not appear. */
function workDir(): { config: string; dbFile: string } {
  const dir = mkdtempSync(path.join(tmpdir(), "gatehouse-start-store-"));
  dirs.push(dir);
  const config = path.join(dir, "gatehouse.json");
  writeFileSync(config, JSON.stringify({ mcpServers: {} }));
  return { config, dbFile: path.join(dir, "gatehouse.db") };
}

interface Outcome {
  /** Null while running (it printed BOOTED). */
  code: number | null;
  stdout: string;
  stderr: string;
}

function boot(env: Record<string, string>): Promise<Outcome> {
  const child = spawn(process.execPath, ["--conditions=react-server", "--import", "tsx", BOOT_HOST], {
    cwd: REPO_ROOT,
    // Only what a server needs, not the test runner's environment (`NODE_ENV` is not among it).
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: process.env.HOME ?? tmpdir(), ...env } as Record<
      string,
      string
    > as NodeJS.ProcessEnv,
    stdio: ["ignore", "pipe", "pipe"],
  });
  children.push(child);
  let stdout = "";
  let stderr = "";
  child.stderr?.setEncoding("utf8").on("data", (c: string) => {
    stderr += c;
  });
  return new Promise((resolve) => {
    child.stdout?.setEncoding("utf8").on("data", (c: string) => {
      stdout += c;
      if (stdout.includes("BOOTED ")) resolve({ code: null, stdout, stderr });
    });
    child.once("exit", (code) => resolve({ code, stdout, stderr }));
  });
}

/** A loopback port nothing listens on. */
function closedPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

describe("the store a start chooses", () => {
  it(
    "a DATABASE_URL that is no PostgreSQL URL stops the start, naming the variable and not its value",
    async () => {
      const { config, dbFile } = workDir();
      const out = await boot({
        GATEHOUSE_CONFIG: config,
        GATEHOUSE_DB: dbFile,
        GATEHOUSE_SECRET_KEY: KEY,
        DATABASE_URL: "mysql://gatehouse:hunter2-secret@db.example:3306/gatehouse",
      });
      expect(out.code).toBe(1);
      expect(out.stderr).toContain("Gatehouse cannot start: DATABASE_URL must be a PostgreSQL URL");
      expect(out.stderr + out.stdout).not.toContain("hunter2-secret");
    },
    SLOW_TEST,
  );

  it(
    "PostgreSQL that cannot be reached stops the start with where it was looked for, never the password",
    async () => {
      const { config, dbFile } = workDir();
      const port = await closedPort();
      const out = await boot({
        GATEHOUSE_CONFIG: config,
        GATEHOUSE_DB: dbFile,
        GATEHOUSE_SECRET_KEY: KEY,
        DATABASE_URL: `postgres://gatehouse:hunter2-secret@127.0.0.1:${port}/gatehouse`,
      });
      expect(out.code).toBe(1);
      expect(out.stderr).toContain(
        `Gatehouse cannot start: PostgreSQL at 127.0.0.1:${port}/gatehouse cannot be reached`,
      );
      expect(out.stderr + out.stdout).not.toContain("hunter2-secret");
    },
    SLOW_TEST,
  );

  it.runIf(testDialect === "postgres")(
    "a second Gatehouse on the same PostgreSQL database starts beside the first, each a replica of its own",
    async () => {
      const url = await freshDatabaseUrl();
      const first = workDir();
      const env = { GATEHOUSE_SECRET_KEY: KEY, DATABASE_URL: url, GATEHOUSE_LOG_LEVEL: "warn" };
      const one = await boot({ ...env, GATEHOUSE_CONFIG: first.config, GATEHOUSE_DB: first.dbFile });
      expect(one.code, one.stderr).toBeNull();
      const second = workDir();
      const two = await boot({ ...env, GATEHOUSE_CONFIG: second.config, GATEHOUSE_DB: second.dbFile });
      expect(two.code, two.stderr).toBeNull();
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      try {
        const { rows } = await client.query<{ label: string }>("SELECT label FROM replicas");
        expect(rows).toHaveLength(2);
      } finally {
        await client.end();
      }
    },
    SLOW_TEST,
  );
});
