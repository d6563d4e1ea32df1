import path from "node:path";

/**
 * How to run the production server (server/main.ts: Next.js with the agent hot paths in
 * front): Node with the `react-server` condition (server modules import "server-only") and
 * tsx. `root` is the repository; `nodeArgs` go before the rest (e.g. `--cpu-prof`).
 * @param {string} root
 * @param {string[]} [nodeArgs]
 * @returns {{ command: string, args: string[] }}
 */
export function serverCommand(root, nodeArgs = []) {
  return {
    command: process.execPath,
    args: [...nodeArgs, "--conditions=react-server", "--import", "tsx", path.join(root, "server", "main.ts")],
  };
}
