/**
 * `npm run bench` (`-- --smoke` for CI's small run): Gatehouse side by side with the floor and a
 * peer, in one run, printing medians and ratios. Needs a production build (`npm run build`).
 *
 * Rows: the SDK Client straight to the echo server (stdio, streamable HTTP); a bare SDK
 * pass-through (the minimal proxy floor); Gatehouse (started by `npm start` with
 * `NODE_ENV=production`) through its REST API and /mcp with a real agent token, an enabled
 * read-only tool and audit on, to the stdio echo server and to the same server over streamable
 * HTTP (a `url` server), and REST again while an owner's browser shows /tools and a reviewer's
 * /approvals; supergateway over the same stdio server. Rows marked "varying" send a different
 * argument value on every call; the others one value throughout. The `replicas` section
 * (bench/replicas.ts) prints a table of its own: PostgreSQL replicas against SQLite.
 */
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { gzipSync } from "node:zlib";
import type { Tool } from "@modelcontextprotocol/client";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { syncServerTools } from "../server/catalogue/catalogue";
import type { ServerConfig } from "../server/config";
import { McpManager } from "../server/mcp/manager";
import { closeDb, openDb } from "../server/store/db";
import { launchBrowser, signedIn } from "./browser";
import type { CallerSpec } from "./caller";
import { openDashboards } from "./dashboards";
import { type Gatehouse, startGatehouse } from "./gatehouse";
import { benchIndependent } from "./independent";
import { benchObservability } from "./observability";
import { benchReplicas } from "./replicas";
import {
  freePort,
  mib,
  percentiles,
  root,
  rssOf,
  runCaller,
  type Started,
  type Stats,
  startProcess,
} from "./support";
import { benchToolSets } from "./tool-sets";

const smoke = process.argv.includes("--smoke");
const startedAt = performance.now();
/**
 * `--only=minimal,gatehouse` runs just those sections (the first word of each as printed:
 * floor, minimal, gatehouse, dashboards, supergateway, dial, catalogue, memory, soak, tools, replicas,
 * observability, tool-sets, independent) and writes
 * bench/results/partial.json; the default is all of them.
 */
const only = process.argv
  .find((a) => a.startsWith("--only="))
  ?.slice("--only=".length)
  .split(",");
const want = (section: string) => !only || only.includes(section);
const SIZE = smoke
  ? {
      seq: 100,
      warmup: 20,
      conc: 320,
      approvals: 10,
      servers: 5,
      crowd: 1,
      catServers: 10,
      catTools: 100,
      flood: 64,
      soak: 2000,
    }
  : {
      seq: 2000,
      warmup: 3000,
      conc: 6400,
      approvals: 100,
      servers: 50,
      crowd: 6,
      catServers: 100,
      catTools: 500,
      flood: 300,
      soak: 100_000,
    };
const CONCURRENCY = 32;
const echoServer = path.join(root, "bench", "echo-server.mjs");
const buildDir = process.env.NEXT_DIST_DIR ?? ".next";
if (!existsSync(path.join(root, buildDir, "BUILD_ID"))) {
  console.error(`No production build in ${buildDir}: run npm run build first.`);
  process.exit(1);
}

interface Row {
  name: string;
  /** What other rows refer to it by, for their ratios. */
  id?: string;
  /** Whether each call sent a different argument value. */
  vary: boolean;
  /** The `id` of the row this one's calls/s is compared with as "direct" (the same tool server without Gatehouse). */
  direct?: string;
  seq: Stats;
  rps: number;
  /** CPU the serving process spent per call during the concurrent run (µs), when there is one. */
  serverCpuUs: number | null;
}
const rows: Row[] = [];
const notes: string[] = [];
const extra: Record<string, unknown> = {};

/**
 * p50/p99 of sequential calls, then calls/s with {@link CONCURRENCY} callers, from a caller
 * process of its own (bench/caller.ts); `serverPid` is the serving process (proxy or gateway;
 * its tool server is a separate process), whose CPU time per call during the concurrent run is
 * reported: on a 2-core machine shared with the caller and the tool server, calls/s alone hides
 * which side is the bottleneck.
 */
async function measure(
  name: string,
  target: Pick<CallerSpec, "kind" | "command" | "args" | "url" | "token" | "tool">,
  serverPid?: number,
  opts: { id?: string; vary?: boolean; direct?: string } = {},
): Promise<void> {
  const vary = opts.vary ?? false;
  const spec: CallerSpec = {
    ...target,
    vary,
    warmup: SIZE.warmup,
    seq: SIZE.seq,
    conc: SIZE.conc,
    concurrency: CONCURRENCY,
    serverPid,
  };
  const { seq, rps, serverCpuUs } = await runCaller(spec);
  rows.push({ name, id: opts.id, vary, direct: opts.direct, seq, rps, serverCpuUs });
  console.log(
    `  ${name}${vary ? " [varying]" : ""}: p50 ${seq.p50.toFixed(3)} ms, p99 ${seq.p99.toFixed(3)} ms, ${rps.toFixed(0)} calls/s${serverCpuUs === null ? "" : `, server CPU ${serverCpuUs.toFixed(0)} µs/call`}`,
  );
}

/**
 * The echo server over streamable HTTP, one process for the whole run: the direct rows call it
 * with the SDK Client, Gatehouse's HTTP rows through a `url` server.
 */
const shared: { httpEcho: Started | null } = { httpEcho: null };
async function httpEchoUrl(): Promise<string> {
  shared.httpEcho ??= await startProcess(process.execPath, [echoServer, "--http"], {
    ready: /listening (\d+)/,
  });
  return `http://127.0.0.1:${shared.httpEcho.port}/mcp`;
}

async function sdkClient(transport: StreamableHTTPClientTransport): Promise<Client> {
  const client = new Client({ name: "bench", version: "1.0.0" });
  await client.connect(transport);
  return client;
}

// 1. The floor: the SDK Client straight to the echo server.
if (want("floor")) {
  console.log("floor");
  await measure("direct stdio (SDK Client)", {
    kind: "stdio",
    command: process.execPath,
    args: [echoServer],
    tool: "echo",
  });
  const url = await httpEchoUrl();
  await measure("direct streamable HTTP (SDK Client)", { kind: "http", url, tool: "echo" });
  // The baseline of Gatehouse's HTTP rows: the same server, the same SDK Client, varying arguments.
  await measure("direct HTTP echo (SDK Client)", { kind: "http", url, tool: "echo" }, undefined, {
    id: "direct-http",
    vary: true,
  });
}

// 2. The minimal proxy floor.
if (want("minimal")) {
  console.log("minimal proxy floor");
  const proxy = await startProcess(process.execPath, [path.join(root, "bench", "proxy-floor.mjs")], {
    ready: /listening (\d+)/,
  });
  await measure(
    "minimal proxy (SDK server → Client)",
    { kind: "http", url: `http://127.0.0.1:${proxy.port}/mcp`, tool: "echo" },
    proxy.child.pid,
    { id: "floor" },
  );
  await proxy.stop();
}

// 3. Gatehouse, to the stdio echo server and to the HTTP one; then with two dashboards open.
if (want("gatehouse") || want("dashboards")) {
  console.log("gatehouse");
  let gh: Gatehouse | null = null;
  try {
    gh = await startGatehouse(
      {
        echo: { command: process.execPath, args: [echoServer], enabled: true },
        httpecho: { url: await httpEchoUrl(), allowPrivate: true, enabled: true },
      },
      ["echo_echo", "echo_write", "httpecho_echo"],
    );
    const g = gh;
    const rssAtStart = rssOf(g.pid);
    const hasMcp = existsSync(path.join(root, "app", "mcp", "route.ts"));
    if (!hasMcp) notes.push("Gatehouse /mcp: not measured (no app/mcp/route.ts in this build)");
    const rest = (tool: string) => ({
      kind: "rest" as const,
      url: `${g.base}/api/calls`,
      token: g.token,
      tool,
    });
    const mcp = (tool: string) => ({ kind: "http" as const, url: `${g.base}/mcp`, token: g.token, tool });
    if (want("gatehouse")) {
      await measure("Gatehouse REST POST /api/calls", rest("echo_echo"), g.pid);
      if (hasMcp) await measure("Gatehouse /mcp", mcp("echo_echo"), g.pid);
      await measure("Gatehouse REST POST /api/calls", rest("echo_echo"), g.pid, { vary: true });
      if (hasMcp) await measure("Gatehouse /mcp", mcp("echo_echo"), g.pid, { vary: true });
      const viaHttp = { vary: true, direct: "direct-http" };
      await measure("Gatehouse REST → HTTP echo", rest("httpecho_echo"), g.pid, viaHttp);
      if (hasMcp) await measure("Gatehouse /mcp → HTTP echo", mcp("httpecho_echo"), g.pid, viaHttp);

      // Reviewer approval → agent result, the tool itself being instant.
      const latencies: number[] = [];
      for (let i = 0; i < SIZE.approvals; i++) {
        const pending = await g.call("echo_write", { text: `w${i}` });
        const id = String(pending.body.id);
        const waiting = g.waitFor(id, 30);
        // Let the long-poll reach the server before the decision (it subscribes, then waits).
        await new Promise((r) => setTimeout(r, 20));
        const t = performance.now();
        const status = await g.approve(id);
        const done = await waiting;
        const ms = performance.now() - t;
        if (status !== 200 || done.status !== "succeeded")
          throw new Error(`approval run ${i}: ${status} ${done.status}`);
        latencies.push(ms);
      }
      extra.approvalToResult = percentiles(latencies);
      console.log(
        `  approve click → agent result: p50 ${percentiles(latencies).p50.toFixed(2)} ms, p99 ${percentiles(latencies).p99.toFixed(2)} ms`,
      );
    }

    if (want("dashboards")) {
      const dashboards = await openDashboards(g);
      try {
        dashboards.reset();
        await measure("Gatehouse REST, /tools + /approvals open", rest("echo_echo"), g.pid, { vary: true });
        const calls = SIZE.warmup + SIZE.seq + SIZE.conc;
        extra.dashboardRequests = { calls, requests: dashboards.requests() };
        console.log(
          `  the two pages made ${dashboards.requests()} API requests during those ${calls} calls (${((dashboards.requests() * 100) / calls).toFixed(1)} per 100 calls)`,
        );
      } finally {
        await dashboards.close();
      }
    }

    const rssAtEnd = rssOf(g.pid);
    extra.gatehouseRss = { atStart: rssAtStart, atEnd: rssAtEnd };
    notes.push(
      `Gatehouse RSS ${mib(rssAtStart)} MiB before its rows, ${mib(rssAtEnd)} MiB after (${((rssAtEnd / rssAtStart - 1) * 100).toFixed(0)} %)`,
    );
    // What the server itself said under load (warnings such as MaxListenersExceededWarning name a
    // leak on its path); one note per distinct message.
    const said = new Set(
      g
        .output()
        .split("\n")
        // Node's process warnings ("(node:123) MaxListenersExceededWarning: …") and Gatehouse's
        // own WARN and ERROR log lines.
        .filter((l) => /[A-Za-z]*(?:Warning|Error):|^\S+ (?:WARN|ERROR) \[/.test(l))
        .map((l) => l.replace(/^\(node:\d+\) /, "").slice(0, 300)),
    );
    for (const l of said) notes.push(`Gatehouse printed: ${l}`);
  } finally {
    await gh?.stop();
  }
}

// 4. The peer: supergateway exposing the same stdio server over streamable HTTP.
if (want("supergateway")) {
  console.log("supergateway");
  const port = await freePort();
  const sg = await startProcess(
    process.execPath,
    [
      path.join(root, "node_modules", "supergateway", "dist", "index.js"),
      "--stdio",
      `${process.execPath} ${echoServer}`,
      "--outputTransport",
      "streamableHttp",
      "--port",
      String(port),
      // Stateless mode starts a new stdio child for every request; stateful keeps one per session.
      "--stateful",
    ],
    { ready: /Listening on port|listening/i, port, timeoutMs: 30_000 },
  );
  const sgTarget = { kind: "http" as const, url: `http://127.0.0.1:${port}/mcp`, tool: "echo" };
  await measure("supergateway (stdio → streamable HTTP)", sgTarget, sg.child.pid, { id: "peer" });
  await measure("supergateway (stdio → streamable HTTP)", sgTarget, sg.child.pid, {
    id: "peer-vary",
    vary: true,
  });
  await sg.stop();
}

// 5. Dial of an HTTP server by Gatehouse's manager: time and requests, against the SDK Client.
if (want("dial")) {
  console.log("dial");
  const srv = await startProcess(process.execPath, [echoServer, "--http"], { ready: /listening (\d+)/ });
  const url = `http://127.0.0.1:${srv.port}/mcp`;
  const requests = async () =>
    ((await (await fetch(`http://127.0.0.1:${srv.port}/stats`)).json()) as { requests: number }).requests;
  let r0 = await requests();
  let t = performance.now();
  const direct = await sdkClient(new StreamableHTTPClientTransport(new URL(url)));
  await direct.listTools();
  const directMs = performance.now() - t;
  const directRequests = (await requests()) - r0 - 1;
  await direct.close();
  const quiet = { debug() {}, info() {}, warn() {}, error() {} };
  let ready: () => void = () => {};
  const readyP = new Promise<void>((resolve) => {
    ready = resolve;
  });
  const config: ServerConfig = {
    name: "dial",
    transport: "http",
    command: null,
    args: [],
    env: {},
    cwd: null,
    url,
    headers: {},
    allowPrivate: true,
    allowTools: null,
    maxTools: 12,
    timeoutMs: 15_000,
    minIntervalMs: 0,
    maxFrameBytes: 4 * 1024 * 1024,
    enabled: true,
  };
  const manager = new McpManager(
    {
      path: "",
      servers: [config],
      approvals: { expireAfterSeconds: 900, waitSeconds: 60, selfApproval: false },
      catalogue: { descriptionMaxChars: 1024, refreshSeconds: 0 },
      notifications: { publicUrl: null, webhooks: [], email: null },
      rules: [],
      toolSets: [],
      agentLimits: { callsPerMinute: 0, maxPendingCalls: 20, maxConcurrentCalls: 0 },
    },
    { log: quiet, onState: (s) => s.state === "ready" && ready(), onTools: () => {} },
  );
  r0 = await requests();
  t = performance.now();
  await manager.start();
  await readyP;
  const dialMs = performance.now() - t;
  const dialRequests = (await requests()) - r0 - 1;
  await manager.stop();
  await srv.stop();
  extra.dial = { directMs, directRequests, dialMs, dialRequests };
  console.log(
    `  SDK Client connect + tools/list: ${directMs.toFixed(1)} ms, ${directRequests} requests; Gatehouse dial to ready: ${dialMs.toFixed(1)} ms, ${dialRequests} requests`,
  );
}

// 6. Catalogue refresh: servers × tools through syncServerTools on a SQLite file.
if (want("catalogue")) {
  console.log("catalogue refresh");
  const dir = mkdtempSync(path.join(os.tmpdir(), "gatehouse-bench-cat-"));
  const db = openDb(path.join(dir, "cat.db"));
  const tools: Tool[] = Array.from({ length: SIZE.catTools }, (_, i) => ({
    name: `tool_${String(i).padStart(4, "0")}`,
    description: `Tool ${i} does a thing with its input.`,
    inputSchema: { type: "object", properties: { a: { type: "string" }, b: { type: "number" } } },
    annotations: { readOnlyHint: i % 2 === 0 },
  }));
  const server = (i: number): ServerConfig => ({
    name: `s${i}`,
    transport: "stdio",
    command: "x",
    args: [],
    env: {},
    cwd: null,
    url: null,
    headers: {},
    allowPrivate: false,
    allowTools: null,
    maxTools: 200,
    timeoutMs: 15_000,
    minIntervalMs: 0,
    maxFrameBytes: 4 * 1024 * 1024,
    enabled: true,
  });
  const pass = async () => {
    const t = performance.now();
    for (let i = 0; i < SIZE.catServers; i++)
      await syncServerTools(db, server(i), tools, { descriptionMaxChars: 1024 });
    return performance.now() - t;
  };
  const first = await pass();
  const again = await pass();
  await closeDb(db);
  rmSync(dir, { recursive: true, force: true });
  extra.catalogue = { servers: SIZE.catServers, tools: SIZE.catTools, firstMs: first, unchangedMs: again };
  console.log(
    `  ${SIZE.catServers} servers × ${SIZE.catTools} tools: first refresh ${first.toFixed(0)} ms, unchanged refresh ${again.toFixed(0)} ms`,
  );
}

// 7. RSS with many stdio servers (Gatehouse's own process; children are separate processes).
if (want("memory")) {
  console.log("memory");
  const servers: Record<string, unknown> = {};
  for (let i = 0; i < SIZE.servers; i++)
    servers[`e${i}`] = { command: process.execPath, args: [echoServer], enabled: true };
  const g = await startGatehouse(servers, []);
  const rss = rssOf(g.pid);
  await g.stop();
  extra.rssWithServers = { servers: SIZE.servers, rss };
  console.log(
    `  Gatehouse RSS with ${SIZE.servers} stdio servers ready: ${mib(rss)} MiB (children excluded)`,
  );

  const flood = await startProcess(
    process.execPath,
    ["--conditions=react-server", "--import", "tsx", path.join(root, "bench", "flood.ts")],
    { env: { FLOOD_MB: String(SIZE.flood) }, ready: /\{.*\}\n/, timeoutMs: 120_000 },
  );
  const result = JSON.parse(/\{.*\}/.exec(flood.output())?.[0] ?? "{}") as {
    growth: number;
    failedAfterMs: number;
    maxFrameBytes: number;
  };
  await flood.stop();
  extra.flood = { ...result, floodMb: SIZE.flood };
  console.log(
    `  ${SIZE.flood} MB stdio flood at maxFrameBytes ${mib(result.maxFrameBytes)} MiB: RSS growth ${mib(result.growth)} MiB (${(result.growth / result.maxFrameBytes).toFixed(2)} × maxFrameBytes), call failed after ${result.failedAfterMs.toFixed(0)} ms`,
  );
}

// 7b. RSS over many calls in one Gatehouse: flat, or something keeps a piece of every call.
if (want("soak")) {
  console.log("soak");
  const g = await startGatehouse(
    {
      echo: { command: process.execPath, args: [echoServer], enabled: true },
      httpecho: { url: await httpEchoUrl(), allowPrivate: true, enabled: true },
    },
    ["echo_echo", "httpecho_echo"],
  );
  try {
    // In turns, the paths with the most per-call machinery: REST to the HTTP echo (undici, the
    // SDK's client transport) and /mcp to the stdio echo (the SDK's server transport).
    const chunk = { warmup: 0, seq: 1, concurrency: CONCURRENCY, vary: true, serverPid: g.pid };
    const targets: CallerSpec[] = [
      { ...chunk, kind: "rest", url: `${g.base}/api/calls`, token: g.token, tool: "httpecho_echo", conc: 0 },
      { ...chunk, kind: "http", url: `${g.base}/mcp`, token: g.token, tool: "echo_echo", conc: 0 },
    ];
    // A first round settles the heap (JIT, caches, pools) before the baseline.
    const per = SIZE.soak / 10;
    for (const t of targets) await runCaller({ ...t, conc: per });
    const start = rssOf(g.pid);
    const samples: number[] = [];
    for (let i = 0; i < 10; i++) {
      await runCaller({ ...(targets[i % 2] as CallerSpec), conc: per });
      samples.push(rssOf(g.pid));
    }
    const end = samples.at(-1) ?? start;
    const peak = Math.max(...samples);
    extra.soak = { calls: SIZE.soak, rssStart: start, rssEnd: end, rssPeak: peak, samples };
    const pct = (v: number) => `${v >= start ? "+" : ""}${((v / start - 1) * 100).toFixed(1)} %`;
    const said = `RSS over ${SIZE.soak} calls after a first ${per * 2}: ${mib(start)} → ${mib(end)} MiB (${pct(end)}), peak ${mib(peak)} MiB (${pct(peak)}); every ${per}: ${samples.map(mib).join(", ")}`;
    console.log(`  ${said}`);
    notes.push(`Gatehouse ${said}`);
  } finally {
    await g.stop();
  }
}

// 8. The tools page with many rows: first-load JS (gzip) and time until the table shows.
if (want("tools")) {
  console.log("tools page");
  const servers: Record<string, unknown> = {};
  for (let i = 0; i < SIZE.crowd; i++) {
    servers[`crowd${i}`] = {
      command: process.execPath,
      args: [path.join(root, "test", "fixtures", "servers", "many-tools.mjs")],
      env: { TOOL_COUNT: "200" },
      maxTools: 200,
      enabled: true,
    };
  }
  const g = await startGatehouse(servers, []);
  const browser = await launchBrowser();
  try {
    const context = await signedIn(browser, g.base, g.cookie);
    const page = await context.newPage();
    // Sizes are read when the first visit is over: every script's body is awaited then.
    const scripts: Promise<number>[] = [];
    page.on("response", (res) => {
      if (res.request().resourceType() === "script") scripts.push(res.body().then((b) => gzipSync(b).length));
    });
    const t = performance.now();
    // Timed to the row's visibility, not to the load event: the table is in the server's HTML.
    await page.goto(`${g.base}/tools`, { waitUntil: "commit" });
    await page.getByRole("row").filter({ hasText: "crowd0_tool_000" }).first().waitFor();
    const visibleMs = performance.now() - t;
    await page.waitForLoadState("networkidle");
    // When the scripts had run (the table answers clicks from then on), from navigation start.
    const loadedMs = await page.evaluate(
      () => (performance.getEntriesByType("navigation")[0] as PerformanceNavigationTiming).loadEventEnd,
    );
    const rowsShown = await page.getByRole("row").count();
    const firstVisitScripts = scripts.splice(0);
    const jsGzip = (await Promise.all(firstVisitScripts)).reduce((a, b) => a + b, 0);
    // The first visit after start also loads the route's server code; a second one is what a
    // returning owner sees.
    const t2 = performance.now();
    await page.goto(`${g.base}/tools`, { waitUntil: "commit" });
    await page.getByRole("row").filter({ hasText: "crowd0_tool_000" }).first().waitFor();
    const warmMs = performance.now() - t2;
    extra.toolsPage = {
      rows: SIZE.crowd * 200,
      firstLoadJsGzip: jsGzip,
      visibleMs,
      loadedMs,
      warmMs,
      rowsInDom: rowsShown,
    };
    console.log(
      `  /tools with ${SIZE.crowd * 200} rows: first-load JS ${(jsGzip / 1024).toFixed(0)} KB gzip, table visible after ${visibleMs.toFixed(0)} ms on the first visit (scripts run by ${loadedMs.toFixed(0)} ms), ${warmMs.toFixed(0)} ms on the next (${rowsShown} rows in the DOM)`,
    );
  } finally {
    await browser.close();
    await g.stop();
  }
}

// 9. PostgreSQL: one replica and two on one database against SQLite, and approvals across replicas
// (bench/replicas.ts); its table is printed after the main one.
let replicaLines: string[] = [];
let observabilityLines: string[] = [];
let toolSetLines: string[] = [];
if (want("replicas")) {
  console.log("replicas");
  const r = await benchReplicas({ ...SIZE, repeatBaseline: !smoke, pairs: smoke ? 1 : 3 }, CONCURRENCY);
  replicaLines = r.lines;
  extra.replicas = { rows: r.rows, approvals: r.approvals };
  notes.push(...r.notes);
}

if (want("observability")) {
  console.log("observability");
  const pairs = Number(process.env.GATEHOUSE_BENCH_PAIRS) || (smoke ? 1 : 5);
  const o = await benchObservability({ ...SIZE, pairs }, CONCURRENCY, echoServer);
  observabilityLines = o.lines;
  extra.observability = { rows: o.rows };
}

if (want("tool-sets")) {
  console.log("tool-sets");
  const pairs = Number(process.env.GATEHOUSE_BENCH_PAIRS) || (smoke ? 1 : 5);
  const t = await benchToolSets({ ...SIZE, pairs }, CONCURRENCY, echoServer);
  toolSetLines = t.lines;
  extra.toolSets = { rows: t.rows };
}

if (want("independent")) {
  extra.independent = await benchIndependent(
    smoke
      ? { warmup: 20, seq: 50, conc: 200, concurrency: CONCURRENCY }
      : { warmup: 2000, seq: 1500, conc: 4000, concurrency: CONCURRENCY },
  );
}

// The table. "rps/peer" compares with supergateway in this run, sending the same kind of
// arguments (fixed or varying); "rps/direct" compares a row through Gatehouse to an HTTP tool
// server with the SDK Client calling that server itself.
const byId = (id: string) => rows.find((r) => r.id === id);
const floor = byId("floor");
const pad = (s: string, n: number) => s.padEnd(n);
const ratio = (r: Row, base: Row | undefined) => (base ? (r.rps / base.rps).toFixed(2) : "-");
const lines = [
  `${pad("path", 42)} ${pad("args", 8)} ${pad("p50 ms", 9)} ${pad("p99 ms", 9)} ${pad("calls/s@32", 11)} ${pad("server µs/call", 15)} ${pad("+p50 vs floor", 14)} ${pad("rps/floor", 10)} ${pad("rps/peer", 9)} rps/direct`,
];
for (const r of rows) {
  const peer = (r.vary ? byId("peer-vary") : undefined) ?? byId("peer");
  const dp50 = floor ? `${(r.seq.p50 - floor.seq.p50).toFixed(3)} ms` : "-";
  lines.push(
    `${pad(r.name, 42)} ${pad(r.vary ? "varying" : "fixed", 8)} ${pad(r.seq.p50.toFixed(3), 9)} ${pad(r.seq.p99.toFixed(3), 9)} ${pad(r.rps.toFixed(0), 11)} ${pad(r.serverCpuUs === null ? "-" : r.serverCpuUs.toFixed(0), 15)} ${pad(dp50, 14)} ${pad(ratio(r, floor), 10)} ${pad(ratio(r, peer), 9)} ${r.direct ? ratio(r, byId(r.direct)) : "-"}`,
  );
}
console.log(smoke ? "\nSMOKE RUN (small sizes; figures are not comparable)" : "");
if (rows.length > 0) {
  console.log(lines.join("\n"));
  console.log(
    'args: "fixed" sends {text: "hi"} on every call, "varying" {text: "hi <n>"} with n counting up.',
  );
}
if (replicaLines.length > 0) console.log(`\n${replicaLines.join("\n")}`);
if (observabilityLines.length > 0) console.log(`\n${observabilityLines.join("\n")}`);
if (toolSetLines.length > 0) console.log(`\n${toolSetLines.join("\n")}`);
for (const n of notes) console.log(`note: ${n}`);
console.log(`benchmark took ${((performance.now() - startedAt) / 1000).toFixed(0)} s`);
await shared.httpEcho?.stop();
const resultsDir = path.join(root, "bench", "results");
mkdirSync(resultsDir, { recursive: true });
writeFileSync(
  path.join(resultsDir, only ? "partial.json" : smoke ? "smoke.json" : "latest.json"),
  JSON.stringify({ at: new Date().toISOString(), smoke, size: SIZE, rows, extra, notes }, null, 2),
);
process.exit(0);
