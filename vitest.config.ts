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
  },
});
