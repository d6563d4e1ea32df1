import { spawn } from "node:child_process";
import { createWriteStream, mkdirSync, mkdtempSync, renameSync, writeFileSync } from "node:fs";
import http from "node:http";
import net, { type AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { SMTPServer } from "smtp-server";
import { serverCommand } from "../../scripts/server-command.mjs";
import { E2E_SECRET, type E2EState, RECEIVERS, type ReceivedHook, STATE_FILE } from "./env";

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

/** Writes `<dir>/<n><ext>` whole: aside first, then renamed, so a reader never sees half a file. */
function fileWriter(dir: string, ext: string): (content: string | Buffer) => void {
  mkdirSync(dir, { recursive: true });
  let n = 0;
  return (content) => {
    n += 1;
    const name = `${String(n).padStart(4, "0")}${ext}`;
    const aside = path.join(dir, `.${name}.tmp`);
    writeFileSync(aside, content);
    renameSync(aside, path.join(dir, name));
  };
}

/**
 * An SMTP server on 127.0.0.1 without TLS (no STARTTLS offered, so nodemailer sends in plain
 * text), any login or none accepted; each message is written raw (RFC 822) to `dir`.
 */
async function startMailReceiver(dir: string): Promise<{ port: number; close: () => Promise<void> }> {
  const write = fileWriter(dir, ".eml");
  const server = new SMTPServer({
    secure: false,
    disabledCommands: ["STARTTLS"],
    authOptional: true,
    allowInsecureAuth: true,
    logger: false,
    // Gatehouse is stopped first, so nothing should be left open; do not wait 30 s if it is.
    closeTimeout: 1_000,
    onAuth: (auth, _session, callback) => callback(null, { user: auth.username ?? "" }),
    onData: (stream, _session, callback) => {
      const chunks: Buffer[] = [];
      stream.on("data", (chunk: Buffer) => chunks.push(chunk));
      stream.once("error", (err: Error) => callback(err));
      stream.once("end", () => {
        write(Buffer.concat(chunks));
        callback();
      });
    },
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
  const { port } = server.server.address() as AddressInfo;
  return { port, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

/** Most bytes the webhook receiver reads of one body; Gatehouse's are a few KiB. */
const MAX_HOOK_BODY = 1024 * 1024;

/** An HTTP server on 127.0.0.1 that records each POST (a {@link ReceivedHook}) in `dir` and answers 200. */
async function startHookReceiver(dir: string): Promise<{ port: number; close: () => Promise<void> }> {
  const write = fileWriter(dir, ".json");
  const server = http.createServer((req, res) => {
    if (req.method !== "POST") {
      res.writeHead(405, { Allow: "POST" }).end();
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    req.on("data", (chunk: Buffer) => {
      size += chunk.length;
      if (size <= MAX_HOOK_BODY) chunks.push(chunk);
    });
    req.once("end", () => {
      if (size > MAX_HOOK_BODY) {
        res.writeHead(413).end();
        return;
      }
      const hook: ReceivedHook = {
        method: req.method ?? "",
        url: req.url ?? "",
        headers: req.headers,
        body: Buffer.concat(chunks).toString("utf8"),
        receivedAt: new Date().toISOString(),
      };
      write(JSON.stringify(hook, null, 2));
      res.writeHead(200, { "Content-Type": "text/plain" }).end("ok");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
  const { port } = server.address() as AddressInfo;
  return {
    port,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/**
 * Starts, in the runner's process (they live for the whole run; global-teardown stops them once
 * Gatehouse is gone), an SMTP server and a webhook receiver that write what they get into the temp
 * dir, then the production server (server/main.ts) on a fresh temporary store and a config whose
 * notifications go to them, and waits for the setup link Gatehouse prints on its console.
 */
export default async function globalSetup(): Promise<void> {
  const dir = mkdtempSync(path.join(os.tmpdir(), "gatehouse-e2e-"));
  const dbFile = path.join(dir, "gatehouse.db");
  // The suite creates users and runs mutations: it must never touch a real store.
  if (!path.resolve(dbFile).startsWith(os.tmpdir())) throw new Error(`refusing to run against ${dbFile}`);
  const mailDir = path.join(dir, "mail");
  const hooksDir = path.join(dir, "hooks");
  const mail = await startMailReceiver(mailDir);
  const hooks = await startHookReceiver(hooksDir);
  (globalThis as Record<symbol, unknown>)[RECEIVERS] = async () => {
    await Promise.allSettled([mail.close(), hooks.close()]);
  };
  // Links in messages must open this Gatehouse: choose its port before writing the config.
  const port = await freePort();
  const baseURL = `http://127.0.0.1:${port}`;
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
      // Four eyes, and a deny with a condition, for tokens no other spec uses (e2e/grants.spec.ts
      // and its looks): every other requester's calls follow the tools' defaults.
      rules: [
        {
          name: "pair-review",
          tools: ["demo_*"],
          agents: ["pair-bot", "pair-look-bot"],
          decision: "review",
          approvals: 2,
          reason: "two people check pair-bot",
        },
        {
          name: "no-drop-notes",
          tools: ["demo_add_note"],
          agents: ["grant-bot"],
          when: "args.text.startsWith('DROP')",
          decision: "deny",
          reason: "grant-bot never drops notes",
        },
      ],
      // Every spec's pending calls reach both; e2e/notify.spec.ts follows one of them end to end.
      notifications: {
        publicUrl: baseURL,
        webhooks: [
          {
            name: "e2e-hook",
            url: `http://127.0.0.1:${hooks.port}/hook`,
            secret: "${E2E_SECRET}",
            events: ["call.pending", "call.decided"],
            allowPrivate: true,
          },
        ],
        email: {
          smtp: `smtp://127.0.0.1:${mail.port}`,
          from: "gatehouse@e2e.test",
          events: ["call.pending"],
          allowPrivate: true,
        },
      },
    }),
  );
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
  const state: E2EState = {
    baseURL,
    setupLink,
    dir,
    pid: child.pid ?? 0,
    demoStateFile,
    logFile,
    mailDir,
    hooksDir,
  };
  writeFileSync(STATE_FILE, JSON.stringify(state));
}
