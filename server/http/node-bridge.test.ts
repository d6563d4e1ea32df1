/**
 * The Node ↔ web bridge that server/main.ts puts in front of `/api/calls` and `/mcp`, end to
 * end: a real node:http server on loopback whose handler does what server/main.ts does
 * (readBody → webRequest → a web handler → sendResponse, and a 413 with `Connection: close` when
 * readBody gives up), talked to by real node:http clients.
 */
import { randomBytes } from "node:crypto";
import { once } from "node:events";
import http, { type IncomingHttpHeaders, type IncomingMessage } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import {
  BRIDGE_MAX_BODY_BYTES,
  MAX_REQUEST_BODY_BYTES,
  readBody,
  sendResponse,
  webRequest,
} from "./node-bridge";

type WebHandler = (req: Request) => Response | Promise<Response>;
type ExtraHeaders = readonly { key: string; value: string }[];

interface Bridge {
  port: number;
  origin: string;
  /** The Node request headers, one entry per request, in arrival order. */
  heads: IncomingHttpHeaders[];
  /** What readBody resolved to, one entry per request, in arrival order. */
  bodies: (Buffer | null)[];
  /** The web requests handed to the handler. */
  requests: Request[];
  /** Per request handed to the handler: resolves once its Node response has closed. */
  closed: Promise<void>[];
  /** Per request: resolves once the server has finished answering it (sendResponse settled). */
  answered: Promise<void>[];
}

interface Deferred<T> {
  promise: Promise<T>;
  resolve: (value: T) => void;
}

function deferred<T = void>(): Deferred<T> {
  let resolve: (value: T) => void = () => {};
  const promise = new Promise<T>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

const servers: http.Server[] = [];
const agents: http.Agent[] = [];
/** Errors thrown inside the test servers; any of them fails the test that caused it. */
const serverErrors: unknown[] = [];
/** Errors seen by the clients; recorded so that a client the test destroys cannot crash the run. */
const clientErrors: Error[] = [];

afterEach(async () => {
  for (const a of agents.splice(0)) a.destroy();
  for (const server of servers.splice(0)) {
    server.closeAllConnections();
    await new Promise<void>((resolve, reject) => server.close((err) => (err ? reject(err) : resolve())));
  }
  clientErrors.length = 0;
  expect(serverErrors.splice(0)).toEqual([]);
});

/**
 * A loopback server that answers as server/main.ts does: bodies over `max` (default the
 * bridge's backstop) get a 413 on a connection that is then closed; everything else goes through
 * webRequest → `handler` → sendResponse with `extraHeaders`.
 */
async function serve(
  handler: WebHandler,
  opts: { max?: number; extraHeaders?: ExtraHeaders } = {},
): Promise<Bridge> {
  const bridge: Bridge = {
    port: 0,
    origin: "",
    heads: [],
    bodies: [],
    requests: [],
    closed: [],
    answered: [],
  };
  const server = http.createServer((req, res) => {
    bridge.heads.push(req.headers);
    const answer = async () => {
      const body = await readBody(req, opts.max ?? BRIDGE_MAX_BODY_BYTES);
      bridge.bodies.push(body);
      if (body === null) {
        res.setHeader("Connection", "close");
        const tooLarge = { error: { code: "payload_too_large", message: "request body too large" } };
        await sendResponse(res, Response.json(tooLarge, { status: 413 }), opts.extraHeaders);
        return;
      }
      const request = webRequest(req, res, bridge.origin, body);
      bridge.requests.push(request);
      // Registered after webRequest's own listener, so it runs after that one has.
      bridge.closed.push(once(res, "close").then(() => undefined));
      await sendResponse(res, await handler(request), opts.extraHeaders);
    };
    const done = answer().catch((err: unknown) => {
      serverErrors.push(err);
      res.destroy();
    });
    bridge.answered.push(done);
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      server.off("error", reject);
      resolve();
    });
  });
  servers.push(server);
  bridge.port = (server.address() as AddressInfo).port;
  bridge.origin = `http://127.0.0.1:${bridge.port}`;
  return bridge;
}

/** A keep-alive agent, so that a `Connection: close` in an answer is the server's own doing. */
function keepAliveAgent(): http.Agent {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  agents.push(agent);
  return agent;
}

/** Opens a request to `bridge`; the caller writes and ends it. Client errors are recorded. */
function open(bridge: Bridge, opts: http.RequestOptions = {}): http.ClientRequest {
  const req = http.request({ host: "127.0.0.1", port: bridge.port, agent: false, ...opts });
  req.on("error", (err) => clientErrors.push(err));
  return req;
}

function responseOf(req: http.ClientRequest): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    req.once("response", resolve);
    req.once("error", reject);
  });
}

function socketOf(req: http.ClientRequest): Promise<Socket> {
  return new Promise((resolve) => req.once("socket", resolve));
}

async function bodyText(res: IncomingMessage): Promise<string> {
  res.setEncoding("utf8");
  let text = "";
  for await (const chunk of res) text += chunk as string;
  return text;
}

/** Sends a whole request and reads the whole answer. */
async function send(
  bridge: Bridge,
  opts: http.RequestOptions & { body?: Buffer | string } = {},
): Promise<{ res: IncomingMessage; text: string }> {
  const { body, ...options } = opts;
  const req = open(bridge, options);
  const response = responseOf(req);
  req.end(body);
  const res = await response;
  return { res, text: await bodyText(res) };
}

/** Reads `res` until `text` has arrived (or the body ends); resolves with what arrived. */
async function readUntil(chunks: AsyncIterator<unknown>, text: string): Promise<string> {
  let received = "";
  while (!received.includes(text)) {
    const next = await chunks.next();
    if (next.done) break;
    received += String(next.value);
  }
  return received;
}

const encoder = new TextEncoder();

describe("requests reach the web handler", () => {
  it("method, path with query, headers (a repeated one too) and body reach the web handler unchanged", async () => {
    const seen = deferred<{ method: string; url: string; headers: Record<string, string>; body: Buffer }>();
    const bridge = await serve(async (req) => {
      seen.resolve({
        method: req.method,
        url: req.url,
        headers: Object.fromEntries(req.headers),
        body: Buffer.from(await req.arrayBuffer()),
      });
      return new Response(null, { status: 204 });
    });
    // Big enough to arrive in several reads, and not valid UTF-8, so no decoding can hide.
    const body = Buffer.concat([Buffer.from([0x00, 0xff, 0xfe, 0x80]), randomBytes(300 * 1024)]);
    const path = "/api/things/a%20b?x=1&y=two%20words&x=3&empty=";
    const { res } = await send(bridge, {
      method: "PUT",
      path,
      headers: {
        "content-type": "application/octet-stream",
        authorization: "Bearer gh_test",
        "x-multi": ["first", "second"],
        cookie: ["a=1", "b=2"],
      },
      body,
    });
    expect(res.statusCode).toBe(204);

    const got = await seen.promise;
    expect(got.method).toBe("PUT");
    expect(got.url).toBe(`${bridge.origin}${path}`);
    expect(got.headers).toEqual({
      authorization: "Bearer gh_test",
      connection: "close",
      "content-length": String(body.length),
      "content-type": "application/octet-stream",
      // Node joins repeated cookie lines as a browser's single Cookie header would read.
      cookie: "a=1; b=2",
      host: `127.0.0.1:${bridge.port}`,
      "x-multi": "first, second",
    });
    expect(got.body.equals(body)).toBe(true);
  });

  it("a GET has an empty body and no body is given to the Request", async () => {
    const bridge = await serve(async (req) => {
      const hadBody = req.body !== null;
      return Response.json({ method: req.method, hadBody, text: await req.text() });
    });
    // A GET that carries a body anyway: it is neither read nor handed on (a web GET Request
    // with a body cannot even be built), and the connection still serves the next request.
    const agent = keepAliveAgent();
    const first = await send(bridge, {
      agent,
      path: "/first",
      headers: { "content-length": "7" },
      body: "ignored",
    });
    const second = await send(bridge, { agent, path: "/second" });

    for (const { res, text } of [first, second]) {
      expect(res.statusCode).toBe(200);
      expect(JSON.parse(text)).toEqual({ method: "GET", hadBody: false, text: "" });
    }
    expect(bridge.bodies.map((b) => b?.length)).toEqual([0, 0]);
    expect(bridge.requests.map((r) => new URL(r.url).pathname)).toEqual(["/first", "/second"]);
    expect(bridge.requests.map((r) => r.body)).toEqual([null, null]);
  });
});

describe("responses reach the client", () => {
  it("each Set-Cookie of a response goes out as its own header line", async () => {
    const cookies = ["a=1; Path=/; HttpOnly", "b=2; Expires=Wed, 21 Oct 2037 07:28:00 GMT; SameSite=Strict"];
    const bridge = await serve(() => {
      const headers = new Headers({ "content-type": "text/plain" });
      for (const c of cookies) headers.append("set-cookie", c);
      return new Response("ok", { headers });
    });
    const { res, text } = await send(bridge);
    expect(text).toBe("ok");
    expect(res.headers["set-cookie"]).toEqual(cookies);
    const lines: string[] = [];
    for (let i = 0; i < res.rawHeaders.length; i += 2) {
      if (res.rawHeaders[i]?.toLowerCase() === "set-cookie") lines.push(res.rawHeaders[i + 1] ?? "");
    }
    expect(lines).toEqual(cookies);
  });

  it("extra headers are added unless the response sets the same header itself (the response wins)", async () => {
    const extraHeaders = [
      { key: "X-Frame-Options", value: "DENY" },
      { key: "Referrer-Policy", value: "no-referrer" },
    ];
    const bridge = await serve(
      () =>
        new Response("ok", { headers: { "x-frame-options": "SAMEORIGIN", "content-type": "text/plain" } }),
      { extraHeaders },
    );
    const { res } = await send(bridge);
    expect(res.headers["referrer-policy"]).toBe("no-referrer");
    expect(res.headers["x-frame-options"]).toBe("SAMEORIGIN");
    expect(res.headers["content-type"]).toBe("text/plain");
    const frameLines = res.rawHeaders.filter((h, i) => i % 2 === 0 && h.toLowerCase() === "x-frame-options");
    expect(frameLines).toHaveLength(1);
  });

  it("an event-stream body reaches the client chunk by chunk before the stream ends", async () => {
    const release = deferred();
    const bridge = await serve(() => {
      let pulls = 0;
      const body = new ReadableStream<Uint8Array>({
        async pull(controller) {
          pulls++;
          if (pulls === 1) {
            controller.enqueue(encoder.encode("data: one\n\n"));
            return;
          }
          // The second event exists only once the client has shown it received the first.
          await release.promise;
          controller.enqueue(encoder.encode("data: two\n\n"));
          controller.close();
        },
      });
      return new Response(body, { headers: { "content-type": "text/event-stream" } });
    });
    const req = open(bridge, { path: "/events" });
    const response = responseOf(req);
    req.end();
    const res = await response;
    expect(res.headers["content-type"]).toBe("text/event-stream");
    res.setEncoding("utf8");
    const chunks = res[Symbol.asyncIterator]();

    const first = await readUntil(chunks, "\n\n");
    expect(first).toBe("data: one\n\n");
    expect(res.complete).toBe(false);

    release.resolve();
    const rest = await readUntil(chunks, "\n\ndata: two\n\n");
    expect(rest).toBe("data: two\n\n");
    expect((await chunks.next()).done).toBe(true);
    expect(res.complete).toBe(true);
  });
});

describe("a client that goes away", () => {
  it("the web request's signal aborts when the client goes away before the response is finished", async () => {
    const entered = deferred();
    const abortedSeen = deferred<boolean>();
    const bridge = await serve(async (req) => {
      if (new URL(req.url).pathname === "/quick") return new Response("done");
      entered.resolve();
      await new Promise<void>((resolve) =>
        req.signal.addEventListener("abort", () => resolve(), { once: true }),
      );
      abortedSeen.resolve(req.signal.aborted);
      return new Response(null, { status: 204 });
    });

    // A finished response does not count as the client going away.
    expect((await send(bridge, { path: "/quick" })).text).toBe("done");
    await bridge.closed[0];
    expect(bridge.requests[0]?.signal.aborted).toBe(false);

    const req = open(bridge, { path: "/held", method: "POST" });
    req.end("{}");
    await entered.promise;
    req.destroy();
    expect(await abortedSeen.promise).toBe(true);
    await bridge.answered[1];
  });

  it("when the client goes away during a streamed response the body's stream is cancelled", async () => {
    const cancelled = deferred<unknown>();
    const bridge = await serve(() => {
      let pulls = 0;
      const body = new ReadableStream<Uint8Array>({
        pull(controller) {
          pulls++;
          if (pulls === 1) {
            controller.enqueue(encoder.encode("data: one\n\n"));
            return;
          }
          // Nothing more until the stream is cancelled: an event stream with nothing to say.
          return cancelled.promise.then(() => undefined);
        },
        cancel(reason) {
          cancelled.resolve(reason);
        },
      });
      return new Response(body, { headers: { "content-type": "text/event-stream" } });
    });
    const req = open(bridge, { path: "/events" });
    const response = responseOf(req);
    req.end();
    const res = await response;
    res.setEncoding("utf8");
    expect(await readUntil(res[Symbol.asyncIterator](), "\n\n")).toBe("data: one\n\n");

    res.socket.destroy();
    await cancelled.promise;
    // And the server is done with the request: sendResponse returned instead of waiting on.
    await bridge.answered[0];
  });
});

describe("a client that left before the answer", () => {
  it("sendResponse returns at once and releases the body's producer when the client left while the handler worked", async () => {
    const entered = deferred();
    const cancelled = deferred<unknown>();
    const bridge = await serve(async (req) => {
      entered.resolve();
      await new Promise<void>((resolve) =>
        req.signal.addEventListener("abort", () => resolve(), { once: true }),
      );
      // A held call answers after its client gave up: with a body nobody will read.
      const body = new ReadableStream<Uint8Array>({
        pull: (controller) => controller.enqueue(encoder.encode("x".repeat(64 * 1024))),
        cancel: (reason) => cancelled.resolve(reason),
      });
      return new Response(body, { headers: { "content-type": "text/event-stream" } });
    });
    const req = open(bridge, { path: "/held", method: "POST" });
    req.on("error", () => {});
    req.end("{}");
    await entered.promise;
    req.destroy();
    await cancelled.promise;
    await bridge.answered[0];
  });
});

describe("bodies over the limit", () => {
  it("the bridge's backstop sits above the 4 MiB handler limit, so handlers answer first in their own format", () => {
    expect(MAX_REQUEST_BODY_BYTES).toBe(4 * 1024 * 1024);
    expect(BRIDGE_MAX_BODY_BYTES).toBeGreaterThan(MAX_REQUEST_BODY_BYTES);
  });

  it("a declared Content-Length over the limit resolves readBody to null before the body is sent, and 413 goes out with Connection: close", async () => {
    const bridge = await serve(() => new Response("handler ran"));
    const req = open(bridge, {
      method: "POST",
      path: "/api/calls",
      agent: keepAliveAgent(),
      headers: { "content-type": "application/json", "content-length": String(BRIDGE_MAX_BODY_BYTES + 1) },
    });
    const response = responseOf(req);
    const socket = socketOf(req);
    // Only the head goes out; the answer has to come without a byte of the body.
    req.flushHeaders();
    const res = await response;

    expect(res.statusCode).toBe(413);
    expect(res.headers.connection).toBe("close");
    expect(JSON.parse(await bodyText(res))).toMatchObject({ error: { code: "payload_too_large" } });
    expect(bridge.bodies).toEqual([null]);
    expect(bridge.requests).toEqual([]);
    // The server closes the connection: the unread body must not be taken for a next request.
    await once(await socket, "close");
  });

  it("a chunked body that passes the limit resolves readBody to null, and 413 goes out with Connection: close", async () => {
    const max = 1024;
    const bridge = await serve(async (req) => new Response(String((await req.arrayBuffer()).byteLength)), {
      max,
    });

    // Exactly the limit, chunked, is read whole.
    const atLimit = open(bridge, { method: "POST", path: "/at-limit" });
    const atLimitResponse = responseOf(atLimit);
    atLimit.write(Buffer.alloc(max / 2, "a"));
    atLimit.end(Buffer.alloc(max / 2, "b"));
    const accepted = await atLimitResponse;
    expect(await bodyText(accepted)).toBe(String(max));
    expect(bridge.bodies[0]?.length).toBe(max);

    // One over, and the request is never finished: readBody gives up as the limit is passed.
    const over = open(bridge, { method: "POST", path: "/over", agent: keepAliveAgent() });
    const overResponse = responseOf(over);
    const socket = socketOf(over);
    over.write(Buffer.alloc(max / 2, "a"));
    over.write(Buffer.alloc(max / 2 + 1, "b"));
    const res = await overResponse;

    expect(res.statusCode).toBe(413);
    expect(res.headers.connection).toBe("close");
    expect(JSON.parse(await bodyText(res))).toMatchObject({ error: { code: "payload_too_large" } });
    // Both went chunked, so the limit is the bytes that arrived, not a declared length.
    for (const head of bridge.heads) {
      expect(head["transfer-encoding"]).toBe("chunked");
      expect(head["content-length"]).toBeUndefined();
    }
    expect(bridge.heads).toHaveLength(2);
    expect(bridge.bodies).toHaveLength(2);
    expect(bridge.bodies[1]).toBeNull();
    expect(bridge.requests).toHaveLength(1);
    await once(await socket, "close");
  });
});
