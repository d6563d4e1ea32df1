import "server-only";
import type { Span } from "@opentelemetry/api";
import type { SpanHandle, SpanOptions, TracingImpl } from "./span-types";

/**
 * The OpenTelemetry side of tracing.ts, imported only when traces are on. Its packages are
 * imported here, when it starts, never at the top: the server's bundle would load them at start
 * otherwise. Spans are batched and sent over OTLP/HTTP (JSON) to the endpoint's `/v1/traces`;
 * `traceparent` is W3C trace context. No context manager: a span's parent is given to it (a
 * `traceparent`), which spares each span a context switch through AsyncLocalStorage.
 */
export async function startOtlpTracing(opts: {
  endpoint: string;
  serviceName: string;
  /** Where the exporter's `OTEL_EXPORTER_OTLP_*` settings are read. */
  env: Readonly<Record<string, string | undefined>>;
}): Promise<TracingImpl> {
  const api = await import("@opentelemetry/api");
  const { W3CTraceContextPropagator } = await import("@opentelemetry/core");
  const { resourceFromAttributes } = await import("@opentelemetry/resources");
  const { BatchSpanProcessor, TracerProvider } = await import("@opentelemetry/sdk-trace");
  const { OtlpJsonExporter } = await import("./otlp-json");

  const exporter = new OtlpJsonExporter(opts.endpoint, opts.env);
  const provider = new TracerProvider({
    resource: resourceFromAttributes({ "service.name": opts.serviceName }),
    spanProcessors: [new BatchSpanProcessor({ exporter })],
  });
  const propagator = new W3CTraceContextPropagator();
  // Nothing is registered globally: Next traces its own work through the global provider when one
  // is set, into spans of its own with no parent (there is no context manager), which only cost.
  const tracer = provider.getTracer("gatehouse");
  // The spans of this process that children may still name as their parent, by `traceparent`:
  // a child of one of them is started under the span itself, with no string to parse.
  const ownParents = new Map<string, Span>();
  const parentOf = (traceparent: string) => {
    const span = ownParents.get(traceparent);
    if (span) return api.trace.setSpan(api.ROOT_CONTEXT, span);
    return propagator.extract(api.ROOT_CONTEXT, { traceparent }, api.defaultTextMapGetter);
  };
  const kinds = { server: api.SpanKind.SERVER, client: api.SpanKind.CLIENT, internal: api.SpanKind.INTERNAL };

  return {
    inSpan<T>(name: string, spanOpts: SpanOptions, fn: (span: SpanHandle) => Promise<T>): Promise<T> {
      const parent = spanOpts.traceparent ? parentOf(spanOpts.traceparent) : api.ROOT_CONTEXT;
      const span = tracer.startSpan(name, { kind: kinds[spanOpts.kind ?? "internal"] }, parent);
      // Set once it is started, not handed to startSpan, which copies them twice; the span skips
      // undefined values itself.
      if (spanOpts.attributes) span.setAttributes(spanOpts.attributes);
      let own: string | null = null;
      const handle: SpanHandle = {
        setAttribute: (key, value) => span.setAttribute(key, value),
        get traceparent() {
          if (own === null) {
            const { traceId, spanId, traceFlags } = span.spanContext();
            own = `00-${traceId}-${spanId}-${(traceFlags & 0xff).toString(16).padStart(2, "0")}`;
            ownParents.set(own, span);
          }
          return own;
        },
      };
      let running: Promise<T>;
      try {
        running = fn(handle);
      } catch (err) {
        running = Promise.reject(err);
      }
      const ended = () => {
        if (own !== null) ownParents.delete(own);
        span.end();
      };
      return running.then(
        (value) => {
          ended();
          return value;
        },
        (err: unknown) => {
          const code = (err as { code?: unknown } | null)?.code;
          span.setAttribute(
            "error.type",
            typeof code === "string" ? code : err instanceof Error ? err.name : "error",
          );
          span.setStatus({ code: api.SpanStatusCode.ERROR });
          ended();
          throw err;
        },
      );
    },
    flush: () => provider.forceFlush(),
    async stop() {
      await provider.shutdown();
    },
  };
}
