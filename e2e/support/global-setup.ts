import { spawn } from "node:child_process";
import { createWriteStream, mkdtempSync, writeFileSync } from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { serverCommand } from "../../scripts/server-command.mjs";
import { E2E_SECRET, type E2EState, STATE_FILE } from "./env";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..");

function freePort(): Promise<number> {
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
 * Starts the production server (server/main.ts) on a fresh temporary store and config (the demo server only) and waits
 * for the setup link Gatehouse prints on its console.
 */
export default async function globalSetup(): Promise<void> {
  const dir = mkdtempSync(path.join(os.tmpdir(), "gatehouse-e2e-"));
  const dbFile = path.join(dir, "gatehouse.db");
  // The suite creates users and runs mutations: it must never touch a real store.
  if (!path.resolve(dbFile).startsWith(os.tmpdir())) throw new Error(`refusing to run against ${dbFile}`);
  const demoStateFile = path.join(dir, "demo-state.json");
  const configFile = path.join(dir, "gatehouse.json");
  writeFileSync(
    configFile,
    JSON.stringify({
      mcpServers: {
        demo: {
          command: process.execPath,
          args: [path.join(root, "demo", "server.mjs")],
          cwd: root,
          env: { DEMO_STATE_FILE: demoStateFile },
          enabled: true,
        },
        // What users see with a crowded server, a broken one and a dark one.
        crowd: {
          command: process.execPath,
          args: [path.join(root, "test", "fixtures", "servers", "many-tools.mjs")],
          maxTools: 200,
          enabled: true,
        },
        broken: {
          command: path.join(dir, "no-such-program"),
          enabled: true,
          env: { API_KEY: "${E2E_SECRET}" },
        },
        // Refused at dial time (loopback without allowPrivate): no packet is sent.
        private: {
          url: "http://localhost:65500/mcp",
          headers: { Authorization: "Bearer ${E2E_SECRET}" },
          enabled: true,
        },
        dark: { url: "https://tools.example.com/mcp", enabled: false },
        // Catalogue governance: its tool definitions are a JSON file that
        // e2e/governance.spec.ts rewrites (path: <dir>/shifty-tools.json), re-read on every tools/list.
        shifty: {
          command: process.execPath,
          args: [path.join(root, "test", "fixtures", "servers", "shifty.mjs")],
          cwd: root,
          env: { SHIFTY_TOOLS_FILE: path.join(dir, "shifty-tools.json") },
          enabled: true,
        },
      },
      approvals: { expireAfterSeconds: 900, waitSeconds: 60, selfApproval: false },
    }),
  );
  const port = await freePort();
  const baseURL = `http://127.0.0.1:${port}`;
  const logFile = path.join(dir, "server.log");
  const log = createWriteStream(logFile);
  const server = serverCommand(root);
  const child = spawn(server.command, server.args, {
    cwd: root,
    env: {
      ...process.env,
      GATEHOUSE_CONFIG: configFile,
      GATEHOUSE_DB: dbFile,
      E2E_SECRET: E2E_SECRET,
      HOST: "127.0.0.1",
      PORT: String(port),
    },
    stdio: ["ignore", "pipe", "pipe"],
    detached: true,
  });
  child.stderr.pipe(log);
  const setupLink = await new Promise<string>((resolve, reject) => {
    let seen = "";
    const timer = setTimeout(() => reject(new Error(`no setup link within 60 s; see ${logFile}`)), 60_000);
    child.stdout.on("data", (chunk: Buffer) => {
      log.write(chunk);
      seen += chunk.toString("utf8");
      const m = /(http:\/\/\S+\/setup\?code=\S+)/.exec(seen);
      if (m?.[1]) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
    child.once("exit", (code) => reject(new Error(`Gatehouse exited with ${code}; see ${logFile}`)));
  });
  child.unref();
  const state: E2EState = { baseURL, setupLink, dir, pid: child.pid ?? 0, demoStateFile, logFile };
  writeFileSync(STATE_FILE, JSON.stringify(state));
}
