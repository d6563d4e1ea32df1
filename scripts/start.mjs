#!/usr/bin/env node
/**
 * `npm start`: validates the config (stopping with every error before anything listens),
 * builds the app when no build exists yet, then runs the production server (server/main.ts:
 * Next.js with the agent hot paths in front) on HOST (default 127.0.0.1) and PORT (default
 * 3000), forwarding SIGINT/SIGTERM/SIGHUP so tool servers are stopped cleanly and the store's
 * lock file is removed (the server takes the same signal arriving twice, from the terminal and
 * from here, as one).
 *
 * The first build takes minutes, not seconds (136 s was measured on a busy 2-core machine): its
 * own output is shown as it comes, and a line every {@link PROGRESS_AFTER_MS} of silence says it
 * is still at work, so a quiet compile never looks like a hang.
 */
import { spawn, spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { constants as osConstants } from "node:os";
import path from "node:path";
import { serverBundle, serverCommand } from "./server-command.mjs";

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), "..");
const host = process.env.HOST ?? "127.0.0.1";
const port = process.env.PORT ?? "3000";
const nextBin = path.join(root, "node_modules", "next", "dist", "bin", "next");

/** Silence from a build step this long earns a progress line. */
const PROGRESS_AFTER_MS = 10_000;

/** The child running now (a build step, then the server): the signals this process gets go to it. */
let current = null;
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) {
  process.on(signal, () => {
    if (current) current.kill(signal);
    else process.exit(128 + (osConstants.signals[signal] ?? 0));
  });
}

/** `ms` as people say it: "45 s", "2 min 16 s". */
function duration(ms) {
  const s = Math.round(ms / 1000);
  return s < 60 ? `${s} s` : `${Math.floor(s / 60)} min ${s % 60} s`;
}

/**
 * Runs one build step with its output passed through, saying every {@link PROGRESS_AFTER_MS}
 * of silence that it is still at work; resolves with its exit code (1 when a signal ended it).
 */
function buildStep(args, what, startedAt) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, args, {
      stdio: ["ignore", "pipe", "pipe"],
      cwd: root,
      // Types are checked by `npm run check` and `npm run build`, not on a user's first start.
      env: { ...process.env, GATEHOUSE_BUILD_SKIP_TYPECHECK: "1" },
    });
    current = child;
    let heardAt = Date.now();
    const pass = (out) => (chunk) => {
      heardAt = Date.now();
      out.write(chunk);
    };
    child.stdout.on("data", pass(process.stdout));
    child.stderr.on("data", pass(process.stderr));
    const ticker = setInterval(() => {
      if (Date.now() - heardAt < PROGRESS_AFTER_MS) return;
      heardAt = Date.now();
      console.log(`… still ${what} (${duration(Date.now() - startedAt)} so far)`);
    }, 1000);
    child.on("exit", (code) => {
      clearInterval(ticker);
      current = null;
      resolve(code ?? 1);
    });
  });
}

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
  const startedAt = Date.now();
  console.log(
    "No build yet: building Gatehouse once before its first start. This takes one to three minutes " +
      "(longer on a busy machine); later starts take seconds.",
  );
  const steps = [
    { args: [nextBin, "build"], what: "building the app (next build)" },
    { args: [path.join(root, "scripts", "build-server.mjs")], what: "bundling the server" },
  ];
  for (const { args, what } of steps) {
    const status = await buildStep(args, what, startedAt);
    if (status !== 0) process.exit(status);
  }
  console.log(`Built in ${duration(Date.now() - startedAt)}; starting Gatehouse.`);
}

const server = serverCommand(root);
const child = spawn(server.command, server.args, {
  stdio: "inherit",
  cwd: root,
  env: { ...process.env, HOST: host, PORT: port },
});
current = child;
child.on("exit", (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
