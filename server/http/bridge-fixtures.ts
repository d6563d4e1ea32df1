/**
 * What the bridge's tests share: a real node:http server on loopback whose handler does what
 * server/main.ts does (readBody → webRequest → a web handler → sendResponse, and a 413 with
 * `Connection: close` when readBody gives up), and real node:http clients to talk to it.
 */
import { once } from "node:events";
import http, { type IncomingHttpHeaders, type IncomingMessage } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { afterEach, expect } from "vitest";
import { BRIDGE_MAX_BODY_BYTES, readBody, sendResponse, webRequest } from "./node-bridge";

export type WebHandler = (req: Request) => Response | Promise<Response>;
export type ExtraHeaders = readonly { key: string; value: string }[];

export interface Bridge {
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

export interface Deferred<T> {
  promise: Promise<T>;
  resolve: (value: T) => void;
}

export function deferred<T = void>(): Deferred<T> {
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

/**
 * Call once at the top level of a test file: after each test, closes the agents and servers
 * it opened and fails it if any test server threw.
 */
export function cleanUpBridges(): void {
  afterEach(async () => {
    for (const a of agents.splice(0)) a.destroy();
    for (const server of servers.splice(0)) {
      server.closeAllConnections();
      await new Promise<void>((resolve, reject) => server.close((err) => (err ? reject(err) : resolve())));
    }
    clientErrors.length = 0;
    expect(serverErrors.splice(0)).toEqual([]);
  });
}

/**
 * A loopback server that answers as server/main.ts does: bodies over `max` (default the
 * bridge's backstop) get a 413 on a connection that is then closed; everything else goes through
 * webRequest → `handler` → sendResponse with `extraHeaders`.
 */
export async function serve(
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
export function keepAliveAgent(): http.Agent {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  agents.push(agent);
  return agent;
}

/** Opens a request to `bridge`; the caller writes and ends it. Client errors are recorded. */
export function open(bridge: Bridge, opts: http.RequestOptions = {}): http.ClientRequest {
  const req = http.request({ host: "127.0.0.1", port: bridge.port, agent: false, ...opts });
  req.on("error", (err) => clientErrors.push(err));
  return req;
}

export function responseOf(req: http.ClientRequest): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    req.once("response", resolve);
    req.once("error", reject);
  });
}

export function socketOf(req: http.ClientRequest): Promise<Socket> {
  return new Promise((resolve) => req.once("socket", resolve));
}

export async function bodyText(res: IncomingMessage): Promise<string> {
  res.setEncoding("utf8");
  let text = "";
  for await (const chunk of res) text += chunk as string;
  return text;
}

/** Sends a whole request and reads the whole answer. */
export async function send(
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
export async function readUntil(chunks: AsyncIterator<unknown>, text: string): Promise<string> {
  let received = "";
  while (!received.includes(text)) {
    const next = await chunks.next();
    if (next.done) break;
    received += String(next.value);
  }
  return received;
}

export const encoder = new TextEncoder();
