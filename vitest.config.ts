import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";

const root = fileURLToPath(new URL(".", import.meta.url));

/**
 * The suites that also run on PostgreSQL (the `postgres` project): the store and every room
 * whose promises are made in it — calls, grants, the catalogue, people and sessions, the outbox.
 */
const onBothStores = [
  "server/store/**/*.test.ts",
  "server/calls/**/*.test.ts",
  "server/grants/**/*.test.ts",
  "server/catalogue/**/*.test.ts",
  "server/auth/**/*.test.ts",
  "server/notify/**/*.test.ts",
  "server/servers/**/*.test.ts",
  "server/replicas/**/*.test.ts",
  "server/agents/**/*.test.ts",
  "server/cli/user-set-remove.test.ts",
  "server/agent-mcp/stored-*.test.ts",
];

/**
 * What is about SQLite alone: group commit, the file lock of one process per store, a full disk,
 * a file locked by another process.
 */
const sqliteOnly = [
  "server/store/write-batch.test.ts",
  "server/store/lock.test.ts",
  "server/store/lock-processes.test.ts",
  "server/store/full-store.test.ts",
  "server/calls/expiry-busy-store.test.ts",
  "server/servers/history.test.ts",
];

export default defineConfig({
  resolve: {
    conditions: ["react-server", "node", "import", "default"],
    alias: {
      "@": root,
      // server-only throws unless resolved with the "react-server" condition, and Vitest loads
      // node_modules through Node's own resolver, so point it at its empty module directly.
      "server-only": fileURLToPath(new URL("node_modules/server-only/empty.js", import.meta.url)),
    },
  },
  test: {
    // Tests start real processes: the CLI through tsx (about a second each on an idle 2-core
    // machine, several under CI's load; some tests start it twice), MCP servers, Gatehouse
    // itself. Vitest's 5 s default then fails a test that is only slow. A test waiting for an
    // event that never comes still fails, at this bound or at its own.
    testTimeout: 30_000,
    projects: [
      {
        extends: true,
        test: {
          name: "sqlite",
          include: ["server/**/*.test.ts", "lib/**/*.test.ts", "test/**/*.test.ts"],
          // SQLite whatever the shell says: a DATABASE_URL would switch the store to PostgreSQL.
          env: { DATABASE_URL: "" },
        },
      },
      {
        extends: true,
        test: {
          name: "postgres",
          include: onBothStores,
          exclude: sqliteOnly,
          globalSetup: ["test/support/postgres-setup.ts"],
          setupFiles: ["test/support/postgres-env.ts"],
        },
      },
    ],
  },
});
