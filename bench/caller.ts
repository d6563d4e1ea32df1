/**
 * One benchmark row's caller, run as its own process by bench/run.ts so that no row inherits
 * another's heap, JIT state or leftover listeners (the SDK client leaves an abort listener per
 * request until a GC). Takes a {@link CallerSpec} as JSON in argv[2]; prints one JSON line, a
 * {@link CallerResult}.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { Agent, request } from "undici";
import { concurrent, cpuMsOf, type Stats, sequential, treeCpuMs } from "./support";

export interface CallerSpec {
  /** `stdio`: SDK Client spawning `command`; `http`: SDK Client to `url`; `rest`: POST /api/calls at `url`. */
  kind: "stdio" | "http" | "rest";
  command?: string;
  args?: string[];
  url?: string;
  /**
   * `rest` only: several Gatehouse replicas' `/api/calls`, called in turn (call n goes to
   * `urls[n % length]`, sequential and concurrent alike), instead of `url`.
   */
  urls?: string[];
  /** Bearer token (Gatehouse rows). */
  token?: string;
  tool: string;
  /**
   * When true, every call sends a different argument value (`{text: "hi <n>"}`, n counting up),
   * as agents do; otherwise every call sends `{text: "hi"}`. Default false.
   */
  vary?: boolean;
  warmup: number;
  seq: number;
  conc: number;
  concurrency: number;
  /** The serving process, whose CPU per call during the concurrent run is reported. */
  serverPid?: number;
  /**
   * More processes whose CPU per call during the concurrent run is reported, in order, as
   * `cpuUs`: the process alone, or with `tree` its whole process tree, children that ended
   * included (PostgreSQL: the postmaster and its backends).
   */
  cpu?: { pid: number; tree?: boolean }[];
}

/** What one caller measured: sequential latencies, calls/s, and CPU µs per call of the named processes. */
export interface CallerResult {
  seq: Stats;
  rps: number;
  serverCpuUs: number | null;
  /** One per {@link CallerSpec.cpu} entry; empty without it. */
  cpuUs: number[];
}

const spec = JSON.parse(process.argv[2] ?? "{}") as CallerSpec;
let n = 0;
const nextArguments = spec.vary ? () => ({ text: `hi ${n++}` }) : () => ({ text: "hi" });
let call: () => Promise<unknown>;
let close: () => Promise<void>;

if (spec.kind === "rest") {
  const agent = new Agent({ connections: 64, keepAliveTimeout: 60_000 });
  const headers = { authorization: `Bearer ${spec.token}`, "content-type": "application/json" };
  const fixed = JSON.stringify({ tool: spec.tool, arguments: nextArguments() });
  const urls = spec.urls ?? [spec.url ?? ""];
  let turn = 0;
  call = async () => {
    const body = spec.vary ? JSON.stringify({ tool: spec.tool, arguments: nextArguments() }) : fixed;
    const url = urls[turn++ % urls.length] ?? "";
    const res = await request(url, { method: "POST", headers, body, dispatcher: agent });
    const text = await res.body.text();
    if (res.statusCode !== 200) throw new Error(`REST call answered ${res.statusCode}: ${text}`);
  };
  close = () => agent.close();
} else {
  const transport =
    spec.kind === "stdio"
      ? new StdioClientTransport({ command: spec.command ?? "", args: spec.args ?? [] })
      : new StreamableHTTPClientTransport(new URL(spec.url ?? ""), {
          requestInit: spec.token ? { headers: { Authorization: `Bearer ${spec.token}` } } : undefined,
        });
  const client = new Client({ name: "bench", version: "1.0.0" });
  await client.connect(transport);
  call = async () => {
    const result = await client.callTool({ name: spec.tool, arguments: nextArguments() });
    if (result.isError) throw new Error(`the call failed: ${JSON.stringify(result)}`);
  };
  close = () => client.close();
}

const seq = await sequential(call, spec.seq, spec.warmup);
const cpuNow = () => (spec.cpu ?? []).map((c) => (c.tree ? treeCpuMs(c.pid) : cpuMsOf(c.pid)));
const cpu0 = spec.serverPid ? cpuMsOf(spec.serverPid) : 0;
const others0 = cpuNow();
const rps = await concurrent(call, spec.conc, spec.concurrency);
const serverCpuUs = spec.serverPid ? ((cpuMsOf(spec.serverPid) - cpu0) * 1000) / spec.conc : null;
const cpuUs = cpuNow().map((ms, i) => ((ms - (others0[i] ?? 0)) * 1000) / spec.conc);
await close();
const result: CallerResult = { seq, rps, serverCpuUs, cpuUs };
process.stdout.write(`${JSON.stringify(result)}\n`);
process.exit(0);
