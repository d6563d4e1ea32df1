import { existsSync } from "node:fs";
import path from "node:path";

/**
 * Where `npm run build` puts the production server's bundle (scripts/build-server.mjs): in
 * the build folder (`NEXT_DIST_DIR`, default `.next`), so it goes with the build it serves.
 * @param {string} root the repository
 * @returns {string}
 */
export function serverBundle(root) {
  return path.join(root, process.env.NEXT_DIST_DIR ?? ".next", "gatehouse-server.mjs");
}

/**
 * How to run the production server (server/main.ts: Next.js with the agent hot paths in
 * front) from its bundle. `nodeArgs` go first (e.g. `--cpu-prof`). Throws when there is no
 * build yet, naming the command that makes one.
 * @param {string} root the repository
 * @param {string[]} [nodeArgs]
 * @returns {{ command: string, args: string[] }}
 */
export function serverCommand(root, nodeArgs = []) {
  const bundle = serverBundle(root);
  if (!existsSync(bundle)) throw new Error(`no server bundle at ${bundle}: run npm run build first`);
  return { command: process.execPath, args: [...nodeArgs, bundle] };
}
