/**
 * The `replicas` section of `npm run bench`: Gatehouse on PostgreSQL, one replica and two on one
 * database, against one Gatehouse on SQLite measured in the same run, every one started by
 * `npm start` with `NODE_ENV=production` and watched by an owner's /tools and a reviewer's
 * /approvals in Chromium throughout.
 *
 * Rows (REST `POST /api/calls`, varying arguments, audit on, a read-only tool): to the stdio echo
 * server and to the echo server over streamable HTTP answering with event streams (as the SDK's
 * server transport does by default), on SQLite, on one PostgreSQL replica, and on two replicas
 * with the calls alternating between them (the stdio echo runs on one replica, the other forwards
 * its calls there; the HTTP echo is dialled by both). Each row reports the CPU per call of every
 * replica's server process (as the other rows do: its tool servers excluded) and of PostgreSQL
 * (the postmaster and all its backends). Then a destructive call held for review, approved on one
 * replica while the agent long-polls on the other: the time from sending the approval to the
 * agent's answer.
 */
import { randomBytes } from "node:crypto";
import path from "node:path";
// @ts-expect-error: a plain ES module script without types.
import { startPostgres as startPostgresUntyped } from "../scripts/postgres.mjs";
import { type Dashboards, openDashboards } from "./dashboards";
import { type Gatehouse, startGatehouse } from "./gatehouse";
import { percentiles, root, runCaller, type Stats, startProcess } from "./support";

const startPostgres = startPostgresUntyped as () => Promise<{
  url: string;
  pid: number;
  stop(): Promise<void>;
}>;

const echoServer = path.join(root, "bench", "echo-server.mjs");

/** The goal for a decision on one replica reaching an agent waiting on another, p99. */
const APPROVAL_GOAL_MS = 100;

export interface ReplicasSize {
  warmup: number;
  seq: number;
  conc: number;
  /** Approvals measured per direction. */
  approvals: number;
  /** Whether to measure the SQLite baseline a second time at the end, to show the machine's drift. */
  repeatBaseline: boolean;
}

interface ReplicaRow {
  name: string;
  store: "sqlite" | "postgres";
  replicas: number;
  server: "stdio" | "http";
  seq: Stats;
  rps: number;
  /** CPU µs per call of each replica's server process, over all the row's calls. */
  gatehouseUs: number[];
  /** CPU µs per call of PostgreSQL (postmaster and backends); null on SQLite. */
  postgresUs: number | null;
  /** API requests the two pages made during the row's calls. */
  pageRequests: number;
  /** Whether it is the closing measurement of the baseline (not a baseline for ratios). */
  again?: boolean;
}

interface ApprovalRun {
  name: string;
  latency: Stats;
  /** Whether it is held to {@link APPROVAL_GOAL_MS}. */
  goal: boolean;
}

/** What the section measured: the printed lines, and the figures for bench/results. */
export interface ReplicasResult {
  lines: string[];
  rows: ReplicaRow[];
  approvals: ApprovalRun[];
  notes: string[];
}

/** Runs the section; `concurrency` is the number of concurrent callers of every row. */
export async function benchReplicas(size: ReplicasSize, concurrency: number): Promise<ReplicasResult> {
  const rows: ReplicaRow[] = [];
  const approvals: ApprovalRun[] = [];
  const notes: string[] = [];
  const httpEcho = await startProcess(process.execPath, [echoServer, "--http", "--event-stream"], {
    ready: /listening (\d+)/,
  });
  const servers = {
    echo: { command: process.execPath, args: [echoServer], enabled: true },
    httpecho: { url: `http://127.0.0.1:${httpEcho.port}/mcp`, allowPrivate: true, enabled: true },
  };
  const enable = ["echo_echo", "echo_write", "httpecho_echo"];

  /** One row: REST calls to `tool`, alternating over `sites`, with the dashboards open. */
  const measure = async (
    row: Pick<ReplicaRow, "name" | "store" | "server" | "again">,
    sites: Gatehouse[],
    dashboards: Dashboards,
    postgresPid?: number,
  ): Promise<void> => {
    const [first] = sites;
    if (!first) throw new Error("no Gatehouse to measure");
    dashboards.reset();
    const result = await runCaller({
      kind: "rest",
      urls: sites.map((s) => `${s.base}/api/calls`),
      token: first.token,
      tool: row.server === "stdio" ? "echo_echo" : "httpecho_echo",
      vary: true,
      warmup: size.warmup,
      seq: size.seq,
      conc: size.conc,
      concurrency,
      cpu: [
        ...sites.map((s) => ({ pid: s.pid })),
        ...(postgresPid === undefined ? [] : [{ pid: postgresPid, tree: true }]),
      ],
    });
    const gatehouseUs = result.cpuUs.slice(0, sites.length);
    const postgresUs = postgresPid === undefined ? null : (result.cpuUs[sites.length] ?? null);
    const r: ReplicaRow = {
      ...row,
      replicas: sites.length,
      seq: result.seq,
      rps: result.rps,
      gatehouseUs,
      postgresUs,
      pageRequests: dashboards.requests(),
    };
    rows.push(r);
    console.log(
      `  ${r.name}: p50 ${r.seq.p50.toFixed(3)} ms, p99 ${r.seq.p99.toFixed(3)} ms, ${r.rps.toFixed(0)} calls/s, Gatehouse CPU ${gatehouseUs.map((u) => u.toFixed(0)).join(" + ")} µs/call${postgresUs === null ? "" : `, PostgreSQL CPU ${postgresUs.toFixed(0)} µs/call`}`,
    );
  };

  /** `size.approvals` destructive calls, each approved at `decider` while the agent waits at `waiter`. */
  const approvalRun = async (name: string, decider: Gatehouse, waiter: Gatehouse, goal: boolean) => {
    const latencies: number[] = [];
    for (let i = 0; i < size.approvals; i++) {
      const pending = await waiter.call("echo_write", { text: `w${i}` });
      if (pending.body.status !== "pending")
        throw new Error(`${name}: the call was not held (${pending.status} ${JSON.stringify(pending.body)})`);
      const id = String(pending.body.id);
      const waiting = waiter.waitFor(id, 30);
      // Let the long-poll reach the server before the decision (it subscribes, then waits).
      await new Promise((r) => setTimeout(r, 20));
      const t = performance.now();
      const status = await decider.approve(id);
      const done = await waiting;
      const ms = performance.now() - t;
      if (status !== 200 || done.status !== "succeeded")
        throw new Error(
          `${name}, run ${i}: approval answered ${status}, the agent saw ${String(done.status)}`,
        );
      latencies.push(ms);
    }
    const latency = percentiles(latencies);
    approvals.push({ name, latency, goal });
    console.log(`  ${name}: p50 ${latency.p50.toFixed(2)} ms, p99 ${latency.p99.toFixed(2)} ms`);
  };

  /** Node warnings and WARN/ERROR log lines a Gatehouse printed, one note per distinct line. */
  const said = (who: string, g: Gatehouse) => {
    const lines = g
      .output()
      .split("\n")
      .filter((l) => /[A-Za-z]*(?:Warning|Error):|^\S+ (?:WARN|ERROR) \[/.test(l))
      .map((l) => l.replace(/^\(node:\d+\) /, "").slice(0, 300));
    for (const l of new Set(lines)) notes.push(`${who} printed: ${l}`);
  };

  const sqlite = async (again: boolean) => {
    const g = await startGatehouse(servers, enable);
    let dashboards: Dashboards | null = null;
    try {
      dashboards = await openDashboards(g);
      const tag = again ? ", again" : "";
      await measure(
        { name: `SQLite, 1 process → stdio${tag}`, store: "sqlite", server: "stdio", again },
        [g],
        dashboards,
      );
      await measure(
        { name: `SQLite, 1 process → HTTP${tag}`, store: "sqlite", server: "http", again },
        [g],
        dashboards,
      );
      if (!again) await approvalRun("SQLite, 1 process: approve → agent result", g, g, false);
      said(`SQLite Gatehouse${tag}`, g);
    } finally {
      await dashboards?.close();
      await g.stop();
    }
  };

  /** A PostgreSQL cluster of its own with `count` replicas on it. */
  const postgres = async (count: 1 | 2) => {
    const pg = await startPostgres();
    const env = { DATABASE_URL: pg.url, GATEHOUSE_SECRET_KEY: randomBytes(32).toString("hex") };
    const started: Gatehouse[] = [];
    let dashboards: Dashboards | null = null;
    try {
      const first = await startGatehouse(servers, enable, { env });
      started.push(first);
      if (count === 2) started.push(await first.addReplica());
      // A is the replica holding the stdio echo (the first started, unless it lost it).
      const holder = await holderOfEcho(started);
      const a = started[holder] as Gatehouse;
      const sites = count === 1 ? [a] : [a, started[1 - holder] as Gatehouse];
      const b = sites[1];
      dashboards = await openDashboards(a, b ?? a);
      const label = count === 1 ? "PostgreSQL, 1 replica" : "PostgreSQL, 2 replicas";
      await measure(
        { name: `${label} → stdio`, store: "postgres", server: "stdio" },
        sites,
        dashboards,
        pg.pid,
      );
      await measure(
        { name: `${label} → HTTP`, store: "postgres", server: "http" },
        sites,
        dashboards,
        pg.pid,
      );
      if (b) {
        await approvalRun("approve on A (runs it) → agent waiting on B", a, b, true);
        await approvalRun("approve on B (forwards the run to A) → agent waiting on A", b, a, true);
      }
      for (const [i, g] of sites.entries()) said(`${label}, replica ${"AB"[i]}`, g);
    } catch (err) {
      // What the replicas said is what explains a failed row.
      for (const [i, g] of started.entries())
        console.error(`--- replica ${i + 1} of ${count}, the end of its output:\n${g.output().slice(-4000)}`);
      throw err;
    } finally {
      await dashboards?.close();
      // The second replica first: the first one's stop removes the config they share.
      for (const g of started.reverse()) await g.stop();
      await pg.stop();
    }
  };

  try {
    await sqlite(false);
    await postgres(1);
    await postgres(2);
    if (size.repeatBaseline) await sqlite(true);
  } finally {
    await httpEcho.stop();
  }
  return { lines: table(rows, approvals), rows, approvals, notes };
}

/** The index in `sites` of the replica holding the stdio echo server with it ready (polled, 120 s at most). */
async function holderOfEcho(sites: Gatehouse[]): Promise<number> {
  const deadline = Date.now() + 120_000;
  for (;;) {
    for (const [i, g] of sites.entries()) {
      const res = await fetch(`${g.base}/api/servers`, { headers: { cookie: g.cookie, origin: g.base } });
      const { servers } = (await res.json()) as {
        servers: { name: string; state: string; replica: { here: boolean } | null }[];
      };
      const echo = servers.find((s) => s.name === "echo");
      if (echo?.state === "ready" && echo.replica?.here) return i;
    }
    if (Date.now() > deadline) throw new Error("no replica says it holds the stdio echo server");
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** The section's table, its ratios and the figures held to a goal, as printed lines. */
function table(rows: ReplicaRow[], approvals: ApprovalRun[]): string[] {
  const pad = (s: string, n: number) => s.padEnd(n);
  const total = (r: ReplicaRow) => r.gatehouseUs.reduce((a, b) => a + b, 0) + (r.postgresUs ?? 0);
  const baseline = (r: ReplicaRow) =>
    rows.find((b) => b.store === "sqlite" && !b.again && b.server === r.server);
  const x = (v: number) => `${v.toFixed(2)} ×`;
  const lines = [
    "Replicas: REST POST /api/calls, varying arguments, /tools + /approvals open throughout; CPU µs per call over all the row's calls",
    `${pad("row", 40)} ${pad("p50 ms", 8)} ${pad("p99 ms", 8)} ${pad("calls/s@32", 11)} ${pad("Gatehouse µs/call", 18)} ${pad("PostgreSQL", 11)} ${pad("total µs", 9)} ${pad("calls/s vs SQLite", 18)} CPU/call vs SQLite`,
  ];
  for (const r of rows) {
    const base = baseline(r);
    const gh =
      r.gatehouseUs.length > 1
        ? `${r.gatehouseUs.map((u) => u.toFixed(0)).join("+")}=${r.gatehouseUs.reduce((a, b) => a + b, 0).toFixed(0)}`
        : (r.gatehouseUs[0] ?? 0).toFixed(0);
    lines.push(
      `${pad(r.name, 40)} ${pad(r.seq.p50.toFixed(3), 8)} ${pad(r.seq.p99.toFixed(3), 8)} ${pad(r.rps.toFixed(0), 11)} ${pad(gh, 18)} ${pad(r.postgresUs === null ? "-" : r.postgresUs.toFixed(0), 11)} ${pad(total(r).toFixed(0), 9)} ${pad(base ? x(r.rps / base.rps) : "-", 18)} ${base ? x(total(r) / total(base)) : "-"}`,
    );
  }
  lines.push(
    '"→ stdio" rows call the stdio echo server, "→ HTTP" rows the echo server over streamable HTTP answering with event streams; ratios are against the SQLite row of the same tool server measured first.',
    "2 replicas: the callers' requests alternate between replicas A and B. The stdio echo runs on A; B forwards its half of the calls to A (/internal/forward). Both dial the HTTP echo themselves.",
    "Gatehouse µs/call is each replica's server process (tool servers excluded), A+B=sum; PostgreSQL's is the postmaster and its backends; total is their sum.",
    `API requests the two pages made during each row's calls: ${rows.map((r) => r.pageRequests).join(", ")}.`,
  );
  for (const server of ["stdio", "http"] as const) {
    const one = rows.find((r) => r.store === "postgres" && r.replicas === 1 && r.server === server);
    const two = rows.find((r) => r.store === "postgres" && r.replicas === 2 && r.server === server);
    if (!one || !two) continue;
    const gh = (r: ReplicaRow) => r.gatehouseUs.reduce((a, b) => a + b, 0);
    const verdict = (ratio: number) =>
      ratio <= 1 ? "holds" : `grows by ${((ratio - 1) * 100).toFixed(0)} %`;
    lines.push(
      `must hold, CPU per call not growing with the second replica (→ ${server}): Gatehouse ${gh(one).toFixed(0)} → ${gh(two).toFixed(0)} µs (${x(gh(two) / gh(one))}, ${verdict(gh(two) / gh(one))}); with PostgreSQL ${total(one).toFixed(0)} → ${total(two).toFixed(0)} µs (${x(total(two) / total(one))}, ${verdict(total(two) / total(one))}); calls/s ${one.rps.toFixed(0)} → ${two.rps.toFixed(0)} (2 cores shared with the callers, the tool server, PostgreSQL and Chromium: not expected to double)`,
    );
  }
  for (const a of approvals) {
    const goal = a.goal
      ? ` (goal p99 ≤ ${APPROVAL_GOAL_MS} ms: ${a.latency.p99 <= APPROVAL_GOAL_MS ? "met" : "missed"})`
      : "";
    lines.push(
      `${a.name}: p50 ${a.latency.p50.toFixed(2)} ms, p99 ${a.latency.p99.toFixed(2)} ms over ${a.latency.n}${goal}`,
    );
  }
  return lines;
}
