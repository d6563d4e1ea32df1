import "server-only";
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
}): Promise<TracingImpl> {
  const api = await import("@opentelemetry/api");
  const { W3CTraceContextPropagator } = await import("@opentelemetry/core");
  const { resourceFromAttributes } = await import("@opentelemetry/resources");
  const { BatchSpanProcessor, TracerProvider } = await import("@opentelemetry/sdk-trace");
  const { OTLPTraceExporter } = await import("@opentelemetry/exporter-trace-otlp-http");

  const exporter = new OTLPTraceExporter({ url: `${opts.endpoint.replace(/\/$/, "")}/v1/traces` });
  const provider = new TracerProvider({
    resource: resourceFromAttributes({ "service.name": opts.serviceName }),
    spanProcessors: [new BatchSpanProcessor({ exporter })],
  });
  const propagator = new W3CTraceContextPropagator();
  // Nothing is registered globally: Next traces its own work through the global provider when one
  // is set, into spans of its own with no parent (there is no context manager), which only cost.
  const tracer = provider.getTracer("gatehouse");
  const kinds = { server: api.SpanKind.SERVER, client: api.SpanKind.CLIENT, internal: api.SpanKind.INTERNAL };

  return {
    inSpan<T>(name: string, spanOpts: SpanOptions, fn: (span: SpanHandle) => Promise<T>): Promise<T> {
      const parent = spanOpts.traceparent
        ? propagator.extract(
            api.ROOT_CONTEXT,
            { traceparent: spanOpts.traceparent },
            api.defaultTextMapGetter,
          )
        : api.ROOT_CONTEXT;
      const attributes: Record<string, string | number | boolean> = {};
      for (const [key, value] of Object.entries(spanOpts.attributes ?? {})) {
        if (value !== undefined) attributes[key] = value;
      }
      const span = tracer.startSpan(name, { kind: kinds[spanOpts.kind ?? "internal"], attributes }, parent);
      const handle: SpanHandle = {
        setAttribute: (key, value) => span.setAttribute(key, value),
        get traceparent() {
          const carrier: Record<string, string> = {};
          propagator.inject(api.trace.setSpan(api.ROOT_CONTEXT, span), carrier, api.defaultTextMapSetter);
          return carrier.traceparent ?? null;
        },
      };
      const failed = (err: unknown) => {
        const code = (err as { code?: unknown } | null)?.code;
        span.setAttribute(
          "error.type",
          typeof code === "string" ? code : err instanceof Error ? err.name : "error",
        );
        span.setStatus({ code: api.SpanStatusCode.ERROR });
      };
      let running: Promise<T>;
      try {
        running = fn(handle);
      } catch (err) {
        running = Promise.reject(err);
      }
      return running.then(
        (value) => {
          span.end();
          return value;
        },
        (err: unknown) => {
          failed(err);
          span.end();
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
