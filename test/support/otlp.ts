/**
 * An OTLP/HTTP receiver for tests (JSON, as server/otlp-json.ts sends it)
 * on a free loopback port: every span it is sent, and every path it was sent to. Node built-ins
 * only, so the Playwright specs import it as the unit tests do.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";

/** A span as OTLP/JSON carries it (ids in hex; `kind` 2 server, 3 client). */
export interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  attributes: { key: string; value: { stringValue?: string; intValue?: string | number } }[];
}

export interface OtlpReceiver {
  /** What to set `OTEL_EXPORTER_OTLP_ENDPOINT` to. */
  endpoint: string;
  /** Every span received so far, in order. */
  spans: OtlpSpan[];
  /** The path of every request received (an exporter sends to `/v1/traces`). */
  paths: string[];
  /** The headers of every request received. */
  headers: http.IncomingHttpHeaders[];
  close(): Promise<void>;
}

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: OtlpSpan[] = [];
  const paths: string[] = [];
  const headers: http.IncomingHttpHeaders[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      paths.push(req.url ?? "");
      headers.push(req.headers);
      const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as {
        resourceSpans: { scopeSpans: { spans: OtlpSpan[] }[] }[];
      };
      for (const r of body.resourceSpans) for (const s of r.scopeSpans) spans.push(...s.spans);
      res.writeHead(200, { "content-type": "application/json" }).end("{}");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    spans,
    paths,
    headers,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
