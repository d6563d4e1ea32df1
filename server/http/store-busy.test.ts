/**
 * A store another process holds, and one that refuses a write: SQLite's own (its file lock, a
 * temporary trigger), so these run on SQLite alone (server/http is in the sqlite project only);
 * PostgreSQL's faults are mapped in store-errors.test.ts.
 */
import Database from "better-sqlite3";
import { afterEach, describe, expect, it } from "vitest";
import { type Db, sqliteOf } from "@/server/store/db";
import { bodyOf, createTestUser, request, startTestRuntime, type TestRuntime } from "@/test/support/runtime";

let rt: TestRuntime | null = null;

/** The SQLite connection under `db`. */
function sqlite(db: Db): Database.Database {
  const connection = sqliteOf(db);
  if (!connection) throw new Error("these tests are about SQLite");
  return connection;
}
afterEach(async () => {
  await rt?.stop();
  rt = null;
});

describe("a store another process is writing to", () => {
  it("answers 503 store_busy with a retry hint, writes nothing, and works again once the lock is gone", async () => {
    rt = await startTestRuntime();
    const owner = await createTestUser(rt.runtime, "olga", ["owner"]);
    // Another process holds SQLite's write lock past Gatehouse's busy timeout.
    const other = new Database(rt.dbFile);
    other.prepare("BEGIN IMMEDIATE").run();
    try {
      const res = await request("POST", "/api/tokens", { cookie: owner.cookie, body: { name: "busy-bot" } });
      expect(res.status).toBe(503);
      expect(res.headers.get("retry-after")).toBe("1");
      expect((await bodyOf<{ error: { code: string } }>(res)).error.code).toBe("store_busy");
    } finally {
      other.prepare("ROLLBACK").run();
      other.close();
    }
    const tokens = sqlite(rt.runtime.db)
      .prepare("SELECT count(*) AS n FROM agent_tokens WHERE name = 'busy-bot'")
      .get() as { n: number };
    expect(tokens.n).toBe(0);
    const again = await request("POST", "/api/tokens", { cookie: owner.cookie, body: { name: "busy-bot" } });
    expect(again.status).toBeLessThan(300);
  }, 20_000);

  it("an outcome that cannot be stored after the tool ran is no retry hint: the answer says not to repeat it", async () => {
    rt = await startTestRuntime();
    const { createAgentToken, enableTool, LIST_NOTES } = await import("@/test/support/runtime");
    await enableTool(rt.runtime, LIST_NOTES);
    const agent = await createAgentToken(rt.runtime, "agent-a");
    // The store refuses the outcome write, as a busy or full one would, after the tool answered.
    sqlite(rt.runtime.db)
      .prepare(
        "CREATE TEMP TRIGGER no_outcome BEFORE UPDATE OF status ON calls WHEN NEW.status IN ('succeeded', 'failed') BEGIN SELECT RAISE(ABORT, 'outcome write refused'); END",
      )
      .run();
    const res = await request("POST", "/api/calls", {
      bearer: agent,
      body: { tool: LIST_NOTES, arguments: {} },
    });
    expect(res.status).toBe(500);
    expect(res.headers.get("retry-after")).toBeNull();
    expect((await bodyOf<{ error: { message: string } }>(res)).error.message).toContain("do not repeat it");
  });
});
