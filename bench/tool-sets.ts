/**
 * The cost of tool sets and limits on the call path: two Gatehouses started the same way (`npm
 * start`, production, the stdio echo server, an owner's /tools and a reviewer's /approvals open
 * on each), one whose agent token has no set (every enabled tool, the default limits), one whose
 * token is in a set with `callsPerMinute`, `maxPendingCalls` and `maxConcurrentCalls` high enough
 * never to bite, measured side by side in pairs (bench/pairs.ts). The goal: at most 5 % more
 * server CPU per call.
 */
import { openDashboards } from "./dashboards";
import { type Gatehouse, startGatehouse } from "./gatehouse";
import { measurePairs, type PairRow, pairGoals } from "./pairs";

export async function benchToolSets(
  size: { warmup: number; seq: number; conc: number; pairs: number },
  concurrency: number,
  echoServer: string,
): Promise<{ rows: PairRow[]; lines: string[] }> {
  const servers = { echo: { command: process.execPath, args: [echoServer], enabled: true } };
  const started: Gatehouse[] = [];
  const paths = ["rest", "mcp"] as const;
  try {
    const off = await startGatehouse(servers, ["echo_echo"]);
    started.push(off);
    const on = await startGatehouse(servers, ["echo_echo"], {
      config: {
        toolSets: {
          bench: {
            tools: ["echo_*", "files_read_*"],
            limits: { callsPerMinute: 100_000, maxPendingCalls: 1000, maxConcurrentCalls: 1000 },
          },
        },
      },
      toolSet: "bench",
    });
    started.push(on);
    const dashboards = [await openDashboards(off), await openDashboards(on)];
    let rows: PairRow[];
    try {
      const label = (setup: "off" | "on") =>
        setup === "on" ? "token in a tool set with limits" : "token without a set";
      rows = await measurePairs({ off, on, paths, size, concurrency, label });
    } finally {
      for (const d of dashboards) await d.close();
    }
    const lines = [
      "Tool sets and limits: the same Gatehouse, its token without a set and in a set with limits that never bite",
      ...pairGoals(
        rows,
        paths,
        "with a tool set and limits costs at most 5 % more Gatehouse CPU per call than without",
      ),
    ];
    for (const l of lines) console.log(`  ${l}`);
    return { rows, lines };
  } finally {
    for (const g of started.reverse()) await g.stop();
  }
}
