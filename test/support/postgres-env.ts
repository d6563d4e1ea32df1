/**
 * Setup file of the `postgres` Vitest project, run in each of its test processes before a test
 * file loads: DATABASE_URL names the throwaway cluster test/support/postgres-setup.ts started, so
 * the store picks PostgreSQL's tables and test/support/store.ts makes databases there.
 */
const url = process.env.GATEHOUSE_TEST_POSTGRES_URL;
if (!url) throw new Error("the postgres project's global setup did not start a cluster");
process.env.DATABASE_URL = url;
