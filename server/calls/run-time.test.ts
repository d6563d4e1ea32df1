/**
 * A call's run time is the tool's alone, and the call and its story say the same figure: the
 * call's `durationMs` (its `finishedAt - startedAt`) and its outcome's audit row are the span from
 * when Gatehouse sent the call to the tool to when the answer came. The store is made slow on
 * purpose, between the decision to run a call and its send, so that a run time counted from the
 * decision would show.
 */
import { describe, expect, it } from "vitest";
import { LIST_NOTES, waitForCallStatus } from "@/test/support/runtime";
import { testDialect } from "@/test/support/store";
import { sqliteOf } from "../store/db";
import { addNote, approve, auditRows, call, people, runtimes, story } from "./call-fixtures";

const { start } = runtimes();

/** How long the store stalls each write that lets a call run. */
const STALL_MS = 60;

/**
 * Makes the write that lets a call run (a read-only call's insert, an approval's `pending →
 * running` update) take {@link STALL_MS} longer, on Gatehouse's own connection. Returns when the
 * last stall ended.
 */
function sqliteOnly(db: Parameters<typeof sqliteOf>[0]): import("better-sqlite3").Database {
  const sqlite = sqliteOf(db);
  if (!sqlite) throw new Error("a SQLite store was expected");
  return sqlite;
}

function stallTheStartOfRuns(sqlite: import("better-sqlite3").Database): () => number {
  let lastEnd = 0;
  sqlite.function("stall", () => {
    const until = Date.now() + STALL_MS;
    while (Date.now() < until) {
      // A busy wait: SQLite calls this synchronously, inside the write.
    }
    lastEnd = Date.now();
    return 0;
  });
  sqlite
    .prepare(
      "CREATE TEMP TRIGGER stall_birth AFTER INSERT ON calls WHEN NEW.status = 'running' BEGIN SELECT stall(); END",
    )
    .run();
  sqlite
    .prepare(
      "CREATE TEMP TRIGGER stall_approval AFTER UPDATE OF status ON calls WHEN NEW.status = 'running' BEGIN SELECT stall(); END",
    )
    .run();
  return () => lastEnd;
}

// SQLite alone: the stall is a SQLite function called by a trigger, synchronously inside the
// write, on Gatehouse's own connection; PostgreSQL has no such hook into this process.
describe.skipIf(testDialect === "postgres")("a call's run time", () => {
  it("a read-only call: the call and its audit row give the same run time, counted from the send", async () => {
    const rt = await start();
    const { agent } = await people(rt);
    const stalledUntil = stallTheStartOfRuns(sqliteOnly(rt.runtime.db));
    const done = await call(agent, LIST_NOTES, {}, 200);
    const outcome = (await auditRows(rt, done.id)).find((r) => r.action === "call.succeeded");
    expect(outcome?.durationMs).toEqual(expect.any(Number));
    expect(done.durationMs).toBe(outcome?.durationMs);
    expect(Date.parse(done.finishedAt ?? "") - Date.parse(done.startedAt ?? "")).toBe(done.durationMs);
    // Sent after the stalled write committed, so the stall is no part of the run time.
    expect(Date.parse(done.startedAt ?? "")).toBeGreaterThanOrEqual(stalledUntil());
  });

  it("an approved call: its story's facts and its audit trail give the same run time, counted from the send", async () => {
    const rt = await start();
    const { agent, alice } = await people(rt);
    const stalledUntil = stallTheStartOfRuns(sqliteOnly(rt.runtime.db));
    const pending = await addNote(agent, "timed");
    expect((await approve(pending.id, alice.cookie)).status).toBe(200);
    await waitForCallStatus(rt.runtime, pending.id, "succeeded");
    const s = await story(pending.id, alice.cookie);
    const outcome = s.audit.find((a) => a.action === "call.succeeded");
    expect(outcome?.durationMs).toEqual(expect.any(Number));
    expect(s.call.durationMs).toBe(outcome?.durationMs);
    expect(Date.parse(s.call.finishedAt ?? "") - Date.parse(s.call.startedAt ?? "")).toBe(s.call.durationMs);
    expect(Date.parse(s.call.startedAt ?? "")).toBeGreaterThanOrEqual(stalledUntil());
    expect(Date.parse(s.call.startedAt ?? "")).toBeGreaterThanOrEqual(Date.parse(s.call.decidedAt ?? ""));
  });
});
