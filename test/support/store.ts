/**
 * The store a test runs on. In the `sqlite` Vitest project: SQLite in memory. In the `postgres`
 * project (DATABASE_URL set by test/support/postgres-setup.ts to a throwaway cluster): an empty,
 * migrated database of that cluster (a copy of the template, or one an earlier test of the file
 * used, emptied). Either way closed after the test.
 */
import { randomBytes } from "node:crypto";
import { sql } from "drizzle-orm";
import { getTableConfig, type PgTable } from "drizzle-orm/pg-core";
import pg from "pg";
import { afterEach } from "vitest";
import { closeDb, type Db, openDb, openStore, rows } from "@/server/store/db";
import { tablesDialect } from "@/server/store/schema";
import * as pgTables from "@/server/store/schema-pg";
import { TEMPLATE_DATABASE } from "./postgres-setup";

/** Which store this test process runs on. */
export const testDialect = tablesDialect;

const open: Array<{ db: Db; url?: string }> = [];
/** PostgreSQL databases this test file made whose store is closed again: emptied and reused. */
const spare: string[] = [];
afterEach(async () => {
  const closing = open.splice(0);
  await Promise.all(closing.map(({ db }) => closeDb(db)));
  for (const { url } of closing) if (url) spare.push(url);
});

/** Every table of the schema, for emptying a reused database. */
const tableNames = Object.values(pgTables).map((t) => getTableConfig(t as unknown as PgTable).name);

/**
 * The URL of a new, empty PostgreSQL database on the test cluster (postgres project only): for
 * a runtime or a process that opens the store itself.
 */
export async function freshDatabaseUrl(): Promise<string> {
  const admin = process.env.DATABASE_URL;
  if (testDialect !== "postgres" || !admin) throw new Error("freshDatabaseUrl: not in the postgres project");
  const name = `t_${randomBytes(8).toString("hex")}`;
  const client = new pg.Client({ connectionString: admin });
  await client.connect();
  try {
    // A copy of the migrated template: far quicker than migrating each new database.
    await client.query(`CREATE DATABASE ${name} TEMPLATE ${TEMPLATE_DATABASE}`);
  } finally {
    await client.end();
  }
  const url = new URL(admin);
  url.pathname = `/${name}`;
  return url.toString();
}

/** A migrated, empty store for one test, closed after it. */
export async function openTestDb(): Promise<Db> {
  if (testDialect !== "postgres") {
    const db = openDb(":memory:");
    open.push({ db });
    return db;
  }
  // Making a database costs far more than emptying one a test before had.
  const reused = spare.pop();
  const url = reused ?? (await freshDatabaseUrl());
  const db = await openStore({ dialect: "postgres", url });
  if (reused)
    await rows(
      db,
      sql.raw(`TRUNCATE ${tableNames.map((t) => `"${t}"`).join(", ")} RESTART IDENTITY CASCADE`),
    );
  open.push({ db, url });
  return db;
}

/** Runs `sql` on the test cluster's administrative database (the postgres project's DATABASE_URL). */
export async function asAdmin(sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: process.env.DATABASE_URL });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}
