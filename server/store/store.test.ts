import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { count, eq, sql } from "drizzle-orm";
import { getTableConfig } from "drizzle-orm/pg-core";
import { getTableConfig as getSqliteTableConfig, type SQLiteTable } from "drizzle-orm/sqlite-core";
import pg from "pg";
import { afterEach, describe, expect, it, vi } from "vitest";
import { freshDatabaseUrl, openTestDb, testDialect } from "@/test/support/store";
import { closeDb, type Db, first, migrationsFolder, openDb, openStore, rows, transaction } from "./db";
import { localMigrations } from "./migrations";
import { users } from "./schema";
import * as pgTables from "./schema-pg";
import * as sqliteTables from "./schema-sqlite";

/** Runs on both stores (the sqlite and postgres Vitest projects): what the rest of the code relies on. */

const extra: Db[] = [];
afterEach(async () => {
  await Promise.all(extra.splice(0).map((db) => closeDb(db)));
});

/** Two handles on one store, as two replicas have on PostgreSQL. */
async function secondHandle(): Promise<{ a: Db; b: Db }> {
  if (testDialect === "postgres") {
    const url = await freshDatabaseUrl();
    const a = await openStore({ dialect: "postgres", url });
    const b = await openStore({ dialect: "postgres", url });
    extra.push(a, b);
    return { a, b };
  }
  // SQLite: one connection per process (a second, in the same process, would wait for the first
  // synchronously while the first waits for the event loop); other processes are the CLI's.
  const db = await openTestDb();
  return { a: db, b: db };
}

const user = (name: string) => ({ name, passwordHash: "x", roles: "reviewer" });

describe("one schema, two stores", () => {
  it("every SQLite table has a PostgreSQL twin with the same columns, keys, nullability and indexes", () => {
    const tables = Object.entries(sqliteTables).filter(([name]) => name !== "now");
    expect(Object.keys(pgTables).sort()).toEqual(tables.map(([name]) => name).sort());
    for (const [name, table] of tables) {
      const s = getSqliteTableConfig(table as SQLiteTable);
      const p = getTableConfig(
        (pgTables as unknown as Record<string, Parameters<typeof getTableConfig>[0]>)[name] as never,
      );
      expect(p.name).toBe(s.name);
      const shape = (
        cols: Array<{
          name: string;
          notNull: boolean;
          primary: boolean;
          isUnique: boolean;
          hasDefault: boolean;
          autoIncrement?: boolean;
        }>,
      ) =>
        cols
          // SQLite gives every INTEGER PRIMARY KEY a value (the rowid) unless AUTOINCREMENT is
          // asked for; only those are meant to be generated, and only those are on PostgreSQL.
          .map((c) => [
            c.name,
            c.notNull,
            c.primary,
            c.isUnique,
            c.primary ? c.autoIncrement === true || (c.hasDefault && !("autoIncrement" in c)) : c.hasDefault,
          ])
          .sort();
      expect(shape(p.columns), name).toEqual(shape(s.columns));
      expect(p.indexes.map((i) => [i.config.name, i.config.unique]).sort(), name).toEqual(
        s.indexes.map((i) => [i.config.name, i.config.unique]).sort(),
      );
      expect(p.foreignKeys.map((f) => f.getName()).sort(), name).toEqual(
        s.foreignKeys.map((f) => f.getName()).sort(),
      );
    }
  });

  it("a row reads back with the same values: booleans, defaults, timestamps as ISO text", async () => {
    const db = await openTestDb();
    await db.insert(users).values(user("ann"));
    const row = await first(db.select().from(users).where(eq(users.name, "ann")));
    expect(row?.roles).toBe("reviewer");
    expect(row?.createdAt).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    expect(await db.select({ n: count() }).from(users)).toEqual([{ n: 1 }]);
  });
});

describe("text order", () => {
  it("names sort byte by byte, as on SQLite, even where the database's own collation would not", async () => {
    let db: Db;
    if (testDialect === "postgres") {
      // A database whose default collation (ICU en-US) sorts "_abB": the columns must not follow it.
      const admin = new pg.Client({ connectionString: process.env.DATABASE_URL });
      await admin.connect();
      const name = `icu_${Date.now()}`;
      await admin.query(
        `CREATE DATABASE ${name} TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'en-US' LOCALE 'C'`,
      );
      await admin.end();
      const url = new URL(process.env.DATABASE_URL ?? "");
      url.pathname = `/${name}`;
      db = await openStore({ dialect: "postgres", url: url.toString() });
      extra.push(db);
    } else {
      db = await openTestDb();
    }
    for (const name of ["b", "B", "a", "_"]) await db.insert(users).values(user(name));
    const names = await db.select({ name: users.name }).from(users).orderBy(users.name);
    expect(names.map((u) => u.name).join("")).toBe("B_ab");
  });
});

describe("one store, several copies of its module", () => {
  it("a store opened through one copy of the module is used through another (Next bundles modules more than once)", async () => {
    const db = await openTestDb();
    vi.resetModules();
    const other = await import("./db");
    expect(other.transaction).not.toBe(transaction);
    await other.transaction(db, async (tx) => {
      await tx.insert(users).values(user("ann"));
    });
    expect(other.dialectOf(db)).toBe(testDialect);
    expect((await db.select({ name: users.name }).from(users)).map((u) => u.name)).toEqual(["ann"]);
  });
});

describe("transactions", () => {
  it("all of a transaction's writes or none: a throw rolls every one back", async () => {
    const db = await openTestDb();
    await expect(
      transaction(db, async (tx) => {
        await tx.insert(users).values(user("ann"));
        await tx.insert(users).values(user("bob"));
        throw new Error("changed my mind");
      }),
    ).rejects.toThrow("changed my mind");
    expect(await db.select().from(users)).toEqual([]);
  });

  it("a nested transaction that fails rolls back alone", async () => {
    const db = await openTestDb();
    await transaction(db, async (tx) => {
      await tx.insert(users).values(user("ann"));
      await expect(
        transaction(tx, async (inner) => {
          await inner.insert(users).values(user("bob"));
          throw new Error("not bob");
        }),
      ).rejects.toThrow("not bob");
    });
    expect((await db.select({ name: users.name }).from(users)).map((u) => u.name)).toEqual(["ann"]);
  });

  it("a write from outside an open transaction is neither part of it nor rolled back with it", async () => {
    const db = await openTestDb();
    let outside: Promise<unknown> | undefined;
    await expect(
      transaction(db, async (tx) => {
        await tx.insert(users).values(user("ann"));
        // Another request's write arrives while the transaction is open.
        outside = db.insert(users).values(user("bob"));
        await new Promise((resolve) => setImmediate(resolve));
        throw new Error("roll back ann");
      }),
    ).rejects.toThrow("roll back ann");
    await outside;
    expect((await db.select({ name: users.name }).from(users)).map((u) => u.name)).toEqual(["bob"]);
  });

  it("read-then-write transactions on two handles at once lose no update (each as if it ran alone)", async () => {
    const { a, b } = await secondHandle();
    await a.insert(users).values({ ...user("counter"), roles: "0" });
    const bump = (db: Db) =>
      transaction(db, async (tx) => {
        const row = await first(
          tx.select({ roles: users.roles }).from(users).where(eq(users.name, "counter")),
        );
        await tx
          .update(users)
          .set({ roles: String(Number(row?.roles) + 1) })
          .where(eq(users.name, "counter"));
      });
    await Promise.all(Array.from({ length: 12 }, (_, i) => bump(i % 2 === 0 ? a : b)));
    expect((await first(b.select({ roles: users.roles }).from(users)))?.roles).toBe("12");
  });
});

describe("migrations", () => {
  it("stores started together migrate once", async () => {
    if (testDialect !== "postgres") {
      // SQLite: one server a file (server/store/lock.ts); opening twice must still find nothing to do.
      const { a } = await secondHandle();
      expect(await a.select().from(users)).toEqual([]);
      return;
    }
    const url = await freshDatabaseUrl();
    const opened = await Promise.all([1, 2, 3].map(() => openStore({ dialect: "postgres", url })));
    extra.push(...opened);
    const [one] = opened;
    if (!one) throw new Error("no store");
    const applied = await rows(one, sql`SELECT count(*)::int AS n FROM drizzle.__drizzle_migrations`);
    expect(applied).toEqual([{ n: localMigrations(migrationsFolder("postgres")).length }]);
  });

  it("a store migrated by a newer Gatehouse is refused, saying which is newer", async () => {
    const later = Date.UTC(2099, 0, 1);
    if (testDialect === "postgres") {
      const url = await freshDatabaseUrl();
      const db = await openStore({ dialect: "postgres", url });
      await rows(
        db,
        sql`INSERT INTO drizzle.__drizzle_migrations (hash, created_at) VALUES ('future', ${later})`,
      );
      await closeDb(db);
      await expect(openStore({ dialect: "postgres", url })).rejects.toThrow(
        /schema is newer than this Gatehouse's.*2099-01-01.*this build's newest/,
      );
      return;
    }
    const dir = mkdtempSync(path.join(tmpdir(), "gatehouse-newer-"));
    try {
      const file = path.join(dir, "g.db");
      const db = openDb(file);
      await rows(db, sql`INSERT INTO __drizzle_migrations (hash, created_at) VALUES ('future', ${later})`);
      await closeDb(db);
      expect(() => openDb(file)).toThrow(
        /schema is newer than this Gatehouse's.*2099-01-01.*this build's newest/,
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
