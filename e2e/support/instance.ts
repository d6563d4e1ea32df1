import { type ChildProcessByStdio, spawn } from "node:child_process";
import { createWriteStream, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import type { Readable } from "node:stream";
import { fileURLToPath } from "node:url";
import { serverCommand } from "../../scripts/server-command.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..");

/** A Gatehouse of a spec's own, on an empty store: what a new user gets from `npm start`. */
export interface Instance {
  baseURL: string;
  /** The one-time link the console printed for creating the first owner. */
  setupLink: string;
  /** The temporary directory holding its config, store and log. */
  dir: string;
  /** The demo server's state file (its `addNoteRuns` counts mutations that ran). */
  demoStateFile: string;
  /** Stops it (and its tool servers) and removes its directory. */
  stop: () => Promise<void>;
}

/** A loopback port nothing listens on at the moment of asking. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const addr = srv.address();
      srv.close(() => (addr && typeof addr === "object" ? resolve(addr.port) : reject(new Error("no port"))));
    });
  });
}

/**
 * Starts the production server (the build's bundle, as `npm start` runs it) on a free loopback
 * port with a fresh temporary store. `config` is written as its `gatehouse.json`; by default it
 * is the repository's own (the demo server, switched on), with the demo's state file moved into
 * the temporary directory. `{dir}` in any string of `config` becomes that directory. Resolves
 * once the setup link is printed; rejects, naming the log, if the server exits or prints none
 * within 60 s. `env` is added to its environment (`OTEL_EXPORTER_OTLP_ENDPOINT`, say).
 */
export async function startInstance(config?: unknown, env?: Record<string, string>): Promise<Instance> {
  const dir = mkdtempSync(path.join(os.tmpdir(), "gatehouse-e2e-own-"));
  const demoStateFile = path.join(dir, "demo-state.json");
  const chosen = config ?? {
    mcpServers: {
      demo: {
        command: process.execPath,
        args: [path.join(root, "demo", "server.mjs")],
        env: { DEMO_STATE_FILE: demoStateFile },
        enabled: true,
      },
    },
    approvals: { expireAfterSeconds: 900, waitSeconds: 60, selfApproval: false },
    catalogue: { descriptionMaxChars: 1024, refreshSeconds: 300 },
  };
  const configFile = path.join(dir, "gatehouse.json");
  writeFileSync(configFile, JSON.stringify(chosen, null, 2).replaceAll("{dir}", dir));
  const port = await freePort();
  const baseURL = `http://127.0.0.1:${port}`;
  const { child, setupLink, exited } = await launchServer({
    configFile,
    dbFile: path.join(dir, "gatehouse.db"),
    logFile: path.join(dir, "server.log"),
    port,
    ...(env ? { env } : {}),
  });
  return {
    baseURL,
    setupLink,
    dir,
    demoStateFile,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) {
        const kill = setTimeout(() => process.kill(-(child.pid ?? 0), "SIGKILL"), 10_000);
        // The process group: its stdio tool servers stop with it.
        process.kill(-(child.pid ?? 0), "SIGTERM");
        await exited;
        clearTimeout(kill);
      }
      if (!process.env.E2E_KEEP) rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * Spawns the production server (the build's bundle) in its own process group with this config,
 * store and port, its output written to `logFile`; resolves with the setup link once it is
 * printed, and rejects, naming the log, if the server exits first or prints none within 60 s.
 * `env` is added to the process's environment.
 */
export async function launchServer(opts: {
  configFile: string;
  dbFile: string;
  logFile: string;
  port: number;
  env?: Record<string, string>;
}): Promise<{
  child: ChildProcessByStdio<null, Readable, Readable>;
  setupLink: string;
  exited: Promise<void>;
}> {
  const log = createWriteStream(opts.logFile);
  const server = serverCommand(root);
  const child = spawn(server.command, server.args, {
    cwd: root,
    env: {
      ...process.env,
      ...opts.env,
      GATEHOUSE_CONFIG: opts.configFile,
      GATEHOUSE_DB: opts.dbFile,
      HOST: "127.0.0.1",
      PORT: String(opts.port),
    },
    stdio: ["ignore", "pipe", "pipe"],
    detached: true,
  });
  child.stderr.pipe(log);
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const setupLink = await new Promise<string>((resolve, reject) => {
    let seen = "";
    const timer = setTimeout(
      () => reject(new Error(`no setup link within 60 s; see ${opts.logFile}`)),
      60_000,
    );
    child.stdout.on("data", (chunk: Buffer) => {
      log.write(chunk);
      seen += chunk.toString("utf8");
      const m = /(http:\/\/\S+\/setup\?code=\S+)/.exec(seen);
      if (m?.[1]) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`Gatehouse exited with ${code}; see ${opts.logFile}`));
    });
  });
  return { child, setupLink, exited };
}
