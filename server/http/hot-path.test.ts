/**
 * The hot-path bridge of server/main.ts, over a real node:http server and real sockets: what a
 * request must carry before its body is read, and how failures are answered.
 */
import http from "node:http";
import net from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import type { Principal } from "../auth/access";
import { answerHot, type RouteHandler } from "./hot-path";
import type { HandlerContext } from "./route";

const servers: http.Server[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await new Promise((r) => s.close(r));
});

interface Seen {
  url: string;
  body: string;
  /** The principal the hot path handed to the handler. */
  principal: Principal | null | undefined;
}

const good: Principal = { kind: "agent", token: { id: 1, name: "good", toolSet: null }, via: "bearer" };

/**
 * A server answering every request through answerHot with `handler`; `seen` collects what the
 * handler got; `authentications` counts the credential checks.
 */
async function serve(
  handler: (req: Request) => Promise<Response>,
  seen: Seen[],
  authentications = { count: 0 },
): Promise<number> {
  const wrapped: RouteHandler = async (req, ctx) => {
    seen.push({ url: req.url, body: await req.text(), principal: ctx.principal });
    return handler(req);
  };
  const server = http.createServer((req, res) => {
    void answerHot(req, res, wrapped, {
      listenHost: "127.0.0.1:3000",
      authenticate: async (headers) => {
        authentications.count++;
        return headers.get("authorization") === "Bearer good" ? good : null;
      },
      extraHeaders: [{ key: "X-Frame-Options", value: "DENY" }],
    });
  });
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return (server.address() as net.AddressInfo).port;
}

/** Sends raw request bytes and resolves with everything the server sent back until it closed or `until` matched. */
function raw(port: number, head: string, until: RegExp): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, "127.0.0.1", () => socket.write(head));
    let got = "";
    socket.on("data", (d) => {
      got += d.toString("utf8");
      if (until.test(got)) {
        socket.destroy();
        resolve(got);
      }
    });
    socket.on("error", reject);
    socket.on("close", () => resolve(got));
  });
}

describe("the hot path", () => {
  it("never reads the body of a request without working credentials: it is refused from its headers and the connection closes", async () => {
    const seen: Seen[] = [];
    const port = await serve(
      async () => Response.json({ error: { code: "unauthenticated" } }, { status: 401 }),
      seen,
    );
    // 4 MB announced, 10 bytes sent: the answer must not wait for the rest.
    const answer = await raw(
      port,
      "POST /api/calls HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer wrong\r\nContent-Type: application/json\r\nContent-Length: 4000000\r\n\r\n0123456789",
      /unauthenticated/,
    );
    expect(answer).toMatch(/^HTTP\/1\.1 401/);
    expect(answer).toMatch(/\r\nconnection: close\r\n/i);
    expect(answer).toMatch(/\r\nx-frame-options: DENY\r\n/i);
    expect(seen).toEqual([{ url: "http://127.0.0.1:3000/api/calls", body: "", principal: null }]);
  });

  it("reads the body of an authenticated request and hands it to the handler", async () => {
    const seen: Seen[] = [];
    const port = await serve(async () => Response.json({ ok: true }), seen);
    const res = await fetch(`http://127.0.0.1:${port}/api/calls?x=1`, {
      method: "POST",
      headers: { authorization: "Bearer good", "content-type": "application/json" },
      body: '{"tool":"t"}',
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("x-frame-options")).toBe("DENY");
    expect(seen).toEqual([
      { url: "http://127.0.0.1:3000/api/calls?x=1", body: '{"tool":"t"}', principal: good },
    ]);
  });

  it("a route() handler is handed the body as read, in a Request that carries none", async () => {
    const got: { requestBody: string; handed: string | undefined }[] = [];
    const handler = Object.assign(
      async (req: Request, ctx: HandlerContext) => {
        got.push({ requestBody: await req.text(), handed: ctx.body?.toString("utf8") });
        return Response.json({ ok: true });
      },
      { bodyFromContext: true as const },
    );
    const server = http.createServer((req, res) => {
      void answerHot(req, res, handler, {
        listenHost: "127.0.0.1:3000",
        authenticate: async () => good,
        extraHeaders: [],
      });
    });
    servers.push(server);
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const port = (server.address() as net.AddressInfo).port;
    const res = await fetch(`http://127.0.0.1:${port}/api/calls`, { method: "POST", body: '{"tool":"t"}' });
    expect(res.status).toBe(200);
    expect(got).toEqual([{ requestBody: "", handed: '{"tool":"t"}' }]);
  });

  it("a JSON answer goes out whole with its Content-Length; an event stream goes out chunked, each part as it is produced", async () => {
    const seen: Seen[] = [];
    let more: (text: string) => void = () => {};
    const port = await serve(async (req) => {
      if (new URL(req.url).pathname === "/json") return Response.json({ answer: "x".repeat(300) });
      const stream = new ReadableStream<Uint8Array>({
        start(controller) {
          controller.enqueue(new TextEncoder().encode("event: a\n\n"));
          more = (text) => {
            controller.enqueue(new TextEncoder().encode(text));
            controller.close();
          };
        },
      });
      return new Response(stream, { headers: { "content-type": "text/event-stream" } });
    }, seen);
    const head =
      "POST /json HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer good\r\nContent-Length: 0\r\n\r\n";
    const json = await raw(port, head, /\}$/);
    expect(json).toMatch(/\r\ncontent-length: 313\r\n/i);
    expect(json).not.toMatch(/transfer-encoding/i);
    // The first event arrives while the stream is still open; the second once it is produced.
    const sse = raw(port, head.replace("/json", "/events"), /event: b/);
    await new Promise<void>((resolve) => {
      const check = () => (seen.length === 2 ? resolve() : setImmediate(check));
      check();
    });
    more("event: b\n\n");
    const text = await sse;
    expect(text).toMatch(/\r\ntransfer-encoding: chunked\r\n/i);
    expect(text.indexOf("event: a")).toBeLessThan(text.indexOf("event: b"));
  });

  it("an unexpected failure of the handler is answered 500 internal, not a reset connection", async () => {
    const seen: Seen[] = [];
    const port = await serve(async () => {
      throw new Error("boom with /secret/path");
    }, seen);
    const res = await fetch(`http://127.0.0.1:${port}/api/calls`, {
      method: "POST",
      headers: { authorization: "Bearer good" },
      body: "{}",
    });
    expect(res.status).toBe(500);
    expect(await res.json()).toEqual({ error: { code: "internal", message: "internal error" } });
  });

  it("a request that came through a TLS proxy (X-Forwarded-Proto: https) is seen as https, as Next sees it", async () => {
    const seen: Seen[] = [];
    const port = await serve(async () => new Response(null, { status: 204 }), seen);
    await fetch(`http://127.0.0.1:${port}/mcp`, {
      method: "POST",
      headers: { authorization: "Bearer good", "x-forwarded-proto": "https" },
      body: "{}",
    });
    expect(seen[0]?.url).toBe("https://127.0.0.1:3000/mcp");
  });

  it("only the first value of X-Forwarded-Proto counts: the hop nearest the client", async () => {
    const seen: Seen[] = [];
    const port = await serve(async () => new Response(null, { status: 204 }), seen);
    for (const proto of ["https, http", "http, https", "wss"]) {
      await fetch(`http://127.0.0.1:${port}/mcp`, {
        method: "POST",
        headers: { authorization: "Bearer good", "x-forwarded-proto": proto },
        body: "{}",
      });
    }
    expect(seen.map((s) => new URL(s.url).protocol)).toEqual(["https:", "http:", "http:"]);
  });

  it("authenticates once and hands the principal it found to the handler", async () => {
    const seen: Seen[] = [];
    const authentications = { count: 0 };
    const port = await serve(async () => new Response(null, { status: 204 }), seen, authentications);
    await fetch(`http://127.0.0.1:${port}/api/calls`, {
      method: "POST",
      headers: { authorization: "Bearer good" },
      body: "{}",
    });
    await fetch(`http://127.0.0.1:${port}/api/calls`, { headers: { authorization: "Bearer wrong" } });
    expect(authentications.count).toBe(2);
    expect(seen.map((s) => s.principal)).toEqual([good, null]);
  });
});
