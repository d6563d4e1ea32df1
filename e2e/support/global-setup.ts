import { spawn } from "node:child_process";
import { createWriteStream, mkdirSync, mkdtempSync, renameSync, writeFileSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { SMTPServer } from "smtp-server";
import {
  E2E_SECRET,
  type E2EState,
  type OAuthFixtures,
  RECEIVERS,
  type ReceivedHook,
  STATE_FILE,
} from "./env";
import { freePort, launchServer } from "./instance";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..");

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
 * Runs `node <script>` with `env` added, its stderr (and stdout) appended to `logFile`, and
 * resolves with its pid once its stdout has a line matching `ready`; rejects if it exits first or
 * says nothing within 30 s (and stops it then).
 */
async function startFixtureProgram(
  script: string,
  env: Record<string, string>,
  ready: RegExp,
  logFile: string,
): Promise<number> {
  const log = createWriteStream(logFile, { flags: "a" });
  const child = spawn(process.execPath, [script], {
    cwd: root,
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  child.stderr.pipe(log);
  await new Promise<void>((resolve, reject) => {
    let seen = "";
    const fail = (why: string) => {
      clearTimeout(timer);
      child.kill("SIGTERM");
      reject(new Error(`${path.basename(script)} ${why}; see ${logFile}`));
    };
    const timer = setTimeout(() => fail("did not say it was listening within 30 s"), 30_000);
    child.once("exit", (code) => fail(`exited with ${code}`));
    child.stdout.on("data", (chunk: Buffer) => {
      log.write(chunk);
      seen += chunk.toString("utf8");
      if (ready.test(seen)) {
        clearTimeout(timer);
        child.removeAllListeners("exit");
        resolve();
      }
    });
  });
  // Stopped by global-teardown (by pid); the runner must not wait for it, nor for its pipes.
  child.unref();
  (child.stdout as unknown as { unref?: () => void }).unref?.();
  (child.stderr as unknown as { unref?: () => void }).unref?.();
  return child.pid ?? 0;
}

/**
 * The authorization server (oidc-provider) and the MCP server that checks its bearer tokens,
 * for the `hosted` server entry. Both ports are chosen first: each names the other's URL.
 */
async function startOAuthFixtures(dir: string): Promise<OAuthFixtures> {
  const asPort = await freePort();
  let rsPort = await freePort();
  // The first port is free again once chosen, so the second choice may be the same one.
  while (rsPort === asPort) rsPort = await freePort();
  const issuer = `http://127.0.0.1:${asPort}`;
  const resourceUrl = `http://127.0.0.1:${rsPort}/mcp`;
  const authorizationLog = path.join(dir, "authorization-server.jsonl");
  const resourceLog = path.join(dir, "resource-server.jsonl");
  const pids: number[] = [];
  try {
    pids.push(
      await startFixtureProgram(
        path.join(root, "test", "fixtures", "oauth", "authorization-server.mjs"),
        { HOST: "127.0.0.1", PORT: String(asPort), RESOURCE: resourceUrl, REQUEST_LOG: authorizationLog },
        new RegExp(`^listening ${issuer}$`, "m"),
        path.join(dir, "authorization-server.log"),
      ),
    );
    pids.push(
      await startFixtureProgram(
        path.join(root, "test", "fixtures", "servers", "oauth-resource.mjs"),
        { HOST: "127.0.0.1", PORT: String(rsPort), AUTHORIZATION_SERVER: issuer, REQUEST_LOG: resourceLog },
        new RegExp(`^listening ${rsPort}$`, "m"),
        path.join(dir, "resource-server.log"),
      ),
    );
  } catch (err) {
    stopPids(pids);
    throw err;
  }
  return { issuer, resourceUrl, authorizationLog, resourceLog, pids };
}

function stopPids(pids: readonly number[]): void {
  for (const pid of pids) {
    try {
      process.kill(pid, "SIGTERM");
    } catch {
      // Already gone.
    }
  }
}

/**
 * Starts, in the runner's process (they live for the whole run; global-teardown stops them once
 * Gatehouse is gone), an SMTP server and a webhook receiver that write what they get into the temp
 * dir, and as child processes an OAuth authorization server and the MCP server behind it (the
 * `hosted` server, which asks for a sign-in); then the production server (server/main.ts) on a
 * fresh temporary store and a config whose notifications go to them, and waits for the setup link
 * Gatehouse prints on its console.
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
  const oauth = await startOAuthFixtures(dir);
  try {
    await startGatehouse({
      dir,
      dbFile,
      mailDir,
      hooksDir,
      mailPort: mail.port,
      hooksPort: hooks.port,
      oauth,
    });
  } catch (err) {
    stopPids(oauth.pids);
    throw err;
  }
}

/**
 * Writes the config (notifications to the receivers, `hosted` at the resource server), starts
 * Gatehouse and waits for its setup link, then writes the state file.
 */
async function startGatehouse(run: {
  dir: string;
  dbFile: string;
  mailDir: string;
  hooksDir: string;
  mailPort: number;
  hooksPort: number;
  oauth: OAuthFixtures;
}): Promise<void> {
  const { dir, dbFile, mailDir, hooksDir, mailPort, hooksPort, oauth } = run;
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
        // A hosted server behind OAuth (e2e/oauth.spec.ts signs in to it): needs_auth until an
        // owner connects. Its authorization server and itself are on loopback, hence allowPrivate.
        hosted: {
          url: oauth.resourceUrl,
          enabled: true,
          allowPrivate: true,
          auth: { type: "oauth", allowPrivate: true, scopes: ["read", "write"] },
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
            url: `http://127.0.0.1:${hooksPort}/hook`,
            secret: "${E2E_SECRET}",
            events: ["call.pending", "call.decided"],
            allowPrivate: true,
          },
        ],
        email: {
          smtp: `smtp://127.0.0.1:${mailPort}`,
          from: "gatehouse@e2e.test",
          events: ["call.pending"],
          allowPrivate: true,
        },
      },
    }),
  );
  const logFile = path.join(dir, "server.log");
  const { child, setupLink } = await launchServer({
    configFile,
    dbFile,
    logFile,
    port,
    env: { E2E_SECRET },
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
    oauth,
  };
  writeFileSync(STATE_FILE, JSON.stringify(state));
}
