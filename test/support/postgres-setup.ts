/**
 * Vitest global setup of the `postgres` project: starts a throwaway PostgreSQL cluster
 * (scripts/postgres.mjs: Debian's package, installed when missing), hands its URL to the project's
 * test processes (test/support/postgres-env.ts), and migrates a template database once, which
 * test/support/store.ts copies for each test's fresh database. Stopped, data and all, when the
 * run ends.
 */
// @ts-expect-error: a plain ES module script without types.
import { startPostgres } from "../../scripts/postgres.mjs";

/** The migrated database every test database is a copy of (test/support/store.ts). */
export const TEMPLATE_DATABASE = "gatehouse_template";

export default async function setup(): Promise<() => Promise<void>> {
  const cluster = (await startPostgres()) as { url: string; stop(): Promise<void> };
  // Not DATABASE_URL here: this process's environment reaches every test process, those of the
  // sqlite project too; test/support/postgres-env.ts hands it to this project's alone.
  process.env.GATEHOUSE_TEST_POSTGRES_URL = cluster.url;
  try {
    const { default: pg } = await import("pg");
    const admin = new pg.Client({ connectionString: cluster.url });
    await admin.connect();
    await admin.query(`CREATE DATABASE ${TEMPLATE_DATABASE}`);
    await admin.end();
    const url = new URL(cluster.url);
    url.pathname = `/${TEMPLATE_DATABASE}`;
    // The store picks its tables when it loads: PostgreSQL's, for the template's migration.
    const before = process.env.DATABASE_URL;
    process.env.DATABASE_URL = cluster.url;
    try {
      const { closeDb, openStore } = await import("@/server/store/db");
      await closeDb(await openStore({ dialect: "postgres", url: url.toString() }));
    } finally {
      if (before === undefined) delete process.env.DATABASE_URL;
      else process.env.DATABASE_URL = before;
    }
  } catch (err) {
    await cluster.stop();
    throw err;
  }
  return () => cluster.stop();
}
