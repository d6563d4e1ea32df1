/**
 * The OTLP/JSON exporter: what it writes is what OpenTelemetry's own JSON serializer
 * (`@opentelemetry/otlp-transformer`, the encoding of `exporter-trace-otlp-http`) writes for the
 * same spans, and it reaches a real receiver with the operator's headers.
 */
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, trace } from "@opentelemetry/api";
import { ExportResultCode } from "@opentelemetry/core";
import { JsonTraceSerializer } from "@opentelemetry/otlp-transformer";
import { resourceFromAttributes } from "@opentelemetry/resources";
import type { ReadableSpan } from "@opentelemetry/sdk-trace";
import { InMemorySpanExporter, SimpleSpanProcessor, TracerProvider } from "@opentelemetry/sdk-trace";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type OtlpReceiver, startOtlpReceiver } from "@/test/support/otlp";
import { encodeSpans, OtlpJsonExporter, parseHeaders } from "./otlp-json";

/** Spans of every shape Gatehouse's tracing can make, and some it does not (events, links). */
async function someSpans(): Promise<ReadableSpan[]> {
  const memory = new InMemorySpanExporter();
  const provider = new TracerProvider({
    resource: resourceFromAttributes({ "service.name": "gatehouse-test" }),
    spanProcessors: [new SimpleSpanProcessor({ exporter: memory })],
  });
  const tracer = provider.getTracer("gatehouse", "1.2.3");
  const remote = trace.setSpanContext(ROOT_CONTEXT, {
    traceId: "0af7651916cd43dd8448eb211c80319c",
    spanId: "b7ad6b7169203331",
    traceFlags: 1,
    isRemote: true,
  });
  const root = tracer.startSpan("POST /api/calls", { kind: SpanKind.SERVER }, remote);
  root.setAttributes({
    "http.request.method": "POST",
    "http.response.status_code": 200,
    ratio: 0.25,
    ok: true,
    list: ["a", "b"],
    quoted: 'say "hi"\n\u2028',
  });
  const child = tracer.startSpan(
    "tools/call échec",
    { kind: SpanKind.CLIENT },
    trace.setSpan(ROOT_CONTEXT, root),
  );
  child.addEvent("retry", { attempt: 2 });
  child.addLink({ context: root.spanContext(), attributes: { why: "because" } });
  child.setStatus({ code: SpanStatusCode.ERROR, message: "upstream_failed" });
  child.end();
  root.end();
  tracer.startSpan("decide").end();
  await provider.forceFlush();
  const spans = memory.getFinishedSpans();
  expect(spans).toHaveLength(3);
  return spans;
}

/** Drops what only says "nothing": zero counts, empty lists; 64-bit integers as strings. */
function normalized(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(normalized);
  if (value && typeof value === "object") {
    const out: Record<string, unknown> = {};
    for (const [key, v] of Object.entries(value)) {
      if (v === undefined || v === null) continue;
      if (/^dropped.*Count$/.test(key) && v === 0) continue;
      if ((key === "events" || key === "links") && Array.isArray(v) && v.length === 0) continue;
      if (key === "intValue") out[key] = String(v);
      else out[key] = normalized(v);
    }
    return out;
  }
  return value;
}

describe("the OTLP/JSON encoding", () => {
  it("writes what OpenTelemetry's own JSON serializer writes for the same spans", async () => {
    const spans = await someSpans();
    const ours = JSON.parse(encodeSpans(spans)) as unknown;
    const theirs = JSON.parse(
      new TextDecoder().decode(JsonTraceSerializer.serializeRequest(spans) ?? new Uint8Array()),
    ) as unknown;
    expect(normalized(ours)).toEqual(normalized(theirs));
    // The remote parent is said to be remote (OTLP's span flags, bits 8 and 9).
    const root = (
      ours as { resourceSpans: { scopeSpans: { spans: { name: string; flags: number }[] }[] }[] }
    ).resourceSpans[0]?.scopeSpans[0]?.spans.find((s) => s.name === "POST /api/calls");
    expect(root?.flags).toBe(0x301);
  });

  it("writes a number JSON cannot hold as the string OTLP's JSON mapping gives it", async () => {
    const [span] = await someSpans();
    if (!span) throw new Error("no span");
    const odd: ReadableSpan = Object.assign(Object.create(Object.getPrototypeOf(span) as object), span, {
      attributes: { odd: Number.NaN, far: Number.POSITIVE_INFINITY },
    });
    expect(encodeSpans([odd])).toContain(
      '"attributes":[{"key":"odd","value":{"doubleValue":"NaN"}},{"key":"far","value":{"doubleValue":"Infinity"}}]',
    );
  });

  it("reads OTLP's header variables: pairs, percent-decoded, malformed ones skipped", () => {
    expect(parseHeaders("api-key=s%20e%3Dcret, X-Tenant = acme ,broken,=nokey,bad=%E0%A4%A")).toEqual({
      "api-key": "s e=cret",
      "x-tenant": "acme",
    });
    expect(parseHeaders(undefined)).toEqual({});
  });
});

describe("the OTLP/JSON exporter", () => {
  let receiver: OtlpReceiver;
  beforeAll(async () => {
    receiver = await startOtlpReceiver();
  });
  afterAll(async () => {
    await receiver.close();
  });

  const exported = (exporter: OtlpJsonExporter, spans: ReadableSpan[]) =>
    new Promise<{ code: ExportResultCode; error?: Error }>((resolve) => exporter.export(spans, resolve));

  it("posts to the endpoint's /v1/traces with the headers OTEL_EXPORTER_OTLP_HEADERS names", async () => {
    const exporter = new OtlpJsonExporter(`${receiver.endpoint}/`, {
      OTEL_EXPORTER_OTLP_HEADERS: "authorization=Bearer%20abc,x-common=1",
      OTEL_EXPORTER_OTLP_TRACES_HEADERS: "x-common=2",
    });
    const before = receiver.spans.length;
    const result = await exported(exporter, await someSpans());
    expect(result.code).toBe(ExportResultCode.SUCCESS);
    expect(receiver.spans.length - before).toBe(3);
    expect(receiver.paths.at(-1)).toBe("/v1/traces");
    const headers = receiver.headers.at(-1);
    expect(headers?.authorization).toBe("Bearer abc");
    // The traces-only variable wins over the common one.
    expect(headers?.["x-common"]).toBe("2");
    expect(headers?.["content-type"]).toBe("application/json");
    await exporter.shutdown();
  });

  it("fails the export, holding nothing, when the collector cannot be reached", async () => {
    const gone = await startOtlpReceiver();
    await gone.close();
    const exporter = new OtlpJsonExporter(gone.endpoint, {});
    const result = await exported(exporter, await someSpans());
    expect(result.code).toBe(ExportResultCode.FAILED);
    expect(result.error).toBeInstanceOf(Error);
    await exporter.forceFlush();
  });
});
