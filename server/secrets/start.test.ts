/**
 * The key at start, with real processes: a server (test/fixtures/boot-host.ts runs `boot()` as
 * server/main.ts does) and `config check` (npm start's first step) stop on a malformed
 * GATEHOUSE_SECRET_KEY or a refused key file, saying what to do and never showing the value; a
 * runtime seals with the key beside its store, and the next start opens what it sealed.
 */
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { chmodSync, existsSync, readdirSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { validateConfig } from "@/server/config";
import { createRuntime } from "@/server/runtime";
import { runCli } from "@/test/support/cli";
import { REPO_ROOT } from "@/test/support/runtime";
import { cleansUp } from "./cleanup-fixtures";
import { keyFilePath, loadSecretKey, SecretKeyError } from "./key";

const BOOT_HOST = path.join(REPO_ROOT, "test", "fixtures", "boot-host.ts");
const CONTEXT = "oauth:remote:refresh_token";

const { tempDir, track } = cleansUp("gatehouse-key-start-");

/** The config of no servers, validated. */
function emptyConfig() {
  const result = validateConfig({ mcpServers: {} }, { env: {}, baseDir: REPO_ROOT });
  if (!result.config) throw new Error("the empty config is invalid");
  return result.config;
}

/** A temp dir with a config of no servers, and the environment a server there starts with. */
function store(): { dir: string; dbFile: string; env: Record<string, string> } {
  const dir = tempDir();
  const config = path.join(dir, "gatehouse.json");
  writeFileSync(config, JSON.stringify({ mcpServers: {} }));
  const dbFile = path.join(dir, "gatehouse.db");
  return { dir, dbFile, env: { GATEHOUSE_CONFIG: config, GATEHOUSE_DB: dbFile } };
}

/** boot-host until it has booted (BOOTED, then stopped with SIGTERM) or exited by itself. */
function startServer(
  env: Record<string, string>,
): Promise<{ code: number | null; booted: boolean; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, ["--conditions=react-server", "--import", "tsx", BOOT_HOST], {
    cwd: REPO_ROOT,
    env: childEnv(env),
    stdio: ["ignore", "pipe", "pipe"],
  });
  track(child);
  let stdout = "";
  let stderr = "";
  let booted = false;
  child.stderr?.setEncoding("utf8").on("data", (c: string) => {
    stderr += c;
  });
  child.stdout?.setEncoding("utf8").on("data", (c: string) => {
    stdout += c;
    if (!booted && stdout.includes("BOOTED ")) {
      booted = true;
      child.kill("SIGTERM");
    }
  });
  return new Promise((resolve) => child.once("exit", (code) => resolve({ code, booted, stdout, stderr })));
}

describe("the secret key at start", () => {
  it("a malformed GATEHOUSE_SECRET_KEY stops the server before the store is touched, without showing the value", async () => {
    const { dir, env } = store();
    const value = randomBytes(20).toString("base64");
    const run = await startServer({ ...env, GATEHOUSE_SECRET_KEY: value });
    expect(run).toMatchObject({ code: 1, booted: false });
    expect(run.stderr).toContain("Gatehouse cannot start: GATEHOUSE_SECRET_KEY must be 32 bytes");
    expect(run.stderr).not.toContain(value);
    // Neither the store, its lock nor a key file was made.
    expect(readdirSync(dir)).toEqual(["gatehouse.json"]);
  });

  it("a key file open to others stops the server, saying to chmod 600 it; fixed, the server starts", async () => {
    const { dbFile, env } = store();
    const file = keyFilePath(dbFile);
    writeFileSync(file, randomBytes(32), { mode: 0o644 });
    chmodSync(file, 0o644);
    const refused = await startServer(env);
    expect(refused).toMatchObject({ code: 1, booted: false });
    expect(refused.stderr).toContain(
      `Gatehouse cannot start: the secret key file ${file} is open to other users`,
    );
    expect(refused.stderr).toContain(`chmod 600 ${file}`);
    expect(existsSync(dbFile)).toBe(false);
    chmodSync(file, 0o600);
    expect(await startServer(env)).toMatchObject({ code: 0, booted: true });
  });

  it("on PostgreSQL without GATEHOUSE_SECRET_KEY the server stops before the store is reached, making no key file", async () => {
    const { dir, env } = store();
    // Nobody listens there: the key is refused before any connection is tried.
    const run = await startServer({ ...env, DATABASE_URL: "postgres://gh:Pw-for-nobody@127.0.0.1:9/gh" });
    expect(run).toMatchObject({ code: 1, booted: false });
    expect(run.stderr).toContain("Gatehouse cannot start: GATEHOUSE_SECRET_KEY is required with PostgreSQL");
    expect(run.stderr).not.toContain("Pw-for-nobody");
    expect(readdirSync(dir)).toEqual(["gatehouse.json"]);
  });

  it("the first start creates the key file 0600 beside the store and says so in its log", async () => {
    const { dbFile, env } = store();
    const run = await startServer(env);
    expect(run).toMatchObject({ code: 0, booted: true });
    expect(statSync(keyFilePath(dbFile)).mode & 0o777).toBe(0o600);
    expect(run.stdout).toContain(`secret key file ${keyFilePath(dbFile)} (id `);
    expect(run.stdout).toContain("created now, mode 0600; back it up with the database");
  });

  it("config check, npm start's first step, refuses a malformed key or a refused key file and creates nothing", async () => {
    const { dir, dbFile, env } = store();
    const config = env.GATEHOUSE_CONFIG ?? "";
    const value = randomBytes(31).toString("hex");
    const bad = await runCli(["config", "check", config], { ...env, GATEHOUSE_SECRET_KEY: value });
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain("secret key: GATEHOUSE_SECRET_KEY must be 32 bytes");
    expect(bad.stderr).not.toContain(value);
    expect(bad.stdout).not.toContain(": OK (");

    const empty = await runCli(["config", "check", config], { ...env, GATEHOUSE_SECRET_KEY: "" });
    expect(empty.code).toBe(1);
    expect(empty.stderr).toContain("is set but empty");

    // No key yet: fine, and nothing is created (the server's first start makes it).
    const fresh = await runCli(["config", "check", config], env);
    expect(fresh).toMatchObject({ code: 0 });
    expect(fresh.stdout).toContain(": OK (");
    expect(readdirSync(dir)).toEqual(["gatehouse.json"]);

    writeFileSync(keyFilePath(dbFile), randomBytes(12), { mode: 0o600 });
    const short = await runCli(["config", "check", config], env);
    expect(short.code).toBe(1);
    expect(short.stderr).toContain(
      `the secret key file ${keyFilePath(dbFile)} holds 12 bytes, not the 32 of a key`,
    );
  });

  it("a runtime seals with the key file beside its store, and the next start's runtime opens what it sealed", async () => {
    const { dbFile } = store();
    const config = emptyConfig();
    const first = await createRuntime({ config, dbFile });
    const sealed = first.secrets.seal("refresh-token-value", CONTEXT);
    await first.stop();
    expect(statSync(keyFilePath(dbFile)).mode & 0o777).toBe(0o600);
    const second = await createRuntime({ config, dbFile });
    try {
      expect(second.secrets.open(sealed, CONTEXT)).toBe("refresh-token-value");
      expect(second.secrets.keyId).toBe(loadSecretKey({ env: {}, dbFile }).id);
    } finally {
      await second.stop();
    }
  });

  it("a runtime on a refused key file is not created, and leaves the store's lock free", async () => {
    const { dbFile } = store();
    const config = emptyConfig();
    writeFileSync(keyFilePath(dbFile), randomBytes(32), { mode: 0o600 });
    chmodSync(keyFilePath(dbFile), 0o640);
    await expect((async () => createRuntime({ config, dbFile }))()).rejects.toThrow(SecretKeyError);
    expect(existsSync(`${dbFile}.lock`)).toBe(false);
    expect(existsSync(dbFile)).toBe(false);
  });
});

/** Only what a process needs, not the test runner's environment (no NODE_ENV, no GATEHOUSE_*). */
function childEnv(env: Record<string, string>): NodeJS.ProcessEnv {
  const out: Record<string, string> = {
    PATH: process.env.PATH ?? "/usr/bin:/bin",
    HOME: process.env.HOME ?? tmpdir(),
    ...env,
  };
  return out as NodeJS.ProcessEnv;
}
