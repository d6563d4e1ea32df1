/**
 * The cost of metrics and traces: two Gatehouses started the same way (`npm start`, production,
 * the stdio echo server), one with both off (`GATEHOUSE_METRICS=off`, no OTLP endpoint), one with
 * both on (traces exported to a local OTLP/HTTP receiver in this process, `/metrics` scraped
 * every 5 s as Prometheus would), each with an owner's /tools and a reviewer's /approvals open.
 * Both run throughout, measured side by side in pairs (bench/pairs.ts). The goal: at most 5 %
 * more server CPU per call with both on.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import { request } from "undici";
import { openDashboards } from "./dashboards";
import { type Gatehouse, startGatehouse } from "./gatehouse";
import { measurePairs, type PairRow, pairGoals } from "./pairs";

export type ObservabilityRow = PairRow;

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
        const label = (setup: "off" | "on") => `metrics + traces ${setup}`;
        rows.push(...(await measurePairs({ off, on, paths, size, concurrency, label })));
      } finally {
        clearInterval(timer);
      }
    } finally {
      for (const d of dashboards) await d.close();
    }
    lines.push(
      `Metrics and traces: the same Gatehouse with both off and with ${observe === "both" ? "both" : `${observe} only`} on, pages open on each`,
    );
    lines.push(
      ...pairGoals(
        rows,
        paths,
        "with metrics and traces on costs at most 5 % more Gatehouse CPU per call than with both off",
      ),
    );
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
