/**
 * The cost of metrics and traces: two Gatehouses started the same way (`npm start`, production,
 * the stdio echo server), one with both off (`GATEHOUSE_METRICS=off`, no OTLP endpoint), one with
 * both on (traces exported to a local OTLP/HTTP receiver in this process, `/metrics` scraped
 * every 5 s as Prometheus would), each with an owner's /tools and a reviewer's /approvals open.
 * Both run throughout, and each pair of rows is measured on both at once, half the callers on
 * each, REST and `/mcp`: measured one after the other, rows of the same server strayed by a third
 * on this 2-core machine as the load beside them changed, far more than the 5 % in question. The
 * server CPU per call of "on" is compared with "off" within each pair. The goal: at most 5 % more.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import { request } from "undici";
import type { CallerSpec } from "./caller";
import { openDashboards } from "./dashboards";
import { type Gatehouse, startGatehouse } from "./gatehouse";
import { runCaller } from "./support";

export interface ObservabilityRow {
  name: string;
  pair: number;
  setup: "off" | "on";
  path: "rest" | "mcp";
  p50: number;
  rps: number;
  serverCpuUs: number;
}

/** How often the "on" Gatehouse's `/metrics` is read while it is measured (ms). */
const SCRAPE_EVERY_MS = 5_000;

/**
 * What "on" turns on: `both` (the default), or, to find which one costs,
 * `GATEHOUSE_BENCH_OBSERVE=metrics` (traces off) or `=traces` (metrics off); and which paths are
 * measured: `GATEHOUSE_BENCH_PATHS=rest,mcp` (the default) or either alone. How many pairs:
 * `GATEHOUSE_BENCH_PAIRS` (default 5; 1 in a smoke run).
 */
const observe = process.env.GATEHOUSE_BENCH_OBSERVE ?? "both";
const paths = (process.env.GATEHOUSE_BENCH_PATHS ?? "rest,mcp").split(",") as ("rest" | "mcp")[];

export async function benchObservability(
  size: { warmup: number; seq: number; conc: number; pairs: number },
  concurrency: number,
  echoServer: string,
): Promise<{ rows: ObservabilityRow[]; lines: string[] }> {
  let exports = 0;
  const sink = http.createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      exports++;
      res.writeHead(200, { "content-type": "application/json" }).end("{}");
    });
  });
  await new Promise<void>((resolve) => sink.listen(0, "127.0.0.1", resolve));
  const sinkUrl = `http://127.0.0.1:${(sink.address() as AddressInfo).port}`;
  const servers = { echo: { command: process.execPath, args: [echoServer], enabled: true } };
  const started: Gatehouse[] = [];
  const rows: ObservabilityRow[] = [];
  const lines: string[] = [];
  try {
    const off = await startGatehouse(servers, ["echo_echo"], { env: { GATEHOUSE_METRICS: "off" } });
    started.push(off);
    const on = await startGatehouse(servers, ["echo_echo"], {
      env: {
        ...(observe === "metrics" ? {} : { OTEL_EXPORTER_OTLP_ENDPOINT: sinkUrl }),
        ...(observe === "traces" ? { GATEHOUSE_METRICS: "off" } : {}),
      },
    });
    started.push(on);
    const scrapes: number[] = [];
    const scrape = async () => {
      const res = await request(`${on.base}/metrics`, { headers: { cookie: on.cookie } });
      scrapes.push(res.statusCode);
      await res.body.text();
    };
    await scrape();
    if (scrapes[0] !== (observe === "traces" ? 404 : 200))
      throw new Error(`/metrics of the "on" Gatehouse answered ${scrapes[0]}`);
    const offMetrics = await request(`${off.base}/metrics`, { headers: { cookie: off.cookie } });
    await offMetrics.body.text();
    if (offMetrics.statusCode !== 404)
      throw new Error(`/metrics of the "off" Gatehouse answered ${offMetrics.statusCode}`);
    const dashboards = [await openDashboards(off), await openDashboards(on)];
    try {
      const timer = setInterval(() => void scrape().catch(() => scrapes.push(0)), SCRAPE_EVERY_MS);
      try {
        for (let pair = 1; pair <= size.pairs; pair++) {
          for (const path of paths) {
            // Both at once, half the callers each: whatever else the machine does then (the
            // browsers, GC, the other cores' load) weighs on both alike.
            const spec = (g: Gatehouse): CallerSpec => ({
              kind: path === "rest" ? "rest" : "http",
              url: `${g.base}${path === "rest" ? "/api/calls" : "/mcp"}`,
              token: g.token,
              tool: "echo_echo",
              vary: true,
              warmup: size.warmup,
              seq: size.seq,
              conc: size.conc,
              concurrency: Math.max(1, Math.floor(concurrency / 2)),
              serverPid: g.pid,
            });
            const measured = await Promise.all([runCaller(spec(off)), runCaller(spec(on))]);
            for (const [setup, r] of [
              ["off", measured[0]],
              ["on", measured[1]],
            ] as const) {
              const name = `${path === "rest" ? "REST" : "/mcp"}, metrics + traces ${setup}, pair ${pair}`;
              rows.push({
                name,
                pair,
                setup,
                path,
                p50: r.seq.p50,
                rps: r.rps,
                serverCpuUs: r.serverCpuUs ?? Number.NaN,
              });
              console.log(
                `  ${name}: p50 ${r.seq.p50.toFixed(3)} ms, ${r.rps.toFixed(0)} calls/s, Gatehouse CPU ${(r.serverCpuUs ?? Number.NaN).toFixed(0)} µs/call`,
              );
            }
          }
        }
      } finally {
        clearInterval(timer);
      }
    } finally {
      for (const d of dashboards) await d.close();
    }
    lines.push(
      `Metrics and traces: the same Gatehouse with both off and with ${observe === "both" ? "both" : `${observe} only`} on, pages open on each`,
    );
    for (const path of paths) {
      const ratios: number[] = [];
      for (let pair = 1; pair <= size.pairs; pair++) {
        const of = (setup: "off" | "on") =>
          rows.find((r) => r.pair === pair && r.path === path && r.setup === setup);
        const a = of("off");
        const b = of("on");
        if (a && b) ratios.push(b.serverCpuUs / a.serverCpuUs);
      }
      const sorted = [...ratios].sort((x, y) => x - y);
      const median = sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
      lines.push(
        `goal: ${path === "rest" ? "REST" : "/mcp"} with metrics and traces on costs at most 5 % more Gatehouse CPU per call than with both off: median ${median.toFixed(2)} × (pairs ${ratios.map((r) => r.toFixed(2)).join(", ")}): ${median <= 1.05 ? "met" : "missed"}`,
      );
    }
    lines.push(
      `the "on" Gatehouse exported ${exports} OTLP requests to the receiver; /metrics was read ${scrapes.length} times (statuses ${[...new Set(scrapes)].join(", ")})`,
    );
  } finally {
    for (const g of started.reverse()) await g.stop();
    await new Promise<void>((resolve) => sink.close(() => resolve()));
  }
  for (const l of lines) console.log(`  ${l}`);
  return { rows, lines };
}
