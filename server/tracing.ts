import "server-only";
import type { SpanHandle, SpanOptions, TracingImpl } from "./span-types";

/**
 * Traces over OTLP, loaded only when `OTEL_EXPORTER_OTLP_ENDPOINT` is set (see
 * {@link startTracing}): without it, nothing of OpenTelemetry is imported, and {@link inSpan}
 * just runs its function. Attribute names follow OpenTelemetry's semantic conventions for MCP
 * (semantic-conventions-genai v0.1.0, `docs/gen-ai/mcp.md`): `mcp.method.name`,
 * `gen_ai.tool.name`, `gen_ai.operation.name`, `mcp.session.id`, `jsonrpc.request.id`,
 * `error.type`. A W3C `traceparent` an agent sends is continued; a tool call passes its own on to
 * the tool server (`_meta.traceparent`, and the `traceparent` header over HTTP). A span's parent
 * is always handed to it: no context follows async work. On the agents' hot path
 * (server/http/hot-path.ts) the request's span travels in the `traceparent` header the route
 * handler sees; a route Next serves sees the client's own header.
 *
 * The tracer lives on `globalThis`: Next evaluates server modules more than once, and every copy
 * must trace into the same provider.
 */

export type { SpanHandle, SpanOptions, SpanValue } from "./span-types";

const KEY = Symbol.for("gatehouse.tracing");
const holder = globalThis as { [KEY]?: { impl: TracingImpl | null; calls: Map<string, string> } };
holder[KEY] ??= { impl: null, calls: new Map() };
const state = holder[KEY];

const NO_SPAN: SpanHandle = { setAttribute: () => undefined, traceparent: null };

/** Calls whose trace is remembered at once, at most: the oldest is forgotten past it. */
const MAX_REMEMBERED_CALLS = 10_000;

/** Whether traces are being sent. */
export function tracing(): boolean {
  return state.impl !== null;
}

/**
 * Runs `fn` in a new span named `name`, a child of `opts.traceparent` (else the root of a trace of
 * its own), ended when `fn` settles; a rejection marks it failed, with `error.type` the error's
 * code. `fn` hands `span.traceparent` to the spans under it. Without tracing, runs `fn` alone.
 */
export function inSpan<T>(name: string, opts: SpanOptions, fn: (span: SpanHandle) => Promise<T>): Promise<T> {
  const impl = state.impl;
  return impl ? impl.inSpan(name, opts, fn) : fn(NO_SPAN);
}

/**
 * Remembers `traceparent` (the span of the request that made call `id`) as the call's trace, so
 * that its run, which may come much later in another request (a reviewer's approval), is traced
 * as part of the agent's request. Memory of this process only, bounded: a call run by another
 * replica, or after a restart, starts its run in a trace of its own instead.
 */
export function rememberCallTrace(id: string, traceparent: string | null): void {
  if (!state.impl || !traceparent) return;
  if (state.calls.size >= MAX_REMEMBERED_CALLS) {
    const oldest = state.calls.keys().next().value;
    if (oldest !== undefined) state.calls.delete(oldest);
  }
  state.calls.set(id, traceparent);
}

/** Call `id`'s remembered trace (see {@link rememberCallTrace}), kept for its run; null when none. */
export function callTrace(id: string): string | null {
  return state.calls.get(id) ?? null;
}

/** Runs `fn` in span `name` under call `id`'s remembered trace (forgotten then), else in a trace of its own. */
export function inCallSpan<T>(
  id: string,
  name: string,
  opts: Omit<SpanOptions, "traceparent">,
  fn: (span: SpanHandle) => Promise<T>,
): Promise<T> {
  if (!state.impl) return fn(NO_SPAN);
  const parent = state.calls.get(id);
  state.calls.delete(id);
  return inSpan(name, { ...opts, ...(parent ? { traceparent: parent } : {}) }, fn);
}

/**
 * The OTLP endpoint in `env`, checked: an http(s) URL, or null when traces are off. The operator's
 * own collector: it is dialled as given, not through the outbound guard.
 */
export function otlpEndpoint(env: Readonly<Record<string, string | undefined>>): string | null {
  const raw = env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim();
  if (!raw) return null;
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new Error(
      `OTEL_EXPORTER_OTLP_ENDPOINT is not a URL; write the collector's OTLP/HTTP address, e.g. http://collector:4318`,
    );
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw new Error(
      `OTEL_EXPORTER_OTLP_ENDPOINT must be an http or https URL (OTLP over HTTP), not ${url.protocol}`,
    );
  }
  return raw;
}

/**
 * Starts sending traces when `OTEL_EXPORTER_OTLP_ENDPOINT` is set in `env` (spans go to its
 * `/v1/traces`, batched), with `service.name` from `OTEL_SERVICE_NAME` (default "gatehouse").
 * Throws, before anything is loaded, for an endpoint that is not an http(s) URL. Does nothing
 * when tracing already runs or the variable is unset.
 */
export async function startTracing(
  env: Readonly<Record<string, string | undefined>> = process.env,
): Promise<boolean> {
  const endpoint = otlpEndpoint(env);
  if (!endpoint || state.impl) return state.impl !== null;
  const { startOtlpTracing } = await import("./tracing-sdk");
  state.impl = await startOtlpTracing({
    endpoint,
    serviceName: env.OTEL_SERVICE_NAME?.trim() || "gatehouse",
    env,
  });
  return true;
}

/** Sends the spans ended so far now (tests, and before a stop). */
export async function flushTracing(): Promise<void> {
  await state.impl?.flush();
}

/** Sends what is left and stops tracing. */
export async function stopTracing(): Promise<void> {
  const impl = state.impl;
  state.impl = null;
  state.calls.clear();
  await impl?.stop();
}
