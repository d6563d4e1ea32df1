/**
 * One measurement in its own process, so its RSS is not mixed with the rest of the benchmark:
 * a stdio server floods one line of FLOOD_MB megabytes without a newline at maxFrameBytes
 * 4 MiB. Prints one JSON line: {before, peak, growth, failedAfterMs}.
 */
import path from "node:path";
import { McpManager } from "../server/mcp/manager";
import { root } from "./support";

const MiB = 1024 * 1024;
const maxFrameBytes = 4 * MiB;
const floodMb = Number(process.env.FLOOD_MB ?? 300);
const quiet = { debug() {}, info() {}, warn() {}, error() {} };
let ready: () => void = () => {};
const readyP = new Promise<void>((r) => {
  ready = r;
});
const manager = new McpManager(
  {
    path: "",
    servers: [
      {
        name: "flood",
        transport: "stdio",
        command: process.execPath,
        args: [path.join(root, "test/fixtures/servers/flood.mjs")],
        env: { FLOOD_BYTES: String(floodMb * MiB) },
        cwd: root,
        url: null,
        headers: {},
        allowPrivate: false,
        allowTools: null,
        maxTools: 12,
        timeoutMs: 60_000,
        minIntervalMs: 0,
        maxFrameBytes,
        enabled: true,
      },
    ],
    approvals: { expireAfterSeconds: 900, waitSeconds: 60, selfApproval: false },
    catalogue: { descriptionMaxChars: 1024, refreshSeconds: 0 },
    notifications: { publicUrl: null, webhooks: [], email: null },
    rules: [],
    toolSets: [],
    agentLimits: { callsPerMinute: 0, maxPendingCalls: 20, maxConcurrentCalls: 0 },
  },
  { log: quiet, onState: (s) => s.state === "ready" && ready(), onTools: () => {} },
);
await manager.start();
await readyP;
const before = process.memoryUsage().rss;
let peak = before;
const sampler = setInterval(() => {
  peak = Math.max(peak, process.memoryUsage().rss);
}, 5);
const t = performance.now();
let failedAfterMs = -1;
try {
  await manager.callTool("flood", "flood", {});
} catch {
  failedAfterMs = performance.now() - t;
}
clearInterval(sampler);
peak = Math.max(peak, process.memoryUsage().rss);
await manager.stop();
process.stdout.write(
  `${JSON.stringify({ before, peak, growth: peak - before, failedAfterMs, maxFrameBytes, floodMb })}\n`,
);
process.exit(0);
