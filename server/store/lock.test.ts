/**
 * The store's one-process lock (`<db>.lock`): taken exclusively with the holder's pid and start
 * time, refused while a live process holds it (naming it), taken over when its holder is gone,
 * released only by its own holder. Real files in a temp dir; the other processes are real too.
 */
import { spawnSync } from "node:child_process";
import {
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  utimesSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { lockStore, StoreInUseError, type StoreLock } from "./lock";

let dir: string;
let db: string;
let lockFile: string;
const locks: StoreLock[] = [];

beforeEach(() => {
  dir = mkdtempSync(path.join(tmpdir(), "gatehouse-lock-test-"));
  db = path.join(dir, "gatehouse.db");
  lockFile = `${db}.lock`;
});
afterEach(() => {
  for (const lock of locks.splice(0)) lock.release();
  vi.restoreAllMocks();
  rmSync(dir, { recursive: true, force: true });
});

function take(file = db): StoreLock {
  const lock = lockStore(file);
  locks.push(lock);
  return lock;
}

function record(): { pid: number; since: string; token: string } {
  return JSON.parse(readFileSync(lockFile, "utf8")) as { pid: number; since: string; token: string };
}

/** The pid of a process that has exited (and been reaped). */
function deadPid(): number {
  const child = spawnSync(process.execPath, ["-e", ""]);
  return child.pid ?? 0;
}

/** What `fn` writes to stderr (where the logger puts warnings). */
function stderrOf(fn: () => void): string {
  let text = "";
  vi.spyOn(process.stderr, "write").mockImplementation((chunk: string | Uint8Array) => {
    text += String(chunk);
    return true;
  });
  try {
    fn();
  } finally {
    vi.mocked(process.stderr.write).mockRestore();
  }
  return text;
}

function refusal(fn: () => unknown): StoreInUseError {
  try {
    fn();
  } catch (err) {
    if (err instanceof StoreInUseError) return err;
    throw err;
  }
  throw new Error("expected the lock to be refused");
}

describe("the store lock", () => {
  it("is a <db>.lock file holding this process's pid and the time it was taken; release removes it", () => {
    const before = Date.now();
    const lock = take();
    expect(lock.file).toBe(lockFile);
    const held = record();
    expect(held.pid).toBe(process.pid);
    expect(Date.parse(held.since)).toBeGreaterThanOrEqual(before - 1000);
    lock.release();
    expect(existsSync(lockFile)).toBe(false);
    lock.release();
  });

  it("creates the store's folder when it is missing, as opening the store would", () => {
    take(path.join(dir, "new", "folder", "gatehouse.db"));
    expect(existsSync(path.join(dir, "new", "folder", "gatehouse.db.lock"))).toBe(true);
  });

  it("is refused to a second runtime of this same process until the first releases it", () => {
    const first = take();
    const err = refusal(() => take());
    expect(err.message).toBe(
      `the store ${db} is in use by Gatehouse pid ${process.pid} (this process: another runtime not stopped) ` +
        `since ${record().since}; stop it first (if pid ${process.pid} is not Gatehouse, delete ${lockFile})`,
    );
    first.release();
    take();
    expect(record().pid).toBe(process.pid);
  });

  it("held by another live process, is refused naming that pid and since when, and left as it was", () => {
    const theirs = JSON.stringify({ pid: process.ppid, since: "2026-11-30T08:00:00.000Z", token: "theirs" });
    writeFileSync(lockFile, theirs);
    const err = refusal(() => take());
    expect(err.message).toBe(
      `the store ${db} is in use by Gatehouse pid ${process.ppid} since 2026-11-30T08:00:00.000Z; stop it ` +
        `first (if pid ${process.ppid} is not Gatehouse, delete ${lockFile})`,
    );
    expect(readFileSync(lockFile, "utf8")).toBe(theirs);
  });

  it("of a process that is gone, is taken over with a warning in the log", () => {
    const pid = deadPid();
    writeFileSync(lockFile, JSON.stringify({ pid, since: "2026-11-30T08:00:00.000Z", token: "dead" }));
    const log = stderrOf(() => take());
    expect(log).toContain(
      `WARN [store] took over the lock of ${db}: Gatehouse pid ${pid} (since 2026-11-30T08:00:00.000Z) is gone`,
    );
    expect(record().pid).toBe(process.pid);
    expect(readdirSync(dir)).toEqual(["gatehouse.db.lock"]);
  });

  it("left by an earlier process with this process's pid (a restarted container) is taken over", () => {
    writeFileSync(
      lockFile,
      JSON.stringify({ pid: process.pid, since: "2026-11-30T08:00:00.000Z", token: "earlier" }),
    );
    const log = stderrOf(() => take());
    expect(log).toContain(
      `took over the lock of ${db}: Gatehouse pid ${process.pid} (since 2026-11-30T08:00:00.000Z) is gone ` +
        "(its pid is this process's now)",
    );
    expect(record().token).not.toBe("earlier");
  });

  it("not yet written is left to whoever is creating it, and taken over once it is old", () => {
    writeFileSync(lockFile, "");
    expect(refusal(() => take()).message).toBe(
      `the store ${db} is being locked by another process (${lockFile} is not written yet); ` +
        `if no Gatehouse is starting, delete ${lockFile}`,
    );
    const aMinuteAgo = new Date(Date.now() - 60_000);
    utimesSync(lockFile, aMinuteAgo, aMinuteAgo);
    const log = stderrOf(() => take());
    expect(log).toContain(`took over the lock of ${db}: ${lockFile} was left unwritten`);
    expect(record().pid).toBe(process.pid);
  });

  it("is not removed by a release once it is no longer this lock's", () => {
    const lock = take();
    const other = JSON.stringify({ pid: process.ppid, since: "2026-11-30T08:00:00.000Z", token: "other" });
    writeFileSync(lockFile, other);
    lock.release();
    expect(readFileSync(lockFile, "utf8")).toBe(other);
  });

  it("is not needed for an in-memory store", () => {
    const lock = take(":memory:");
    expect(lock.file).toBeNull();
    expect(readdirSync(dir)).toEqual([]);
  });
});
