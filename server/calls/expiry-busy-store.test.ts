import Database from "better-sqlite3";
import { afterEach, describe, expect, it, vi } from "vitest";
import { callStatus, waitForCallStatus } from "@/test/support/runtime";
import { BUSY_TIMEOUT_MS, withoutWaiting } from "../store/db";
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

describe("the expiry timer on a store another process is writing to", () => {
  it("logs the failed tick and keeps running; the due call expires once the lock is gone", async () => {
    const rt = await start({ approvals: { expireAfterSeconds: 1 } });
    const { agent } = await people(rt);
    const call = await addNote(agent);
    const failed = stderrLine("expiring due calls failed");
    // Another process holds SQLite's write lock past Gatehouse's busy timeout while the call falls due.
    const other = new Database(rt.dbFile);
    other.prepare("BEGIN IMMEDIATE").run();
    let line: string;
    try {
      line = await failed;
    } finally {
      other.prepare("ROLLBACK").run();
      other.close();
    }
    expect(line).toContain("database is locked");
    expect(callStatus(rt.runtime, call.id)).toBe("pending");
    await waitForCallStatus(rt.runtime, call.id, "expired");
  }, 30_000);
});

describe("a background write that must not wait for the lock", () => {
  it("fails at once with SQLITE_BUSY inside withoutWaiting, and requests wait for the lock again afterwards", async () => {
    const rt = await start();
    const sqlite = rt.runtime.db.$client;
    const other = new Database(rt.dbFile);
    other.prepare("BEGIN IMMEDIATE").run();
    try {
      let inside: unknown;
      expect(() =>
        withoutWaiting(rt.runtime.db, () => {
          inside = sqlite.pragma("busy_timeout", { simple: true });
          sqlite.prepare("INSERT INTO audit_events (actor, action, subject) VALUES ('t', 't', 't')").run();
        }),
      ).toThrow(/database is locked/);
      expect(inside).toBe(0);
    } finally {
      other.prepare("ROLLBACK").run();
      other.close();
    }
    expect(sqlite.pragma("busy_timeout", { simple: true })).toBe(BUSY_TIMEOUT_MS);
  });
});
