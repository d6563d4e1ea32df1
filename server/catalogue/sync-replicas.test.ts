/**
 * Several replicas refreshing one server's catalogue: each lists the same tools and records
 * them, and the change is recorded once. Two store handles on one database, as two Gatehouse
 * processes would have (on PostgreSQL two connection pools; on SQLite two connections to one file).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { eq, sql } from "drizzle-orm";
import { afterEach, describe, expect, it } from "vitest";
import { OPTS, serverConfig, tool } from "@/test/support/catalogue";
import { freshDatabaseUrl, testDialect } from "@/test/support/store";
import { closeDb, type Db, openDb, openStore, rows } from "../store/db";
import { catalogueChanges } from "../store/schema";
import type { RecordedChange } from "./changes";
import type { Tx } from "./rows";
import { syncServerTools } from "./sync";

const opened: Db[] = [];
const folders: string[] = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((db) => closeDb(db)));
  for (const dir of folders.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** Two handles on one fresh, migrated database. */
async function twoHandles(): Promise<[Db, Db]> {
  if (testDialect === "postgres") {
    const url = await freshDatabaseUrl();
    const handles: [Db, Db] = [
      await openStore({ dialect: "postgres", url }),
      await openStore({ dialect: "postgres", url }),
    ];
    opened.push(...handles);
    return handles;
  }
  const dir = mkdtempSync(path.join(tmpdir(), "gatehouse-replicas-"));
  folders.push(dir);
  const file = path.join(dir, "gatehouse.db");
  const handles: [Db, Db] = [openDb(file), openDb(file)];
  opened.push(...handles);
  return handles;
}

const srv = serverConfig("srv");
const before = [tool("a")];
const after = [tool("a"), tool("b")];

/** Feed rows about tool `b`. */
async function changesOfB(db: Db) {
  return db.select().from(catalogueChanges).where(eq(catalogueChanges.tool, "b"));
}

describe("replicas refreshing one server", () => {
  it("record a new tool once when they refresh one after another", async () => {
    const [a, b] = await twoHandles();
    await syncServerTools(a, srv, before, OPTS);
    const first = await syncServerTools(a, srv, after, OPTS);
    const second = await syncServerTools(b, srv, after, OPTS);
    expect(first.changes.map((c) => `${c.kind} ${c.tool}`)).toEqual(["added b"]);
    expect(second.changes).toEqual([]);
    expect(await changesOfB(a)).toHaveLength(1);
  });

  // Two handles refreshing at the same time exist only on PostgreSQL: on SQLite both connections
  // live in this one process, and one waiting for the other's write lock would stall the process
  // that must release it.
  it.runIf(testDialect === "postgres")(
    "refreshing at the same time, the second waits for the first to end before it writes anything, then records nothing",
    async () => {
      const [a, b] = await twoHandles();
      await syncServerTools(a, srv, before, OPTS);
      /** The feed rows each attempt of either refresh handed on (the notification outbox's part). */
      const handedOn: RecordedChange[][] = [];
      const record = async (_tx: Tx, changes: readonly RecordedChange[]) => {
        handedOn.push([...changes]);
      };
      const race: { second?: ReturnType<typeof syncServerTools>; waited?: string } = {};
      const first = syncServerTools(a, srv, after, {
        ...OPTS,
        alsoWrite: async (tx, changes) => {
          await record(tx, changes);
          if (race.second) return;
          // The first refresh is open (its writes made, not committed): the second starts now.
          race.second = syncServerTools(b, srv, after, { ...OPTS, alsoWrite: record });
          race.waited = await blockedStatement(a);
        },
      });
      await first;
      const summary = await race.second;
      // It waited for the lock of the server's refresh, not for a row the first had written.
      expect(race.waited).toMatch(/pg_advisory_xact_lock/);
      expect(summary?.changes).toEqual([]);
      expect(handedOn.filter((c) => c.length > 0).map((c) => c.map((x) => x.tool))).toEqual([["b"]]);
      expect(await changesOfB(a)).toHaveLength(1);
    },
  );
});

/**
 * The statement another connection to this database is blocked in, waiting for a lock: polled
 * (a lock wait announces nothing) until there is one, at most 10 s.
 */
async function blockedStatement(db: Db): Promise<string> {
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline) {
    const [row] = await rows<{ query: string }>(
      db,
      sql`SELECT query FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()`,
    );
    if (row) return row.query;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  throw new Error("no connection waited for a lock within 10 s");
}
