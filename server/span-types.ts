/** The shapes tracing.ts and tracing-sdk.ts share (apart, so neither imports the other's module). */

/** An attribute value a span may carry. */
export type SpanValue = string | number | boolean;

export interface SpanOptions {
  /** `server` for a request Gatehouse answers, `client` for one it sends; default internal. */
  kind?: "server" | "client" | "internal";
  attributes?: Record<string, SpanValue | undefined>;
  /**
   * The parent, as a W3C `traceparent`: an agent's header, or the `traceparent` of the span the
   * new one belongs under. Given explicitly: nothing follows async work on its own. Default: a
   * trace of its own.
   */
  traceparent?: string | null;
}

/** What a function running in a span may tell it, and how its children name it. */
export interface SpanHandle {
  setAttribute(key: string, value: SpanValue): void;
  /** This span as a W3C `traceparent`, the parent of the spans under it; null while traces are off. */
  readonly traceparent: string | null;
}

/** The tracer behind tracing.ts's facade: tracing-sdk.ts. */
export interface TracingImpl {
  inSpan<T>(name: string, opts: SpanOptions, fn: (span: SpanHandle) => Promise<T>): Promise<T>;
  flush(): Promise<void>;
  stop(): Promise<void>;
}
