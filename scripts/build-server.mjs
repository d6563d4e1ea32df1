#!/usr/bin/env node
/**
 * Bundles the production server (server/main.ts and the server code it imports) into one ES
 * module in the build folder, next to Next's own output: `npm run build` runs it after
 * `next build`. Running the bundle with plain Node keeps a TypeScript loader out of the
 * serving process (tsx there cost about 130 MiB of RSS, docs/PERFORMANCE.md). Packages stay
 * external, loaded from node_modules as Next loads them; "server-only" becomes an empty module.
 */
import path from "node:path";
import { build } from "esbuild";
import { serverBundle } from "./server-command.mjs";

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), "..");

/** "server-only" guards modules against client bundles; on the server it is a no-op. */
const serverOnly = {
  name: "server-only",
  setup(b) {
    b.onResolve({ filter: /^server-only$/ }, () => ({ path: "server-only", namespace: "empty" }));
    b.onLoad({ filter: /.*/, namespace: "empty" }, () => ({ contents: "", loader: "js" }));
  },
};

await build({
  absWorkingDir: root,
  entryPoints: ["server/main.ts"],
  outfile: serverBundle(root),
  bundle: true,
  platform: "node",
  format: "esm",
  target: "node20",
  packages: "external",
  tsconfig: "tsconfig.json",
  plugins: [serverOnly],
  logLevel: "warning",
});
console.log(`server bundle: ${path.relative(root, serverBundle(root))}`);
