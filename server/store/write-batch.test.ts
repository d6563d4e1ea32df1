import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import Database from "better-sqlite3";
import { sql } from "drizzle-orm";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { closeDb, type Db, openDb, sqliteOf } from "./db";
import { WriteBatch } from "./write-batch";

// About SQLite's group commit; on PostgreSQL each write is its own transaction (write-batch.ts).
let dir: string;
let main: Db;
let other: Database.Database;

beforeEach(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), "gatehouse-batch-"));
  main = openDb(path.join(dir, "t.db"));
  sqliteOf(main)?.exec("create table t (id integer primary key, v text not null)");
  // A second connection sees only what is committed.
  other = new Database(path.join(dir, "t.db"));
});
afterEach(async () => {
  await closeDb(main);
  other.close();
  rmSync(dir, { recursive: true, force: true });
});

const insert = (v: string) => async (tx: Db) => {
  await tx.run(sql`insert into t (v) values (${v})`);
};
const committed = () =>
  (other.prepare("select v from t order by id").all() as { v: string }[]).map((r) => r.v);

describe("group commit", () => {
  it("a write is committed, visible to another connection, when its promise resolves", async () => {
    const batch = new WriteBatch(main);
    const done = batch.write(insert("a"));
    expect(committed()).toEqual([]);
    await done;
    expect(committed()).toEqual(["a"]);
  });

  it("writes queued in one turn of the event loop share one transaction", async () => {
    const batch = new WriteBatch(main);
    let seenByOtherDuringSecond: string[] | null = null;
    const first = batch.write(insert("a"));
    const second = batch.write(async (tx) => {
      // The first write is done but not committed: another connection cannot see it yet.
      seenByOtherDuringSecond = committed();
      await insert("b")(tx);
    });
    await Promise.all([first, second]);
    expect(seenByOtherDuringSecond).toEqual([]);
    expect(committed()).toEqual(["a", "b"]);
  });

  it("a write that throws is rolled back alone: only its promise rejects, the others commit", async () => {
    const batch = new WriteBatch(main);
    const a = batch.write(insert("a"));
    const bad = batch.write(async (tx) => {
      await insert("half-written")(tx);
      throw new Error("boom");
    });
    const c = batch.write(insert("c"));
    await expect(bad).rejects.toThrow("boom");
    await Promise.all([a, c]);
    expect(committed()).toEqual(["a", "c"]);
  });

  it("flush commits what is queued at once (as shutdown does before the store closes)", async () => {
    const batch = new WriteBatch(main);
    const done = batch.write(insert("a"));
    await batch.flush();
    expect(committed()).toEqual(["a"]);
    await done;
  });

  it("when another writer holds the store every write of the batch rejects and nothing is stored", async () => {
    const batch = new WriteBatch(main);
    const a = batch.write(insert("a"));
    const b = batch.write(insert("b"));
    // Another connection holds the write lock, and this one does not wait for it.
    other.exec("begin immediate");
    sqliteOf(main)?.pragma("busy_timeout = 0");
    await expect(a).rejects.toThrow(/locked|busy/i);
    await expect(b).rejects.toThrow(/locked|busy/i);
    other.exec("rollback");
    expect(committed()).toEqual([]);
  });

  it("a write that makes SQLite roll back the whole transaction fails the whole batch, and nothing after it is stored", async () => {
    sqliteOf(main)?.exec(
      "create trigger no_bad before insert on t when new.v = 'bad' begin select raise(rollback, 'bad row'); end",
    );
    const batch = new WriteBatch(main);
    const a = batch.write(insert("a"));
    const bad = batch.write(insert("bad"));
    const c = batch.write(insert("c"));
    await expect(bad).rejects.toThrow("bad row");
    await expect(a).rejects.toThrow("bad row");
    await expect(c).rejects.toThrow("bad row");
    expect(committed()).toEqual([]);
    // The batch is usable afterwards.
    await batch.write(insert("d"));
    expect(committed()).toEqual(["d"]);
  });
});
