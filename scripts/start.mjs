#!/usr/bin/env node
/**
 * `npm start`: validates the config (stopping with every error before anything listens),
 * builds the app when no build exists yet, then runs the production server (server/main.ts:
 * Next.js with the agent hot paths in front) on HOST (default 127.0.0.1) and PORT (default
 * 3000), forwarding SIGINT/SIGTERM so tool servers are stopped cleanly.
 */
import { spawn, spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import path from "node:path";
import { serverBundle, serverCommand } from "./server-command.mjs";

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), "..");
const host = process.env.HOST ?? "127.0.0.1";
const port = process.env.PORT ?? "3000";
const nextBin = path.join(root, "node_modules", "next", "dist", "bin", "next");

const check = spawnSync(
  process.execPath,
  ["--conditions=react-server", "--import", "tsx", path.join(root, "server/cli/main.ts"), "config", "check"],
  { stdio: "inherit", cwd: process.cwd() },
);
if (check.status !== 0) process.exit(check.status ?? 1);

if (
  !existsSync(path.join(root, process.env.NEXT_DIST_DIR ?? ".next", "BUILD_ID")) ||
  !existsSync(serverBundle(root))
) {
  console.log("No build yet: running next build and bundling the server (about a minute)…");
  for (const step of [[nextBin, "build"], [path.join(root, "scripts", "build-server.mjs")]]) {
    const build = spawnSync(process.execPath, step, {
      stdio: "inherit",
      cwd: root,
      // Types are checked by `npm run check` and `npm run build`, not on a user's first start.
      env: { ...process.env, GATEHOUSE_BUILD_SKIP_TYPECHECK: "1" },
    });
    if (build.status !== 0) process.exit(build.status ?? 1);
  }
}

const server = serverCommand(root);
const child = spawn(server.command, server.args, {
  stdio: "inherit",
  cwd: root,
  env: { ...process.env, HOST: host, PORT: port },
});
for (const signal of ["SIGINT", "SIGTERM"]) process.on(signal, () => child.kill(signal));
child.on("exit", (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
