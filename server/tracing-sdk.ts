import "server-only";
import type { SpanHandle, SpanOptions, TracingImpl } from "./span-types";

/**
 * The OpenTelemetry side of tracing.ts, imported only when traces are on. Its packages are
 * imported here, when it starts, never at the top: the server's bundle would load them at start
 * otherwise. Spans are batched and sent over OTLP/HTTP (JSON) to the endpoint's `/v1/traces`;
 * the active span follows async work (AsyncLocalStorage), and `traceparent` is W3C trace context.
 */
export async function startOtlpTracing(opts: {
  endpoint: string;
  serviceName: string;
}): Promise<TracingImpl> {
  const api = await import("@opentelemetry/api");
  const { AsyncLocalStorageContextManager } = await import("@opentelemetry/context-async-hooks");
  const { W3CTraceContextPropagator } = await import("@opentelemetry/core");
  const { resourceFromAttributes } = await import("@opentelemetry/resources");
  const { BatchSpanProcessor, TracerProvider } = await import("@opentelemetry/sdk-trace");
  const { OTLPTraceExporter } = await import("@opentelemetry/exporter-trace-otlp-http");

  const exporter = new OTLPTraceExporter({ url: `${opts.endpoint.replace(/\/$/, "")}/v1/traces` });
  const provider = new TracerProvider({
    resource: resourceFromAttributes({ "service.name": opts.serviceName }),
    spanProcessors: [new BatchSpanProcessor({ exporter })],
  });
  const contextManager = new AsyncLocalStorageContextManager().enable();
  api.context.setGlobalContextManager(contextManager);
  const propagator = new W3CTraceContextPropagator();
  api.propagation.setGlobalPropagator(propagator);
  api.trace.setGlobalTracerProvider(provider);
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
        : api.context.active();
      const attributes = Object.fromEntries(
        Object.entries(spanOpts.attributes ?? {}).filter(
          (e): e is [string, string | number | boolean] => e[1] !== undefined,
        ),
      );
      return tracer.startActiveSpan(
        name,
        { kind: kinds[spanOpts.kind ?? "internal"], attributes },
        parent,
        async (span) => {
          try {
            return await fn({ setAttribute: (key, value) => span.setAttribute(key, value) });
          } catch (err) {
            const code = (err as { code?: unknown } | null)?.code;
            span.setAttribute(
              "error.type",
              typeof code === "string" ? code : err instanceof Error ? err.name : "error",
            );
            span.setStatus({ code: api.SpanStatusCode.ERROR });
            throw err;
          } finally {
            span.end();
          }
        },
      );
    },
    traceparentNow() {
      const carrier: Record<string, string> = {};
      propagator.inject(api.context.active(), carrier, api.defaultTextMapSetter);
      return carrier.traceparent ?? null;
    },
    flush: () => provider.forceFlush(),
    async stop() {
      await provider.shutdown();
      contextManager.disable();
      api.trace.disable();
      api.propagation.disable();
      api.context.disable();
    },
  };
}
