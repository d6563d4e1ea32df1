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
  /**
   * How many times each PostgreSQL row is measured, one replica and two in turn (A B, B A, …),
   * both setups running throughout: the ratio that must hold is taken within each pair, measured
   * minutes apart at most, so the machine's drift between rows does not decide it.
   */
  pairs: number;
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
  /** PostgreSQL rows: which pair (one replica, two replicas) of {@link ReplicasSize.pairs} it belongs to. */
  pair?: number;
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
    row: Pick<ReplicaRow, "name" | "store" | "server" | "again" | "pair">,
    sites: Gatehouse[],
    dashboards: Dashboards,
    postgresPid?: number,
    warmup = size.warmup,
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
      warmup,
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

  /** A PostgreSQL cluster of its own with `count` replicas on it, dashboards open. */
  interface Setup {
    count: 1 | 2;
    label: string;
    /** A (holding the stdio echo), then B. */
    sites: Gatehouse[];
    pg: { pid: number; stop(): Promise<void> };
    dashboards: Dashboards;
  }
  const setups: Setup[] = [];
  /** Replicas started so far, for their output should a row fail, and to stop them. */
  const started: { label: string; g: Gatehouse }[] = [];
  const pgs: { stop(): Promise<void> }[] = [];
  const dashboardSets: Dashboards[] = [];
  const startSetup = async (count: 1 | 2): Promise<Setup> => {
    const pg = await startPostgres();
    pgs.push(pg);
    const env = { DATABASE_URL: pg.url, GATEHOUSE_SECRET_KEY: randomBytes(32).toString("hex") };
    const label = count === 1 ? "PostgreSQL, 1 replica" : "PostgreSQL, 2 replicas";
    const first = await startGatehouse(servers, enable, { env });
    started.push({ label, g: first });
    const mine = [first];
    if (count === 2) {
      const second = await first.addReplica();
      started.push({ label, g: second });
      mine.push(second);
    }
    // A is the replica holding the stdio echo (the first started, unless it lost it).
    const holder = await holderOfEcho(mine);
    const a = mine[holder] as Gatehouse;
    const sites = count === 1 ? [a] : [a, mine[1 - holder] as Gatehouse];
    const dashboards = await openDashboards(a, sites[1] ?? a);
    dashboardSets.push(dashboards);
    return { count, label, sites, pg, dashboards };
  };

  try {
    await sqlite(false);
    try {
      setups.push(await startSetup(1), await startSetup(2));
      for (const server of ["stdio", "http"] as const) {
        for (let pair = 0; pair < size.pairs; pair++) {
          // A B, then B A: neither setup always goes first.
          const order = pair % 2 === 0 ? setups : [...setups].reverse();
          for (const setup of order) {
            await measure(
              {
                name: `${setup.label} → ${server === "stdio" ? "stdio" : "HTTP"}${size.pairs > 1 ? `, pair ${pair + 1}` : ""}`,
                store: "postgres",
                server,
                pair,
              },
              setup.sites,
              setup.dashboards,
              setup.pg.pid,
              // Warm once per setup and server; later pairs only settle.
              pair === 0 ? size.warmup : Math.ceil(size.warmup / 10),
            );
          }
        }
      }
      // The approvals are timed with the one-replica setup gone, as its pages and processes
      // would otherwise share the cores with what is timed.
      const one = setups[0];
      if (one) {
        await one.dashboards.close();
        dashboardSets.splice(dashboardSets.indexOf(one.dashboards), 1);
        for (const g of one.sites) {
          await g.stop();
          started.splice(
            started.findIndex((s) => s.g === g),
            1,
          );
        }
        await one.pg.stop();
        pgs.splice(pgs.indexOf(one.pg), 1);
      }
      const two = setups[1];
      const [a, b] = two?.sites ?? [];
      if (a && b) {
        await approvalRun("approve on A (runs it) → agent waiting on B", a, b, true);
        await approvalRun("approve on B (forwards the run to A) → agent waiting on A", b, a, true);
      }
      // What every replica printed (a stopped one's output is kept).
      for (const setup of setups)
        for (const [i, g] of setup.sites.entries()) said(`${setup.label}, replica ${"AB"[i]}`, g);
    } catch (err) {
      // What the replicas said is what explains a failed row.
      for (const { label, g } of started)
        console.error(`--- ${label}, a replica's output, the end of it:\n${g.output().slice(-4000)}`);
      throw err;
    } finally {
      for (const d of dashboardSets) await d.close();
      // Second replicas first: a first replica's stop removes the config they share.
      for (const { g } of started.reverse()) await g.stop();
      for (const pg of pgs) await pg.stop();
    }
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
    `PostgreSQL rows: both setups (one replica on a cluster of its own, two on another) run throughout, dashboards open on each; each row is measured ${Math.max(...rows.map((r) => (r.pair ?? 0) + 1))} times, one replica and two in turn (pair n: A B for even n, B A for odd).`,
    "2 replicas: the callers' requests alternate between replicas A and B. The stdio echo runs on A; B forwards its half of the calls to A (/internal/forward). Both dial the HTTP echo themselves.",
    "Gatehouse µs/call is each replica's server process (tool servers excluded), A+B=sum; PostgreSQL's is the postmaster and its backends; total is their sum.",
    `API requests the two pages made during each row's calls: ${rows.map((r) => r.pageRequests).join(", ")}.`,
  );
  const median = (v: number[]) => {
    const sorted = [...v].sort((p, q) => p - q);
    const mid = Math.floor(sorted.length / 2);
    return sorted.length % 2 ? (sorted[mid] ?? 0) : ((sorted[mid - 1] ?? 0) + (sorted[mid] ?? 0)) / 2;
  };
  const ghOf = (r: ReplicaRow) => r.gatehouseUs.reduce((a, b) => a + b, 0);
  for (const server of ["stdio", "http"] as const) {
    const pairs: { one: ReplicaRow; two: ReplicaRow }[] = [];
    for (const one of rows.filter((r) => r.store === "postgres" && r.replicas === 1 && r.server === server)) {
      const two = rows.find(
        (r) => r.store === "postgres" && r.replicas === 2 && r.server === server && r.pair === one.pair,
      );
      if (two) pairs.push({ one, two });
    }
    if (pairs.length === 0) continue;
    const ratios = (of: (r: ReplicaRow) => number) => pairs.map((p) => of(p.two) / of(p.one));
    const said = (of: (r: ReplicaRow) => number) => {
      const each = ratios(of);
      const m = median(each);
      const verdict = m <= 1 ? "holds" : `grows by ${((m - 1) * 100).toFixed(0)} %`;
      return `median ${x(m)} (${verdict}; pairs ${each.map((v) => v.toFixed(2)).join(", ")})`;
    };
    lines.push(
      `must hold, CPU per call not growing with the second replica (→ ${server}), two replicas against one within each pair: Gatehouse ${said(ghOf)}; Gatehouse and PostgreSQL ${said(total)}; calls/s ${median(pairs.map((p) => p.one.rps)).toFixed(0)} → ${median(pairs.map((p) => p.two.rps)).toFixed(0)} (medians; 2 cores shared with the callers, the tool server, PostgreSQL and Chromium: not expected to double)`,
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
