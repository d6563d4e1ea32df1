/**
 * The key file beside the store, on real files: created 0600 and once, however many starts race
 * for it (two threads of one process, two processes); refused, with what to do, when it is open to
 * others, of the wrong length or not a file.
 */
import { execFileSync, spawn } from "node:child_process";
import { chmodSync, mkdirSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { createInterface } from "node:readline";
import { Worker } from "node:worker_threads";
import { describe, expect, it } from "vitest";
import { cleansUp } from "./cleanup-fixtures";
import { checkSecretKey, keyFilePath, loadSecretKey, SecretKeyError } from "./key";

const root = path.resolve(__dirname, "../..");
const KEY_MODULE = path.join(__dirname, "key.ts");
const RACER = path.join(__dirname, "key-race-fixtures.ts");

const { tempDir, track } = cleansUp("gatehouse-key-");

/** What `loadSecretKey` threw, as the error itself. */
function refusal(load: () => unknown): SecretKeyError {
  try {
    load();
  } catch (err) {
    if (err instanceof SecretKeyError) return err;
    throw err;
  }
  throw new Error("the key was not refused");
}

interface Raced {
  id: string;
  created: boolean;
}

/**
 * Two worker threads of this process, each with its own copy of key.ts (loaded through tsx), held
 * at a barrier until both are ready and then released at once into `loadSecretKey`.
 */
async function raceInThreads(dbFile: string): Promise<Raced[]> {
  const gate = new Int32Array(new SharedArrayBuffer(4));
  const code = `
    const { workerData, parentPort } = require("node:worker_threads");
    const { loadSecretKey } = require("tsx/cjs/api").require(workerData.module, workerData.parent);
    const gate = new Int32Array(workerData.gate);
    parentPort.postMessage("ready");
    Atomics.wait(gate, 0, 0);
    try {
      const key = loadSecretKey({ env: {}, dbFile: workerData.dbFile });
      parentPort.postMessage({ id: key.id, created: key.created });
    } catch (err) {
      parentPort.postMessage({ error: String(err && err.message) });
    }`;
  const workers = [0, 1].map(
    () =>
      new Worker(code, {
        eval: true,
        execArgv: ["--conditions=react-server"],
        workerData: { module: KEY_MODULE, parent: __filename, gate: gate.buffer, dbFile },
      }),
  );
  try {
    const answers = workers.map((w) => {
      let ready!: () => void;
      const isReady = new Promise<void>((resolve) => {
        ready = resolve;
      });
      const done = new Promise<Raced>((resolve, reject) => {
        w.on("message", (m: unknown) => {
          if (m === "ready") return ready();
          if (typeof m === "object" && m !== null && "error" in m) return reject(new Error(String(m.error)));
          resolve(m as Raced);
        });
        w.once("error", reject);
      });
      return { isReady, done };
    });
    await Promise.all(answers.map((a) => a.isReady));
    Atomics.store(gate, 0, 1);
    Atomics.notify(gate, 0);
    return await Promise.all(answers.map((a) => a.done));
  } finally {
    await Promise.all(workers.map((w) => w.terminate()));
  }
}

/** Two real node processes, both waiting at READY, then told to go in the same moment. */
async function raceInProcesses(dbFile: string): Promise<Raced[]> {
  const racers = [0, 1].map(() => {
    const child = spawn(process.execPath, ["--conditions=react-server", "--import", "tsx", RACER, dbFile], {
      cwd: root,
      env: childEnv({}),
      stdio: ["pipe", "pipe", "pipe"],
    });
    track(child);
    let stderr = "";
    child.stderr?.setEncoding("utf8").on("data", (c: string) => {
      stderr += c;
    });
    let ready!: () => void;
    const isReady = new Promise<void>((resolve) => {
      ready = resolve;
    });
    const done = new Promise<Raced>((resolve, reject) => {
      createInterface({ input: child.stdout as NodeJS.ReadableStream }).on("line", (line) => {
        if (line === "READY") return ready();
        if (line.startsWith("ERROR ")) return reject(new Error(line));
        resolve(JSON.parse(line) as Raced);
      });
      child.once("exit", (code) => reject(new Error(`racer exited ${code}: ${stderr}`)));
    });
    return { child, isReady, done };
  });
  await Promise.all(racers.map((r) => r.isReady));
  for (const r of racers) r.child.stdin?.end("go\n");
  return Promise.all(racers.map((r) => r.done));
}

describe("the key file beside the store", () => {
  it("is created on first need as <db>.key with mode 0600 and 32 bytes, and read back on the next start", () => {
    const dir = tempDir();
    const dbFile = path.join(dir, "gatehouse.db");
    const first = loadSecretKey({ env: {}, dbFile });
    const file = path.join(dir, "gatehouse.db.key");
    expect(keyFilePath(dbFile)).toBe(file);
    expect(first).toMatchObject({ source: "file", file, created: true, unusedFile: null });
    const stat = statSync(file);
    expect(stat.mode & 0o777).toBe(0o600);
    expect(stat.size).toBe(32);
    const again = loadSecretKey({ env: {}, dbFile });
    expect(again).toMatchObject({ source: "file", created: false, id: first.id });
    // Nothing else was left in the folder (no temporary file).
    expect(readdirSync(dir)).toEqual(["gatehouse.db.key"]);
  });

  it("is created 0600 whatever the umask of the process that creates it", () => {
    const dir = tempDir();
    const dbFile = path.join(dir, "gatehouse.db");
    // A real process with a permissive umask: the mode is set at creation, not left to the umask.
    execFileSync("sh", ["-c", `umask 000 && exec "$0" "$@"`, process.execPath, ...racerArgs(dbFile)], {
      cwd: root,
      input: "go\n",
    });
    expect(statSync(keyFilePath(dbFile)).mode & 0o777).toBe(0o600);
  });

  it("the store's folder is created when missing, as the store's own opening does", () => {
    const dbFile = path.join(tempDir(), "nested", "deeper", "gatehouse.db");
    const key = loadSecretKey({ env: {}, dbFile });
    expect(key.created).toBe(true);
    expect(statSync(keyFilePath(dbFile)).mode & 0o777).toBe(0o600);
  });

  it("two loads racing in two threads of one process end with one key, created once", async () => {
    const dir = tempDir();
    const dbFile = path.join(dir, "gatehouse.db");
    const raced = await raceInThreads(dbFile);
    expect(raced.map((r) => r.created).sort()).toEqual([false, true]);
    const [a, b] = raced;
    expect(a?.id).toBe(b?.id);
    expect(loadSecretKey({ env: {}, dbFile }).id).toBe(a?.id);
    expect(readdirSync(dir)).toEqual(["gatehouse.db.key"]);
  });

  it("two Gatehouse processes starting at once end with one key: the loser reads the winner's", async () => {
    const dir = tempDir();
    const dbFile = path.join(dir, "gatehouse.db");
    const raced = await raceInProcesses(dbFile);
    expect(raced.map((r) => r.created).sort()).toEqual([false, true]);
    const [a, b] = raced;
    expect(a?.id).toBe(b?.id);
    expect(loadSecretKey({ env: {}, dbFile }).id).toBe(a?.id);
    expect(statSync(keyFilePath(dbFile)).mode & 0o777).toBe(0o600);
    expect(readdirSync(dir)).toEqual(["gatehouse.db.key"]);
  });

  it("a key file that group or others may read is refused, saying to chmod 600 it", () => {
    const dbFile = path.join(tempDir(), "gatehouse.db");
    const { id } = loadSecretKey({ env: {}, dbFile });
    const file = keyFilePath(dbFile);
    for (const mode of [0o644, 0o640, 0o604, 0o620]) {
      chmodSync(file, mode);
      const err = refusal(() => loadSecretKey({ env: {}, dbFile }));
      expect(err.message).toContain(`chmod 600 ${file}`);
      expect(err.message).toContain(`mode 0${mode.toString(8)}`);
      // Where chmod cannot hold (no Unix permissions), the way out is named too.
      expect(err.message).toMatch(/keeps no Unix permissions.*set GATEHOUSE_SECRET_KEY instead/);
      // config check refuses it the same way, without changing it.
      expect(refusal(() => checkSecretKey({ env: {}, dbFile })).message).toBe(err.message);
      expect(statSync(file).mode & 0o777).toBe(mode);
    }
    chmodSync(file, 0o600);
    expect(loadSecretKey({ env: {}, dbFile }).id).toBe(id);
  });

  it("a start removes the temporary copies of a start that died before linking, and leaves a live one's", () => {
    const dir = tempDir();
    const dbFile = path.join(dir, "gatehouse.db");
    loadSecretKey({ env: {}, dbFile });
    // A pid that is surely gone (beyond the kernel's pid_max), and this test's parent, alive.
    const dead = `.gatehouse.db.key.4194999.0a1b2c3d4e5f.tmp`;
    const live = `.gatehouse.db.key.${process.ppid}.0a1b2c3d4e5f.tmp`;
    const other = ".gatehouse.db.key.notes.tmp";
    for (const name of [dead, live, other]) writeFileSync(path.join(dir, name), "x", { mode: 0o600 });
    // config check changes nothing.
    checkSecretKey({ env: {}, dbFile });
    expect(readdirSync(dir).sort()).toEqual([dead, live, other, "gatehouse.db.key"].sort());
    loadSecretKey({ env: {}, dbFile });
    expect(readdirSync(dir).sort()).toEqual([live, other, "gatehouse.db.key"].sort());
  });

  it("a key file of the wrong length is refused, naming its length and the 32 bytes a key has", () => {
    const dbFile = path.join(tempDir(), "gatehouse.db");
    const file = keyFilePath(dbFile);
    for (const size of [0, 16, 31, 33, 44]) {
      writeFileSync(file, Buffer.alloc(size, 7), { mode: 0o600 });
      const err = refusal(() => loadSecretKey({ env: {}, dbFile }));
      expect(err.message).toContain(`${file} holds ${size} bytes, not the 32 of a key`);
      expect(err.message).toContain("Restore it from the backup");
      rmSync(file);
    }
  });

  it("a key path that is not a regular file is refused: a folder, and a FIFO without hanging the start", () => {
    const dbFile = path.join(tempDir(), "gatehouse.db");
    const file = keyFilePath(dbFile);
    mkdirSync(file, { mode: 0o700 });
    expect(refusal(() => loadSecretKey({ env: {}, dbFile })).message).toContain(
      `${file} is not a regular file`,
    );
    rmSync(file, { recursive: true });
    execFileSync("mkfifo", ["-m", "600", file]);
    expect(refusal(() => loadSecretKey({ env: {}, dbFile })).message).toContain(
      `${file} is not a regular file`,
    );
  });

  it("a key file that cannot be created says so and names GATEHOUSE_SECRET_KEY as the way out", () => {
    const dir = tempDir();
    // A file where the store's folder should be: refused whoever runs the test (root included).
    writeFileSync(path.join(dir, "data"), "not a folder");
    const dbFile = path.join(dir, "data", "gatehouse.db");
    const err = refusal(() => loadSecretKey({ env: {}, dbFile }));
    expect(err.message).toContain(
      `the folder ${path.join(dir, "data")} of the secret key file cannot be created (EEXIST: something that is not a folder has its name)`,
    );
    expect(err.message).toContain("GATEHOUSE_SECRET_KEY");
    expect(readdirSync(dir)).toEqual(["data"]);
  });

  it("config check's look at the key creates nothing: a missing key file is no error", () => {
    const dir = tempDir();
    checkSecretKey({ env: {}, dbFile: path.join(dir, "gatehouse.db") });
    expect(readdirSync(dir)).toEqual([]);
  });

  it("an in-memory store gets a key in memory, a new one each time, and no file anywhere", () => {
    const a = loadSecretKey({ env: {}, dbFile: ":memory:" });
    const b = loadSecretKey({ env: {}, dbFile: ":memory:" });
    expect(a).toMatchObject({ source: "memory", file: null, created: false });
    expect(a.id).not.toBe(b.id);
  });
});

function racerArgs(dbFile: string): string[] {
  return ["--conditions=react-server", "--import", "tsx", RACER, dbFile];
}

/** Only what a process needs, not the test runner's environment (no NODE_ENV, no GATEHOUSE_*). */
function childEnv(env: Record<string, string>): NodeJS.ProcessEnv {
  const out: Record<string, string> = {
    PATH: process.env.PATH ?? "/usr/bin:/bin",
    HOME: process.env.HOME ?? tmpdir(),
    ...env,
  };
  return out as NodeJS.ProcessEnv;
}
