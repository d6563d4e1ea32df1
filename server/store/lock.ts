import "server-only";
import { randomBytes } from "node:crypto";
import {
  closeSync,
  mkdirSync,
  openSync,
  readFileSync,
  renameSync,
  statSync,
  unlinkSync,
  writeSync,
} from "node:fs";
import path from "node:path";
import { logger } from "../log";

const log = logger("store");

/**
 * An unreadable lock file younger than this may be one another process has just created and not
 * yet written (create and write are two steps); older, it is the remains of a crash between them.
 */
const UNWRITTEN_GRACE_MS = 10_000;

/** What a lock file holds, as JSON. `token` tells two holders with the same pid apart. */
interface LockRecord {
  pid: number;
  /** When the lock was taken, ISO 8601. */
  since: string;
  token: string;
}

/** The store is held by another live Gatehouse process; nothing of it was touched. */
export class StoreInUseError extends Error {
  readonly code = "GATEHOUSE_STORE_IN_USE";
}

/** A held store lock. */
export interface StoreLock {
  /** The lock file, `<db>.lock` (null for an in-memory store, which needs none). */
  readonly file: string | null;
  /** Removes the lock file if it is still this lock's; safe to call more than once. */
  release(): void;
}

// Tokens of the locks this process holds, on globalThis: Next evaluates server modules more than
// once, and a lock taken by one copy must be known to every copy.
const HELD = Symbol.for("gatehouse.store.locks");
const holder = globalThis as { [HELD]?: Map<string, string> };
holder[HELD] ??= new Map();
const held: Map<string, string> = holder[HELD];

let exitHookInstalled = false;
/** A process that exits without stopping (an uncaught error, `process.exit`) leaves no lock behind. */
function releaseAllOnExit(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.once("exit", () => {
    for (const [file, token] of held) removeIfOurs(file, token);
  });
}

function readRecord(file: string): { text: string; record: LockRecord | null } | null {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return null;
    throw err;
  }
  try {
    const parsed = JSON.parse(text) as Partial<LockRecord>;
    if (Number.isInteger(parsed.pid) && typeof parsed.since === "string" && typeof parsed.token === "string")
      return { text, record: parsed as LockRecord };
  } catch {
    // Not JSON: judged below.
  }
  return { text, record: null };
}

function removeIfOurs(file: string, token: string): void {
  try {
    if (readRecord(file)?.record?.token === token) unlinkSync(file);
  } catch {
    // Gone already, or unreadable: either way not ours to remove any more.
  }
  held.delete(file);
}

/**
 * Whether the holder of `record` may still be using the store. A pid that no longer exists
 * (ESRCH) is gone; EPERM means it exists under another user. Our own pid holds it only if this
 * process took that very lock: otherwise the file is from an earlier process that had our pid (a
 * container restarted after a crash runs Gatehouse as the same pid every time).
 */
function holderAlive(file: string, record: LockRecord): boolean {
  if (record.pid === process.pid) return held.get(file) === record.token;
  if (record.pid <= 0) return false;
  try {
    process.kill(record.pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code !== "ESRCH";
  }
}

/**
 * Moves a stale lock out of the way, if it is still the one judged stale. It is renamed aside
 * first and compared: had another process taken over in between (its fresh lock now sits
 * there), that lock is put back and the caller tries again (and finds it live).
 */
function removeStale(file: string, staleText: string, token: string): void {
  const aside = `${file}.stale-${process.pid}-${token}`;
  try {
    renameSync(file, aside);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return;
    throw err;
  }
  if (readFileSync(aside, "utf8") === staleText) unlinkSync(aside);
  else renameSync(aside, file);
}

function tryCreate(file: string, record: LockRecord): boolean {
  let fd: number;
  try {
    fd = openSync(file, "wx", 0o644);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "EEXIST") return false;
    throw err;
  }
  try {
    writeSync(fd, `${JSON.stringify(record)}\n`);
  } catch (err) {
    // A full disk: leave no empty lock for the next start to wait on.
    closeSync(fd);
    unlinkSync(file);
    throw err;
  }
  closeSync(fd);
  return true;
}

/**
 * Takes the store's one-process lock before anything reads or writes `dbFile`: the file
 * `<dbFile>.lock`, created exclusively (O_EXCL) and holding this process's pid, the time and a
 * token. A lock whose process is gone is stale and taken over, with a warning in the log.
 * Throws {@link StoreInUseError} naming the holder when a live process holds it (this one
 * included, for another runtime not yet stopped). `":memory:"` needs no lock. The lock is the
 * server's: the CLI opens the store beside a running server without it. A holder is judged by
 * its pid on this host, so two hosts, or containers in different pid namespaces, sharing one
 * volume are not told apart.
 */
export function lockStore(dbFile: string): StoreLock {
  if (dbFile === ":memory:") return { file: null, release() {} };
  const store = path.resolve(dbFile);
  const file = `${store}.lock`;
  mkdirSync(path.dirname(file), { recursive: true });
  const token = randomBytes(12).toString("hex");
  const record: LockRecord = { pid: process.pid, since: new Date().toISOString(), token };
  // Each turn either creates the lock, or finds a live holder, or clears one stale lock; more
  // than two turns are only needed when several processes start at once.
  let tookOver: string | null = null;
  for (let turn = 0; turn < 5; turn++) {
    if (tryCreate(file, record)) {
      held.set(file, token);
      releaseAllOnExit();
      if (tookOver) log.warn(`took over the lock of ${store}: ${tookOver}`);
      return { file, release: () => removeIfOurs(file, token) };
    }
    const found = readRecord(file);
    if (!found) continue;
    const { text, record: other } = found;
    if (other && holderAlive(file, other)) {
      const who = other.pid === process.pid ? " (this process: another runtime not stopped)" : "";
      throw new StoreInUseError(
        `the store ${store} is in use by Gatehouse pid ${other.pid}${who} since ${other.since}; stop it ` +
          `first (if pid ${other.pid} is not Gatehouse, delete ${file})`,
      );
    }
    if (!other) {
      const modified = statSync(file, { throwIfNoEntry: false })?.mtimeMs;
      if (modified === undefined) continue;
      if (Date.now() - modified < UNWRITTEN_GRACE_MS) {
        throw new StoreInUseError(
          `the store ${store} is being locked by another process (${file} is not written yet); ` +
            `if no Gatehouse is starting, delete ${file}`,
        );
      }
    }
    removeStale(file, text, token);
    const reused = other?.pid === process.pid ? " (its pid is this process's now)" : "";
    tookOver = other
      ? `Gatehouse pid ${other.pid} (since ${other.since}) is gone${reused}`
      : `${file} was left unwritten by a process that stopped while taking it`;
  }
  throw new StoreInUseError(`the store ${store} could not be locked: ${file} keeps changing; try again`);
}
