import Database from "better-sqlite3";
import { afterEach, describe, expect, it, vi } from "vitest";
import { callStatus, waitForCallStatus } from "@/test/support/runtime";
import { BUSY_TIMEOUT_MS, sqliteOf, transaction } from "../store/db";
import { addNote, people, runtimes } from "./call-fixtures";

const { start } = runtimes();
afterEach(() => {
  vi.restoreAllMocks();
});

/** Resolves at the first line written to stderr that contains `text`. */
function stderrLine(text: string): Promise<string> {
  return new Promise((resolve) => {
    const write = process.stderr.write.bind(process.stderr);
    vi.spyOn(process.stderr, "write").mockImplementation(((chunk: string | Uint8Array, ...rest: never[]) => {
      const line = String(chunk);
      if (line.includes(text)) resolve(line);
      return write(chunk, ...rest);
    }) as typeof process.stderr.write);
  });
}

/**
 * Another process's connection to the store, holding its write lock. Taken without waiting and
 * tried again shortly: the runtime's own transactions hold the lock across awaits, and a
 * synchronous wait for it here would stall the very process that must release it.
 */
async function lockFromOutside(file: string): Promise<Database.Database> {
  const other = new Database(file, { timeout: 0 });
  for (let attempt = 0; ; attempt++) {
    try {
      other.prepare("BEGIN IMMEDIATE").run();
      return other;
    } catch (err) {
      if (attempt >= 500 || !String(err).includes("database is locked")) {
        other.close();
        throw err;
      }
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  }
}

describe("the expiry timer on a store another process is writing to", () => {
  it("logs the failed tick and keeps running; the due call expires once the lock is gone", async () => {
    const rt = await start({ approvals: { expireAfterSeconds: 1 } });
    const { agent } = await people(rt);
    const call = await addNote(agent);
    const failed = stderrLine("expiring due calls failed");
    // Another process holds SQLite's write lock past Gatehouse's busy timeout while the call falls due.
    const other = await lockFromOutside(rt.dbFile);
    let line: string;
    try {
      line = await failed;
    } finally {
      other.prepare("ROLLBACK").run();
      other.close();
    }
    expect(line).toContain("database is locked");
    expect(await callStatus(rt.runtime, call.id)).toBe("pending");
    await waitForCallStatus(rt.runtime, call.id, "expired");
  }, 30_000);
});

describe("a background write that must not wait for the lock", () => {
  it("fails at once with SQLITE_BUSY in a transaction with wait: false, and requests wait for the lock again afterwards", async () => {
    const rt = await start();
    const sqlite = sqliteOf(rt.runtime.db);
    if (!sqlite) throw new Error("a SQLite store was expected");
    const other = await lockFromOutside(rt.dbFile);
    try {
      let ran = false;
      const began = Date.now();
      await expect(
        transaction(
          rt.runtime.db,
          async () => {
            ran = true;
          },
          { wait: false },
        ),
      ).rejects.toThrow(/database is locked/);
      // The write lock is taken up front (BEGIN IMMEDIATE): nothing of the body ran, and no wait.
      expect(ran).toBe(false);
      expect(Date.now() - began).toBeLessThan(BUSY_TIMEOUT_MS / 2);
    } finally {
      other.prepare("ROLLBACK").run();
      other.close();
    }
    expect(sqlite.pragma("busy_timeout", { simple: true })).toBe(BUSY_TIMEOUT_MS);
  });
});
