/**
 * Two Gatehouses measured side by side: each pair of rows runs on both at once, half the callers
 * on each, REST and `/mcp`, and the server CPU per call of "on" is compared with "off" within each
 * pair. Measured one after the other, rows of the same server strayed by a third on this 2-core
 * machine as the load beside them changed, far more than the few per cent in question; measured
 * together, whatever else the machine does weighs on both alike.
 */
import type { CallerSpec } from "./caller";
import type { Gatehouse } from "./gatehouse";
import { runCaller } from "./support";

export interface PairRow {
  name: string;
  pair: number;
  setup: "off" | "on";
  path: "rest" | "mcp";
  p50: number;
  rps: number;
  serverCpuUs: number;
}

const pathName = (path: "rest" | "mcp") => (path === "rest" ? "REST" : "/mcp");

/** Runs `size.pairs` pairs on `off` and `on` (`label` names the setups in the rows' names). */
export async function measurePairs(opts: {
  off: Gatehouse;
  on: Gatehouse;
  paths: readonly ("rest" | "mcp")[];
  size: { warmup: number; seq: number; conc: number; pairs: number };
  concurrency: number;
  label: (setup: "off" | "on") => string;
}): Promise<PairRow[]> {
  const { size, paths } = opts;
  const rows: PairRow[] = [];
  for (let pair = 1; pair <= size.pairs; pair++) {
    for (const path of paths) {
      const spec = (g: Gatehouse): CallerSpec => ({
        kind: path === "rest" ? "rest" : "http",
        url: `${g.base}${path === "rest" ? "/api/calls" : "/mcp"}`,
        token: g.token,
        tool: "echo_echo",
        vary: true,
        warmup: size.warmup,
        seq: size.seq,
        conc: size.conc,
        concurrency: Math.max(1, Math.floor(opts.concurrency / 2)),
        serverPid: g.pid,
      });
      const measured = await Promise.all([runCaller(spec(opts.off)), runCaller(spec(opts.on))]);
      for (const [setup, r] of [
        ["off", measured[0]],
        ["on", measured[1]],
      ] as const) {
        const name = `${pathName(path)}, ${opts.label(setup)}, pair ${pair}`;
        const serverCpuUs = r.serverCpuUs ?? Number.NaN;
        rows.push({ name, pair, setup, path, p50: r.seq.p50, rps: r.rps, serverCpuUs });
        console.log(
          `  ${name}: p50 ${r.seq.p50.toFixed(3)} ms, ${r.rps.toFixed(0)} calls/s, Gatehouse CPU ${serverCpuUs.toFixed(0)} µs/call`,
        );
      }
    }
  }
  return rows;
}

/** One line per path: the median of the pairs' on/off CPU ratios against `goal` ("… costs at most 5 % more …"). */
export function pairGoals(
  rows: readonly PairRow[],
  paths: readonly ("rest" | "mcp")[],
  goal: string,
): string[] {
  return paths.map((path) => {
    const ratios: number[] = [];
    for (const pair of new Set(rows.map((r) => r.pair))) {
      const of = (setup: "off" | "on") =>
        rows.find((r) => r.pair === pair && r.path === path && r.setup === setup);
      const a = of("off");
      const b = of("on");
      if (a && b) ratios.push(b.serverCpuUs / a.serverCpuUs);
    }
    const sorted = [...ratios].sort((x, y) => x - y);
    const median = sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
    return `goal: ${pathName(path)} ${goal}: median ${median.toFixed(2)} × (pairs ${ratios.map((r) => r.toFixed(2)).join(", ")}): ${median <= 1.05 ? "met" : "missed"}`;
  });
}
