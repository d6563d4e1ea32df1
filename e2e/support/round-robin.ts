import http from "node:http";
import type { AddressInfo } from "node:net";

/** One request the proxy passed on, as the tests read it back. */
export interface ProxyHit {
  /**
   * Index (into the target list) of the replica the request was sent to (set as it is sent, so
   * a request still waiting has it); -1 when none could be reached.
   */
  target: number;
  method: string;
  /** Path and query, as asked. */
  path: string;
  /** The answer's status; 0 until the answer's head arrived, 502 when no replica answered. */
  status: number;
  /** `Mcp-Session-Id` of the request, or else of the answer (a 2025 session's initialize). */
  sessionId: string | null;
}

/**
 * A load balancer as small as one can be, written for the replica tests: every request goes to
 * the next replica in turn (no stickiness of any kind, not even per connection: a browser's or an
 * SDK client's kept-alive connection still has each of its requests sent elsewhere). The request
 * body is read whole first (nginx buffers bodies too), so a replica that refuses the connection
 * (stopped, or killed) is skipped for the next one, as load balancers do; nothing was sent to it.
 * Answers are passed on as they come, chunk by chunk, so event streams (SSE) flow unbuffered; a
 * client that goes away closes its upstream request.
 */
export class RoundRobinProxy {
  /** Every request passed on, in arrival order. */
  readonly hits: ProxyHit[] = [];
  private turn = 0;
  private readonly server: http.Server;
  /** Sends requests whose path matches to one replica, ahead of the turn (see {@link pin}). */
  private pins: { path: RegExp; target: number }[] = [];

  private constructor(private readonly ports: readonly number[]) {
    this.server = http.createServer((req, res) => void this.pass(req, res));
  }

  /** Listens on a free loopback port in front of the replicas on `ports`. */
  static async start(ports: readonly number[]): Promise<RoundRobinProxy> {
    const proxy = new RoundRobinProxy(ports);
    await new Promise<void>((resolve) => proxy.server.listen(0, "127.0.0.1", resolve));
    return proxy;
  }

  get origin(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  /**
   * Sends the next requests whose path matches `path` to replica `target` instead of the next in
   * turn (still skipping it when it refuses), until {@link unpin}: how a test makes sure two
   * requests it cares about are answered by different replicas.
   */
  pin(path: RegExp, target: number): void {
    this.pins.push({ path, target });
  }

  unpin(): void {
    this.pins = [];
  }

  /** The replicas' indexes, in order, that answered requests matching `path` (and `method`). */
  targetsOf(path: RegExp, method?: string): number[] {
    return this.hits
      .filter((h) => path.test(h.path) && (method === undefined || h.method === method))
      .map((h) => h.target);
  }

  private async pass(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks);
    const path = req.url ?? "/";
    const pinned = this.pins.find((p) => p.path.test(path));
    const first = pinned ? pinned.target : this.turn++ % this.ports.length;
    const incomingSession = req.headers["mcp-session-id"];
    const hit: ProxyHit = {
      target: -1,
      method: req.method ?? "GET",
      path,
      status: 0,
      sessionId: typeof incomingSession === "string" ? incomingSession : null,
    };
    this.hits.push(hit);
    for (let tried = 0; tried < this.ports.length; tried++) {
      const target = (first + tried) % this.ports.length;
      const port = this.ports[target];
      if (port === undefined) break;
      // Known before the answer: a long-poll's replica is read while it still waits.
      hit.target = target;
      if ((await this.attempt(req, res, body, port, hit)) === "answered") return;
    }
    hit.target = -1;
    hit.status = 502;
    res.writeHead(502, { "Content-Type": "text/plain" }).end("no replica answered\n");
  }

  /**
   * Sends the request to one replica and pipes its answer back; resolves "refused" when the
   * replica took no connection (nothing was sent, so the next may have it), else once the answer
   * has begun.
   */
  private attempt(
    req: http.IncomingMessage,
    res: http.ServerResponse,
    body: Buffer,
    port: number,
    hit: ProxyHit,
  ): Promise<"refused" | "answered"> {
    return new Promise((resolve) => {
      // The Host header goes through unchanged: the replicas allow the proxy's name
      // (GATEHOUSE_PUBLIC_ORIGIN), as they would a real load balancer's.
      const headers = { ...req.headers, "content-length": String(body.length) };
      delete headers["transfer-encoding"];
      const upstream = http.request(
        { host: "127.0.0.1", port, method: req.method, path: req.url, headers, agent: false },
        (answer) => {
          hit.status = answer.statusCode ?? 0;
          const session = answer.headers["mcp-session-id"];
          if (hit.sessionId === null && typeof session === "string") hit.sessionId = session;
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          // An event stream's first bytes must not wait for more.
          res.flushHeaders();
          answer.pipe(res);
          answer.once("error", () => res.destroy());
          resolve("answered");
        },
      );
      upstream.once("error", (err: NodeJS.ErrnoException) => {
        if (err.code === "ECONNREFUSED") return resolve("refused");
        // The replica went away mid-answer (killed): the client sees the connection break.
        if (!res.headersSent) res.writeHead(502, { "Content-Type": "text/plain" });
        res.destroy();
        hit.status = hit.status || 502;
        resolve("answered");
      });
      res.once("close", () => upstream.destroy());
      upstream.end(body);
    });
  }

  /** Stops listening and cuts every open connection (event streams included). */
  close(): Promise<void> {
    return new Promise((resolve) => {
      this.server.closeAllConnections();
      this.server.close(() => resolve());
    });
  }
}
