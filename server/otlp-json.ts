import "server-only";
import http from "node:http";
import https from "node:https";
import type { Attributes, AttributeValue, HrTime } from "@opentelemetry/api";
import { type ExportResult, ExportResultCode } from "@opentelemetry/core";
import type { ReadableSpan, SpanExporter } from "@opentelemetry/sdk-trace";

/**
 * Sends ended spans to an OTLP/HTTP collector as JSON (`POST <endpoint>/v1/traces`, the OTLP
 * specification's JSON encoding: ids in hex, times as decimal strings of nanoseconds). It stands
 * in for `@opentelemetry/exporter-trace-otlp-http`, whose encoding (an object tree per span, then
 * `JSON.stringify`) cost a measured third of the tracing on the agents' hot path: here each span
 * is written straight into the request's text.
 *
 * Headers come from `OTEL_EXPORTER_OTLP_HEADERS` and `OTEL_EXPORTER_OTLP_TRACES_HEADERS`
 * (`key=value,…`, values percent-decoded), the timeout from `OTEL_EXPORTER_OTLP_TIMEOUT` (ms,
 * default 10 000). A batch the collector refuses or does not answer is dropped (no retry): traces
 * are a diagnosis aid, never worth holding memory for.
 */
export class OtlpJsonExporter implements SpanExporter {
  private readonly url: URL;
  private readonly headers: Record<string, string>;
  private readonly timeoutMs: number;
  private readonly inFlight = new Set<Promise<void>>();

  constructor(endpoint: string, env: Readonly<Record<string, string | undefined>>) {
    this.url = new URL(`${endpoint.replace(/\/$/, "")}/v1/traces`);
    this.headers = {
      ...parseHeaders(env.OTEL_EXPORTER_OTLP_HEADERS),
      ...parseHeaders(env.OTEL_EXPORTER_OTLP_TRACES_HEADERS),
      "content-type": "application/json",
    };
    const timeout = Number(env.OTEL_EXPORTER_OTLP_TIMEOUT);
    this.timeoutMs = Number.isFinite(timeout) && timeout > 0 ? timeout : 10_000;
  }

  export(spans: ReadableSpan[], done: (result: ExportResult) => void): void {
    const sent = this.send(encodeSpans(spans)).then(
      () => done({ code: ExportResultCode.SUCCESS }),
      (error: unknown) =>
        done({
          code: ExportResultCode.FAILED,
          error: error instanceof Error ? error : new Error(String(error)),
        }),
    );
    this.inFlight.add(sent);
    void sent.finally(() => this.inFlight.delete(sent));
  }

  async forceFlush(): Promise<void> {
    await Promise.all([...this.inFlight]);
  }

  async shutdown(): Promise<void> {
    await this.forceFlush();
  }

  private send(body: string): Promise<void> {
    const client = this.url.protocol === "https:" ? https : http;
    return new Promise<void>((resolve, reject) => {
      const req = client.request(
        this.url,
        { method: "POST", headers: this.headers, timeout: this.timeoutMs },
        (res) => {
          res.resume();
          res.on("end", () => {
            const status = res.statusCode ?? 0;
            if (status >= 200 && status < 300) resolve();
            else reject(new Error(`the collector answered ${status}`));
          });
          res.on("error", reject);
        },
      );
      req.on("timeout", () => req.destroy(new Error(`the collector did not answer in ${this.timeoutMs} ms`)));
      req.on("error", reject);
      req.end(body);
    });
  }
}

/** `key=value,…` as OTLP's header variables write them; malformed pairs are skipped. */
export function parseHeaders(raw: string | undefined): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const pair of (raw ?? "").split(",")) {
    const at = pair.indexOf("=");
    if (at <= 0) continue;
    const key = pair.slice(0, at).trim().toLowerCase();
    try {
      headers[key] = decodeURIComponent(pair.slice(at + 1).trim());
    } catch {
      // A value that is not percent-encoded text is no header.
    }
  }
  return headers;
}

/** One `ExportTraceServiceRequest` in OTLP's JSON encoding, spans grouped by resource and scope. */
export function encodeSpans(spans: readonly ReadableSpan[]): string {
  // Keyed by the objects themselves: a tracer gives each of its spans the same scope object.
  type Scope = ReadableSpan["instrumentationScope"];
  const byResource = new Map<ReadableSpan["resource"], Map<Scope, string[]>>();
  for (const span of spans) {
    let scopes = byResource.get(span.resource);
    if (!scopes) {
      scopes = new Map();
      byResource.set(span.resource, scopes);
    }
    const scope = span.instrumentationScope;
    let encoded = scopes.get(scope);
    if (!encoded) {
      encoded = [];
      scopes.set(scope, encoded);
    }
    encoded.push(encodeSpan(span));
  }
  const resources: string[] = [];
  for (const [resource, scopes] of byResource) {
    const scopeSpans = [...scopes].map(([scope, encoded]) => {
      const named = JSON.stringify({
        name: scope.name,
        ...(scope.version ? { version: scope.version } : {}),
      });
      return `{"scope":${named},"spans":[${encoded.join(",")}]}`;
    });
    resources.push(
      `{"resource":{"attributes":${encodeAttributes(resource.attributes)}},"scopeSpans":[${scopeSpans.join(",")}]}`,
    );
  }
  return `{"resourceSpans":[${resources.join(",")}]}`;
}

function encodeSpan(span: ReadableSpan): string {
  const ctx = span.spanContext();
  const parent = span.parentSpanContext;
  const flags = spanFlags(ctx.traceFlags, parent?.isRemote);
  let out = `{"traceId":"${ctx.traceId}","spanId":"${ctx.spanId}"`;
  if (parent?.spanId) out += `,"parentSpanId":"${parent.spanId}"`;
  out += `,"flags":${flags},"name":${JSON.stringify(span.name)},"kind":${span.kind + 1}`;
  out += `,"startTimeUnixNano":"${nanos(span.startTime)}","endTimeUnixNano":"${nanos(span.endTime)}"`;
  out += `,"attributes":${encodeAttributes(span.attributes)}`;
  if (span.droppedAttributesCount > 0) out += `,"droppedAttributesCount":${span.droppedAttributesCount}`;
  if (span.events.length > 0) {
    const events = span.events.map(
      (e) =>
        `{"name":${JSON.stringify(e.name)},"timeUnixNano":"${nanos(e.time)}","attributes":${encodeAttributes(e.attributes ?? {})}}`,
    );
    out += `,"events":[${events.join(",")}]`;
  }
  if (span.links.length > 0) {
    const links = span.links.map(
      (l) =>
        `{"traceId":"${l.context.traceId}","spanId":"${l.context.spanId}","flags":${spanFlags(l.context.traceFlags, l.context.isRemote)},"attributes":${encodeAttributes(l.attributes ?? {})}}`,
    );
    out += `,"links":[${links.join(",")}]`;
  }
  const { code, message } = span.status;
  out += message
    ? `,"status":{"code":${code},"message":${JSON.stringify(message)}}}`
    : `,"status":{"code":${code}}}`;
  return out;
}

/** W3C trace flags, then OTLP's bits 8 and 9: whether remoteness is known (it is), and remote. */
function spanFlags(traceFlags: number, isRemote: boolean | undefined): number {
  return (traceFlags & 0xff) | 0x100 | (isRemote ? 0x200 : 0);
}

/** `[seconds, nanoseconds]` as decimal nanoseconds: past 2^53, so written, not multiplied. */
function nanos([seconds, ns]: HrTime): string {
  return seconds === 0 ? String(ns) : `${seconds}${String(ns).padStart(9, "0")}`;
}

function encodeAttributes(attributes: Attributes): string {
  let out = "";
  for (const key in attributes) {
    const value = attributes[key];
    if (value === undefined) continue;
    out += `${out ? "," : ""}{"key":${JSON.stringify(key)},"value":${encodeValue(value)}}`;
  }
  return `[${out}]`;
}

function encodeValue(value: AttributeValue | null | undefined): string {
  if (Array.isArray(value)) return `{"arrayValue":{"values":[${value.map(encodeValue).join(",")}]}}`;
  switch (typeof value) {
    case "string":
      return `{"stringValue":${JSON.stringify(value)}}`;
    case "boolean":
      return `{"boolValue":${value}}`;
    case "number":
      if (Number.isInteger(value)) return `{"intValue":"${value}"}`;
      // JSON has no NaN or infinities; OTLP's JSON writes them as strings.
      return `{"doubleValue":${Number.isFinite(value) ? value : JSON.stringify(String(value))}}`;
    default:
      return "{}";
  }
}
