/**
 * The independent-shape rows (`npm run bench -- --only=independent`): Gatehouse measured the way
 * an outside harness on this machine measured it, so that its figures and ours can be put side by
 * side in one run. Everything here is done as a user would, not as the friendly rows do:
 *
 * - the tool server is a TypeScript file run through `node --import tsx` (bench/echo-five.ts, SDK
 *   v1, five tools), over stdio, and over streamable HTTP in the SDK's default stateful mode,
 *   which answers every request as an event stream;
 * - Gatehouse is started with `npm run --silent start`, `NODE_ENV=production`,
 *   `GATEHOUSE_PUBLIC_ORIGIN` set, its default log level; the people and the token are made with
 *   the CLI; the owner signs in once in Chromium, enables the tools, and the browser closes;
 * - REST calls go through undici's `request` on one keep-alive `Agent({connections: 256})`, each
 *   with its own `AbortController` and 30 s timer; `/mcp` and the direct rows use the SDK v1
 *   client; every call sends a new argument (`bench-<n>`);
 * - 2,000 warm-up calls, 1,500 sequential ones for p50/p99, then 4,000 from 32 callers at once;
 *   server CPU is utime+stime of the process listening on the port, over the concurrent phase.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { Agent, request } from "undici";
import { launchBrowser } from "./browser";
import { openDashboards } from "./dashboards";
import { cpuMsOf, freePort, percentiles, root, type Started, type Stats, startProcess } from "./support";

const ECHO = path.join(root, "bench", "echo-five.ts");
/**
 * `GATEHOUSE_BENCH_INDIE=<a,b>` changes one thing at a time, to find which difference between
 * this setup and the friendly rows moves the figures: `json-echo` (the HTTP echo answers JSON),
 * `plain-echo` (the stdio echo is bench/echo-server.mjs, plain JavaScript), `no-abort` (REST
 * calls without their AbortController and timer), `quiet-log` (`GATEHOUSE_LOG_LEVEL=warn`),
 * `no-browser` (the owner enables the tools through the API, no Chromium), `no-origin` (no
 * `GATEHOUSE_PUBLIC_ORIGIN`).
 */
const changed = new Set((process.env.GATEHOUSE_BENCH_INDIE ?? "").split(",").filter(Boolean));
const TSX = new URL(import.meta.resolve("tsx")).pathname;
const OWNER = { name: "indie-owner", password: "indie-owner-password" };
const REVIEWER = { name: "indie-reviewer", password: "indie-reviewer-password" };

export interface IndependentSize {
  warmup: number;
  seq: number;
  conc: number;
  concurrency: number;
}

export interface IndependentRow {
  name: string;
  seq: Stats;
  rps: number;
  /** CPU µs per call of the process listening on the row's port, over the concurrent phase. */
  cpuUs: number;
}

/** The pid of the process with a listening TCP socket on `port`, from /proc (the harness's way). */
export function listeningPid(port: number): number {
  const inodes = new Set<string>();
  for (const file of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    let text = "";
    try {
      text = readFileSync(file, "utf8");
    } catch {
      continue;
    }
    for (const line of text.split("\n").slice(1)) {
      const f = line.trim().split(/\s+/);
      // local_address is hex ip:port; state 0A is LISTEN; the inode is the tenth field.
      if (f[3] === "0A" && Number.parseInt(f[1]?.split(":")[1] ?? "", 16) === port && f[9]) inodes.add(f[9]);
    }
  }
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    let fds: string[];
    try {
      fds = readdirSync(`/proc/${entry}/fd`);
    } catch {
      continue;
    }
    for (const fd of fds) {
      try {
        const link = readlinkSync(`/proc/${entry}/fd/${fd}`);
        const inode = /^socket:\[(\d+)\]$/.exec(link)?.[1];
        if (inode && inodes.has(inode)) return Number(entry);
      } catch {
        // Closed meanwhile.
      }
    }
  }
  throw new Error(`no process listens on port ${port}`);
}

type Call = (n: number) => Promise<void>;

/** Warm-up, sequential latencies, then calls/s and server CPU with `concurrency` callers. */
async function measure(
  name: string,
  call: Call,
  pid: number,
  size: IndependentSize,
): Promise<IndependentRow> {
  let n = 0;
  for (let i = 0; i < size.warmup; i++) await call(n++);
  const samples: number[] = [];
  for (let i = 0; i < size.seq; i++) {
    const t = performance.now();
    await call(n++);
    samples.push(performance.now() - t);
  }
  let left = size.conc;
  const cpu0 = cpuMsOf(pid);
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: size.concurrency }, async () => {
      while (left > 0) {
        left--;
        await call(n++);
      }
    }),
  );
  const seconds = (performance.now() - t0) / 1000;
  const row = {
    name,
    seq: percentiles(samples),
    rps: size.conc / seconds,
    cpuUs: ((cpuMsOf(pid) - cpu0) * 1000) / size.conc,
  };
  console.log(
    `  ${name}: p50 ${row.seq.p50.toFixed(3)} ms, p99 ${row.seq.p99.toFixed(3)} ms, ${row.rps.toFixed(0)} calls/s, server CPU ${row.cpuUs.toFixed(0)} µs/call`,
  );
  return row;
}

/** REST calls as the harness made them: one keep-alive pool, an AbortController and a 30 s timer each. */
function restCaller(base: string, token: string, tool: string): { call: Call; close(): Promise<void> } {
  const agent = new Agent({ connections: 256 });
  if (changed.has("no-abort")) {
    return {
      call: async (n) => {
        const res = await request(`${base}/api/calls`, {
          method: "POST",
          dispatcher: agent,
          headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
          body: JSON.stringify({ tool, arguments: { text: `bench-${n}` } }),
        });
        const body = await res.body.text();
        if (res.statusCode !== 200) throw new Error(`REST ${tool}: ${res.statusCode} ${body.slice(0, 200)}`);
      },
      close: () => agent.close(),
    };
  }
  const call: Call = async (n) => {
    const abort = new AbortController();
    const timer = setTimeout(() => abort.abort(), 30_000);
    try {
      const res = await request(`${base}/api/calls`, {
        method: "POST",
        dispatcher: agent,
        signal: abort.signal,
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
        body: JSON.stringify({ tool, arguments: { text: `bench-${n}` } }),
      });
      const body = await res.body.text();
      if (res.statusCode !== 200) throw new Error(`REST ${tool}: ${res.statusCode} ${body.slice(0, 200)}`);
    } finally {
      clearTimeout(timer);
    }
  };
  return { call, close: () => agent.close() };
}

/** The SDK v1 client on `url`, with a bearer when given. */
async function sdkCaller(
  url: string,
  tool: string,
  token?: string,
): Promise<{ call: Call; close(): Promise<void> }> {
  const client = new Client({ name: "independent-bench", version: "1.0.0" });
  const headers: Record<string, string> = token ? { Authorization: `Bearer ${token}` } : {};
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } }));
  const call: Call = async (n) => {
    const out = await client.callTool({ name: tool, arguments: { text: `bench-${n}` } });
    if (out.isError) throw new Error(`${tool} via ${url}: ${JSON.stringify(out.content).slice(0, 200)}`);
  };
  return { call, close: () => client.close() };
}

/** `npm run --silent gatehouse -- …` on the config and store of `env`; its stdout. */
function cli(args: string[], env: Record<string, string>, input?: string): string {
  const out = spawnSync("npm", ["run", "--silent", "gatehouse", "--", ...args], {
    cwd: root,
    env: { ...process.env, ...env },
    input,
    encoding: "utf8",
  });
  if (out.status !== 0) throw new Error(`gatehouse ${args.join(" ")}: ${out.stderr || out.stdout}`);
  return out.stdout;
}

async function session(base: string, who: { name: string; password: string }): Promise<string> {
  const res = await request(`${base}/api/session`, {
    method: "POST",
    headers: { origin: base, "content-type": "application/json" },
    body: JSON.stringify(who),
  });
  await res.body.text();
  return String([res.headers["set-cookie"]].flat()[0]).split(";")[0] ?? "";
}

/** The owner signs in in Chromium and enables `tools` once every server is ready; the browser closes. */
async function ownerEnables(base: string, tools: string[]): Promise<void> {
  const browser = await launchBrowser();
  try {
    const page = await browser.newPage();
    await page.goto(`${base}/login`);
    await page.getByLabel("Name").fill(OWNER.name);
    await page.getByLabel("Password").fill(OWNER.password);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.waitForURL((u) => u.pathname !== "/login", { timeout: 60_000 });
    const deadline = Date.now() + 120_000;
    for (;;) {
      const res = await page.request.get(`${base}/api/servers`);
      const { servers } = (await res.json()) as { servers: { state: string }[] };
      if (servers.every((s) => s.state === "ready")) break;
      if (Date.now() > deadline) throw new Error(`servers not ready: ${servers.map((s) => s.state)}`);
      await page.waitForTimeout(200);
    }
    const { tools: catalogue } = (await (await page.request.get(`${base}/api/catalogue`)).json()) as {
      tools: { localName: string; definitionHash: string }[];
    };
    const picked = catalogue.filter((t) => tools.includes(t.localName));
    const res = await page.request.post(`${base}/api/catalogue/bulk`, {
      headers: { origin: base },
      data: {
        status: "enabled",
        names: picked.map((t) => t.localName),
        expectedHashes: Object.fromEntries(picked.map((t) => [t.localName, t.definitionHash])),
      },
    });
    if (res.status() !== 200) throw new Error(`enabling ${tools}: ${res.status()} ${await res.text()}`);
    await page.goto(`${base}/tools`);
    await page
      .getByRole("row")
      .filter({ hasText: tools[0] ?? "" })
      .first()
      .waitFor({ timeout: 60_000 });
  } finally {
    await browser.close();
  }
}

/** As {@link ownerEnables}, through the API alone: no page is ever rendered. */
async function ownerEnablesByApi(base: string, tools: string[]): Promise<void> {
  const cookie = await session(base, OWNER);
  const headers = { cookie, origin: base, "content-type": "application/json" };
  const deadline = Date.now() + 120_000;
  for (;;) {
    const res = await request(`${base}/api/servers`, { headers });
    const { servers } = (await res.body.json()) as { servers: { state: string }[] };
    if (servers.every((s) => s.state === "ready")) break;
    if (Date.now() > deadline) throw new Error(`servers not ready: ${servers.map((s) => s.state)}`);
    await new Promise((r) => setTimeout(r, 200));
  }
  const listed = await request(`${base}/api/catalogue`, { headers });
  const { tools: catalogue } = (await listed.body.json()) as {
    tools: { localName: string; definitionHash: string }[];
  };
  const picked = catalogue.filter((t) => tools.includes(t.localName));
  const res = await request(`${base}/api/catalogue/bulk`, {
    method: "POST",
    headers,
    body: JSON.stringify({
      status: "enabled",
      names: picked.map((t) => t.localName),
      expectedHashes: Object.fromEntries(picked.map((t) => [t.localName, t.definitionHash])),
    }),
  });
  const text = await res.body.text();
  if (res.statusCode !== 200) throw new Error(`enabling ${tools}: ${res.statusCode} ${text}`);
}

/** Runs the independent-shape rows and prints them with their ratios. */
export async function benchIndependent(size: IndependentSize): Promise<IndependentRow[]> {
  console.log(
    `independent (an outside harness's setup: tsx echo, event-stream HTTP, CLI, browser)${changed.size > 0 ? `, changed: ${[...changed].join(", ")}` : ""}`,
  );
  const rows: IndependentRow[] = [];
  const started: Started[] = [];
  const dir = mkdtempSync(path.join(os.tmpdir(), "gatehouse-indie-"));
  try {
    const httpEcho = await startProcess(
      process.execPath,
      ["--import", TSX, ECHO, "--http", ...(changed.has("json-echo") ? ["--json"] : [])],
      { ready: /listening (\d+)/ },
    );
    started.push(httpEcho);
    const echoUrl = `http://127.0.0.1:${httpEcho.port}/mcp`;
    const config = path.join(dir, "gatehouse.json");
    writeFileSync(
      config,
      JSON.stringify({
        mcpServers: {
          echo: {
            command: process.execPath,
            args: changed.has("plain-echo")
              ? [path.join(root, "bench", "echo-server.mjs")]
              : ["--import", TSX, ECHO],
            enabled: true,
          },
          httpecho: { url: echoUrl, allowPrivate: true, enabled: true },
        },
      }),
    );
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    const env = {
      NODE_ENV: "production",
      GATEHOUSE_CONFIG: config,
      GATEHOUSE_DB: path.join(dir, "gatehouse.db"),
      PORT: String(port),
      ...(changed.has("no-origin") ? {} : { GATEHOUSE_PUBLIC_ORIGIN: base }),
      ...(changed.has("quiet-log") ? { GATEHOUSE_LOG_LEVEL: "warn" } : {}),
    };
    const gh = await startProcess("npm", ["run", "--silent", "start"], {
      env,
      ready: /listening on/i,
      port,
      timeoutMs: 180_000,
    });
    started.push(gh);
    cli(["user", "add", OWNER.name, "--role", "owner"], env, `${OWNER.password}\n`);
    cli(["user", "add", REVIEWER.name, "--role", "reviewer"], env, `${REVIEWER.password}\n`);
    const token = cli(["token", "create", "indie-bot"], env).trim().split("\n").at(-1) ?? "";
    if (changed.has("no-browser")) await ownerEnablesByApi(base, ["echo_echo", "httpecho_echo"]);
    else await ownerEnables(base, ["echo_echo", "httpecho_echo"]);
    const pid = listeningPid(port);

    const row = async (
      name: string,
      make: () => Promise<{ call: Call; close(): Promise<void> }>,
      at: number,
    ) => {
      const caller = await make();
      try {
        rows.push(await measure(name, caller.call, at, size));
      } finally {
        await caller.close();
      }
    };
    await row("REST → stdio echo", async () => restCaller(base, token, "echo_echo"), pid);
    await row("/mcp → stdio echo", () => sdkCaller(`${base}/mcp`, "echo_echo", token), pid);
    await row("REST → HTTP echo (event stream)", async () => restCaller(base, token, "httpecho_echo"), pid);
    await row("/mcp → HTTP echo (event stream)", () => sdkCaller(`${base}/mcp`, "httpecho_echo", token), pid);
    await row("SDK client → HTTP echo directly", () => sdkCaller(echoUrl, "echo"), httpEcho.child.pid ?? 0);
    const dashboards = await openDashboards({
      base,
      pid,
      cookie: await session(base, OWNER),
      reviewerCookie: await session(base, REVIEWER),
    });
    try {
      await row(
        "REST → stdio echo, /tools + /approvals open",
        async () => restCaller(base, token, "echo_echo"),
        pid,
      );
    } finally {
      await dashboards.close();
    }
    await gh.stop();
    started.splice(started.indexOf(gh), 1);

    const sgPort = await freePort();
    const sg = await startProcess(
      process.execPath,
      [
        path.join(root, "node_modules", "supergateway", "dist", "index.js"),
        "--stdio",
        `${process.execPath} --import ${TSX} ${ECHO}`,
        "--outputTransport",
        "streamableHttp",
        "--port",
        String(sgPort),
        "--stateful",
      ],
      { ready: /Listening on port|listening/i, port: sgPort, timeoutMs: 60_000 },
    );
    started.push(sg);
    await row(
      "supergateway → stdio echo",
      () => sdkCaller(`http://127.0.0.1:${sgPort}/mcp`, "echo"),
      listeningPid(sgPort),
    );
  } finally {
    for (const s of started.reverse()) await s.stop();
    rmSync(dir, { recursive: true, force: true });
  }
  printRatios(rows);
  return rows;
}

function printRatios(rows: IndependentRow[]): void {
  const by = (name: string) => rows.find((r) => r.name === name);
  const sg = by("supergateway → stdio echo");
  const direct = by("SDK client → HTTP echo directly");
  const rest = by("REST → stdio echo");
  const say = (what: string, a: IndependentRow | undefined, b: IndependentRow | undefined, cpu: boolean) => {
    if (!a || !b) return;
    const cpuText = cpu ? `, server CPU ${(a.cpuUs / b.cpuUs).toFixed(2)} ×` : "";
    console.log(
      `  ${what}: calls/s ${(a.rps / b.rps).toFixed(2)} ×${cpuText}, p50 ${(a.seq.p50 / b.seq.p50).toFixed(2)} ×`,
    );
  };
  say("REST / supergateway", rest, sg, true);
  say("/mcp / supergateway", by("/mcp → stdio echo"), sg, true);
  say("REST → HTTP echo / direct", by("REST → HTTP echo (event stream)"), direct, false);
  say("/mcp → HTTP echo / direct", by("/mcp → HTTP echo (event stream)"), direct, false);
  say("REST with dashboards / REST", by("REST → stdio echo, /tools + /approvals open"), rest, true);
}
