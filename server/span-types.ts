/** The shapes tracing.ts and tracing-sdk.ts share (apart, so neither imports the other's module). */

/** An attribute value a span may carry. */
export type SpanValue = string | number | boolean;

export interface SpanOptions {
  /** `server` for a request Gatehouse answers, `client` for one it sends; default internal. */
  kind?: "server" | "client" | "internal";
  attributes?: Record<string, SpanValue | undefined>;
  /** A W3C `traceparent` to continue (an agent's header); default the span now active. */
  traceparent?: string | null;
}

/** What a function running in a span may tell it. */
export interface SpanHandle {
  setAttribute(key: string, value: SpanValue): void;
}

/** The tracer behind tracing.ts's facade: tracing-sdk.ts. */
export interface TracingImpl {
  inSpan<T>(name: string, opts: SpanOptions, fn: (span: SpanHandle) => Promise<T>): Promise<T>;
  traceparentNow(): string | null;
  flush(): Promise<void>;
  stop(): Promise<void>;
}
