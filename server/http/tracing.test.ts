/**
 * Traces over OTLP: a receiver started here (OTLP/HTTP, JSON, as the SDK's exporter sends it)
 * gets the spans of an agent's requests, continuing the trace the agent sent, with their
 * parent/child links; a request to an HTTP tool server carries the trace on. Real parts: the
 * demo server (stdio), an SDK v2 server over HTTP, the SDK v1 client, the production listener.
 */
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort, RestartableServer, stopHttpServers } from "@/test/support/http-servers";
import { type OtlpReceiver, type OtlpSpan, startOtlpReceiver } from "@/test/support/otlp";
import {
  ADD_NOTE,
  enableTool,
  productionListener,
  REPO_ROOT,
  request,
  type TestRuntime,
  waitForServersReady,
} from "@/test/support/runtime";
import { approve, people, runtimes } from "../calls/call-fixtures";
import { flushTracing, otlpEndpoint, startTracing, stopTracing } from "../tracing";

const { start } = runtimes();
const V2 = path.join(REPO_ROOT, "test", "fixtures", "servers", "v2-tools.mjs");

const SERVER = 2;
const CLIENT = 3;

let receiver: OtlpReceiver;
/** Every span the receiver got so far. */
let received: OtlpSpan[] = [];

beforeAll(async () => {
  receiver = await startOtlpReceiver();
  received = receiver.spans;
  expect(await startTracing({ OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint })).toBe(true);
});

afterAll(async () => {
  await stopTracing();
  await stopHttpServers();
  await receiver.close();
  expect(receiver.paths.every((p) => p === "/v1/traces")).toBe(true);
});

const attr = (s: OtlpSpan, key: string) => {
  const v = s.attributes.find((a) => a.key === key)?.value;
  return v?.stringValue ?? (v?.intValue === undefined ? undefined : String(v.intValue));
};

/** The one span named `name` in trace `traceId` (several: the test is wrong). */
function span(traceId: string, name: string): OtlpSpan {
  const found = received.filter((s) => s.traceId === traceId && s.name === name);
  expect(
    found.map((s) => s.name),
    `spans named ${name}`,
  ).toEqual([name]);
  return found[0] as OtlpSpan;
}

/** A W3C traceparent for a new trace, as an agent's own tracing would send. */
function agentTrace(): { traceId: string; spanId: string; header: string } {
  const traceId = randomBytes(16).toString("hex");
  const spanId = randomBytes(8).toString("hex");
  return { traceId, spanId, header: `00-${traceId}-${spanId}-01` };
}

/**
 * Once server `v2` is ready: `v2_echo` called through the production listener on `port`, as an
 * agent sends it with a `traceparent` of its own; resolves with that trace once its spans are sent.
 */
async function tracedEcho(rt: TestRuntime, port: number): Promise<ReturnType<typeof agentTrace>> {
  await waitForServersReady(rt.runtime, ["v2"]);
  const { agent } = await people(rt);
  await enableTool(rt.runtime, "v2_echo");
  const front = await productionListener(rt, port);
  const trace = agentTrace();
  try {
    const res = await fetch(`${front.origin}/api/calls`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${agent}`,
        "content-type": "application/json",
        traceparent: trace.header,
      },
      body: JSON.stringify({ tool: "v2_echo", arguments: { text: "hi" } }),
    });
    expect(res.status).toBe(200);
  } finally {
    await front.close();
  }
  await flushTracing();
  return trace;
}

describe("traces", () => {
  it("an /mcp call held for review and approved is one trace under the agent's: request, authentication, decision, the wait, the run and the upstream request", async () => {
    const port = await freePort();
    const rt = await start({ config: { agentEndpoint: { allowedHosts: [`127.0.0.1:${port}`] } } });
    const front = await productionListener(rt, port);
    try {
      const { agent, alice } = await people(rt);
      const trace = agentTrace();
      const client = new Client({ name: "traced-agent", version: "1.0.0" }, { capabilities: {} });
      await client.connect(
        new StreamableHTTPClientTransport(new URL(`${front.origin}/mcp`), {
          requestInit: { headers: { Authorization: `Bearer ${agent}`, traceparent: trace.header } },
        }),
      );
      const pending = new Promise<string>((resolve) => {
        const off = rt.runtime.bus.subscribe((e) => {
          if (e.type === "call" && e.status === "pending") {
            off();
            resolve(e.id);
          }
        });
      });
      const answer = client.callTool({ name: ADD_NOTE, arguments: { text: "traced" } });
      const id = await pending;
      expect((await approve(id, alice.cookie)).status).toBe(200);
      expect(JSON.stringify(await answer)).toContain("traced");
      await client.close();
      await flushTracing();

      const call = span(trace.traceId, `tools/call ${ADD_NOTE}`);
      expect(call.kind).toBe(SERVER);
      expect(attr(call, "mcp.method.name")).toBe("tools/call");
      expect(attr(call, "gen_ai.tool.name")).toBe(ADD_NOTE);
      // Its HTTP request continues the agent's span.
      const post = received.find((s) => s.spanId === call.parentSpanId);
      expect(post?.name).toBe("POST /mcp");
      expect(post?.parentSpanId).toBe(trace.spanId);
      expect(received.some((s) => s.name === "authenticate" && s.parentSpanId === post?.spanId)).toBe(true);
      const decide = span(trace.traceId, "decide");
      expect(decide.parentSpanId).toBe(call.spanId);
      expect(attr(decide, "gatehouse.decision")).toBe("wait");
      const wait = span(trace.traceId, "wait for review");
      expect(wait.parentSpanId).toBe(call.spanId);
      // Run by the reviewer's approval, yet traced under the agent's request.
      const run = span(trace.traceId, "run");
      expect(run.parentSpanId).toBe(call.spanId);
      expect(attr(run, "gatehouse.call.status")).toBe("succeeded");
      const upstream = span(trace.traceId, "tools/call add_note");
      expect(upstream.kind).toBe(CLIENT);
      expect(upstream.parentSpanId).toBe(run.spanId);
      expect(attr(upstream, "gen_ai.operation.name")).toBe("execute_tool");
      expect(attr(upstream, "network.transport")).toBe("pipe");
    } finally {
      await front.close();
    }
  });

  it("a traceparent in a tools/call's _meta (the MCP conventions' carrier) is continued too", async () => {
    const port = await freePort();
    const rt = await start({ config: { agentEndpoint: { allowedHosts: [`127.0.0.1:${port}`] } } });
    const front = await productionListener(rt, port);
    try {
      const { agent } = await people(rt);
      const trace = agentTrace();
      const client = new Client({ name: "meta-traced-agent", version: "1.0.0" }, { capabilities: {} });
      await client.connect(
        new StreamableHTTPClientTransport(new URL(`${front.origin}/mcp`), {
          requestInit: { headers: { Authorization: `Bearer ${agent}` } },
        }),
      );
      const result = await client.callTool({
        name: "demo_list_notes",
        arguments: {},
        _meta: { traceparent: trace.header },
      });
      expect(result.isError).toBeFalsy();
      await client.close();
      await flushTracing();
      const call = span(trace.traceId, "tools/call demo_list_notes");
      expect(call.parentSpanId).toBe(trace.spanId);
      expect(span(trace.traceId, "tools/call list_notes").kind).toBe(CLIENT);
    } finally {
      await front.close();
    }
  });

  it("a REST call with a traceparent continues it, and the HTTP tool server receives the trace", async () => {
    const log = path.join(tmpdir(), `gh-trace-${randomBytes(4).toString("hex")}.log`);
    const v2 = new RestartableServer(await freePort(), {
      args: [V2, "--era", "dual", "--transport", "http"],
      env: { REQUEST_LOG: log },
      ready: /listening \d+\n/,
    });
    await v2.start();
    const port = await freePort();
    const rt = await start({
      servers: { v2: { url: v2.url, allowPrivate: true, enabled: true } },
      config: { agentEndpoint: { allowedHosts: [`127.0.0.1:${port}`] } },
    });
    const trace = await tracedEcho(rt, port);
    expect(span(trace.traceId, "POST /api/calls").parentSpanId).toBe(trace.spanId);
    const upstream = span(trace.traceId, "tools/call echo");
    expect(attr(upstream, "network.transport")).toBe("tcp");
    const logged = readFileSync(log, "utf8").split("\n");
    const sent = (prefix: string) =>
      logged.filter((l) => l.startsWith(prefix)).map((l) => l.slice(prefix.length));
    // The tools/call request carried the upstream span as its parent, in the agent's trace: as
    // the HTTP header, and in `_meta` as MCP carries it.
    expect(sent("traceparent ")).toContain(`00-${trace.traceId}-${upstream.spanId}-01`);
    expect(sent("meta traceparent ")).toContain(`00-${trace.traceId}-${upstream.spanId}-01`);
  });

  it("a stdio tool server receives the call's trace in _meta.traceparent, and nothing else it is sent carries one", async () => {
    const log = path.join(tmpdir(), `gh-trace-${randomBytes(4).toString("hex")}.log`);
    const port = await freePort();
    const rt = await start({
      servers: {
        v2: {
          command: "node",
          args: [V2, "--era", "dual", "--transport", "stdio"],
          env: { REQUEST_LOG: log },
          enabled: true,
        },
      },
      config: { agentEndpoint: { allowedHosts: [`127.0.0.1:${port}`] } },
    });
    const trace = await tracedEcho(rt, port);
    const upstream = span(trace.traceId, "tools/call echo");
    expect(attr(upstream, "network.transport")).toBe("pipe");
    const logged = readFileSync(log, "utf8").split("\n");
    const carried = logged.filter((l) => l.startsWith("meta traceparent "));
    expect(carried).toEqual([`meta traceparent 00-${trace.traceId}-${upstream.spanId}-01`]);
    // The one carrying it is the tools/call: it follows that request's line.
    const at = logged.indexOf(carried[0] ?? "");
    expect(logged[at - 1]).toBe("request tools/call");
  });

  it("an OTLP endpoint that is not an http(s) URL stops the start with a clear message", () => {
    expect(() => otlpEndpoint({ OTEL_EXPORTER_OTLP_ENDPOINT: "collector:4318" })).toThrow(
      /http or https URL|not a URL/,
    );
    expect(() => otlpEndpoint({ OTEL_EXPORTER_OTLP_ENDPOINT: "grpc://collector:4317" })).toThrow(
      /must be an http or https URL/,
    );
    expect(otlpEndpoint({})).toBeNull();
    expect(otlpEndpoint({ OTEL_EXPORTER_OTLP_ENDPOINT: "https://collector.example:4318" })).toBe(
      "https://collector.example:4318",
    );
  });

  it("a long-poll whose traceparent is not a W3C one waits under the call's own trace", async () => {
    const rt = await start();
    const { agent } = await people(rt);
    await enableTool(rt.runtime, ADD_NOTE);
    const trace = agentTrace();
    // Through the route itself, as Next serves it: the headers are the client's own.
    const res = await request("POST", "/api/calls", {
      bearer: agent,
      headers: { traceparent: trace.header },
      body: { tool: ADD_NOTE, arguments: { text: "held" } },
    });
    expect(res.status).toBe(202);
    const { id } = (await res.json()) as { id: string };
    const waited = await request("GET", `/api/calls/${id}?wait=0`, {
      bearer: agent,
      headers: { traceparent: "not-a-traceparent" },
    });
    expect(waited.status).toBe(200);
    await flushTracing();
    expect(span(trace.traceId, "wait for review").parentSpanId).toBe(trace.spanId);
  });

  it("registers nothing as OpenTelemetry's global tracer: Next's own spans, parentless without a context manager, stay off", async () => {
    const api = await import("@opentelemetry/api");
    const span = api.trace.getTracer("next.js").startSpan("a page");
    expect(span.isRecording()).toBe(false);
    span.end();
  });
});
