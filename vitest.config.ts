import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";

const root = fileURLToPath(new URL(".", import.meta.url));

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
    include: ["server/**/*.test.ts", "lib/**/*.test.ts", "test/**/*.test.ts"],
    // Tests start real processes: the CLI through tsx (about a second each on an idle 2-core
    // machine, several under CI's load; some tests start it twice), MCP servers, Gatehouse
    // itself. Vitest's 5 s default then fails a test that is only slow. A test waiting for an
    // event that never comes still fails, at this bound or at its own.
    testTimeout: 30_000,
  },
});
