/**
 * What the outbound HTTP guard's end-to-end tests share (PRODUCT.md §4): real undici Agents
 * dialling real node:http(s) servers on loopback. Public names are simulated with an injected
 * resolver and, where a reachable "public" host is needed, an injected policy under which
 * 127.0.0.2 counts as public (Linux routes all of 127/8 to lo). Traffic goes to loopback only;
 * the safety net in test/fixtures/net/loopback-only.ts makes any other dial fail before it
 * leaves, so a regressed guard fails these tests instead of sending packets.
 */
import type dns from "node:dns";
import http, { type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from "node:http";
import https from "node:https";
import net, { isIP } from "node:net";
import type { Agent } from "undici";
import { afterAll, afterEach, beforeAll, vi } from "vitest";
import { installLoopbackOnly } from "@/test/fixtures/net/loopback-only";
import { refusedAddressKind } from "./address-policy";
import { createGuardedAgent, type GuardOptions, guardedFetch } from "./guarded-fetch";

// ---------------------------------------------------------------------------------------------
// Loopback servers that record what reached them

export interface Seen {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: string;
  /** Arrival time, ms (monotonic). */
  at: number;
}

export interface TestServer {
  host: string;
  port: number;
  requests: Seen[];
  /** TCP connections accepted. */
  connections: number;
}

export type Handler = (req: IncomingMessage, res: ServerResponse, seen: Seen) => void;

export const ok: Handler = (_req, res) => {
  res.end("ok");
};

const servers: (http.Server | https.Server)[] = [];

export async function listen(
  host: string,
  handler: Handler = ok,
  opts: { port?: number; tls?: { key: string; cert: string } } = {},
): Promise<TestServer> {
  const state: TestServer = { host, port: 0, requests: [], connections: 0 };
  const onRequest = (req: IncomingMessage, res: ServerResponse) => {
    const seen: Seen = {
      method: req.method ?? "",
      url: req.url ?? "",
      headers: req.headers,
      body: "",
      at: performance.now(),
    };
    state.requests.push(seen);
    req.setEncoding("utf8");
    req.on("data", (chunk: string) => {
      seen.body += chunk;
    });
    req.on("end", () => handler(req, res, seen));
  };
  const server = opts.tls ? https.createServer(opts.tls, onRequest) : http.createServer(onRequest);
  server.on("connection", () => {
    state.connections++;
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen({ host, port: opts.port ?? 0, ipv6Only: isIP(host) === 6 }, () => {
      server.off("error", reject);
      resolve();
    });
  });
  servers.push(server);
  state.port = (server.address() as net.AddressInfo).port;
  return state;
}

/** A server on `host` and another on 127.0.0.1 at the same port (so a rebound name would reach it). */
export async function listenTwin(host: string, handler: Handler): Promise<[TestServer, TestServer]> {
  for (let attempt = 0; ; attempt++) {
    const first = await listen(host, handler);
    try {
      return [first, await listen("127.0.0.1", ok, { port: first.port })];
    } catch (err) {
      if (attempt >= 5) throw err;
    }
  }
}

async function canListen(host: string): Promise<boolean> {
  const server = net.createServer();
  return new Promise((resolve) => {
    server.once("error", () => resolve(false));
    server.listen({ host, port: 0, ipv6Only: isIP(host) === 6 }, () => server.close(() => resolve(true)));
  });
}

export const IPV6 = await canListen("::1");
export const NO_IPV6 = "::1 cannot be bound on this machine, so there is no IPv6 loopback to aim at";
export const HAS_127_0_0_2 = await canListen("127.0.0.2");
export const NO_127_0_0_2 = "127.0.0.2 cannot be bound here, and it plays the public host";

// ---------------------------------------------------------------------------------------------
// Simulated DNS and the clients under test

type Answer = string | string[];

/**
 * A resolver answering from a table, in the form Node asks for: an array of {address, family}
 * with `all: true` (what Node 20 uses with autoSelectFamily), else (address, family).
 */
export function fakeLookup(
  answers: Record<string, Answer | (() => Answer)>,
  forms: string[] = [],
): typeof dns.lookup {
  return ((hostname: string, options: unknown, callback?: (...a: unknown[]) => void) => {
    const cb = (typeof options === "function" ? options : callback) as (...a: unknown[]) => void;
    const all =
      typeof options === "object" && options !== null && (options as dns.LookupOptions).all === true;
    forms.push(all ? "all" : "single");
    const entry = answers[hostname];
    if (entry === undefined) {
      const err = Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: "ENOTFOUND" });
      process.nextTick(cb, err);
      return;
    }
    const list = [typeof entry === "function" ? entry() : entry].flat();
    const first = list[0] ?? "";
    if (all)
      process.nextTick(
        cb,
        null,
        list.map((address) => ({ address, family: isIP(address) })),
      );
    else process.nextTick(cb, null, first, isIP(first));
  }) as unknown as typeof dns.lookup;
}

/** 127.0.0.2 plays a public host; everything else is judged by the real policy. */
export const PUBLIC_127_0_0_2 = (ip: string) => (ip === "127.0.0.2" ? null : refusedAddressKind(ip));

const agents: Agent[] = [];

function agent(opts: Partial<GuardOptions> = {}): Agent {
  const a = createGuardedAgent({ server: "test", allowPrivate: false, connectTimeoutMs: 2000, ...opts });
  agents.push(a);
  return a;
}

export function client(
  opts: Partial<GuardOptions> & { credentialHeaders?: string[]; minIntervalMs?: number } = {},
): (url: string, init?: RequestInit) => Promise<Response> {
  const { credentialHeaders = [], minIntervalMs, ...guard } = opts;
  const a = agent(guard);
  return guardedFetch(a, {
    server: "test",
    allowPrivate: guard.allowPrivate ?? false,
    credentialHeaders,
    minIntervalMs,
  }) as (url: string, init?: RequestInit) => Promise<Response>;
}

/** The rejection of `promise`; fails the test if it resolves. */
export async function failure(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (err) {
    if (err instanceof Error) return err;
    throw new Error(`rejected with a non-Error: ${String(err)}`);
  }
  throw new Error("expected the request to fail, but it succeeded");
}

/** The error and its causes, outermost first. */
export function chain(err: Error): Error[] {
  const out: Error[] = [];
  for (let e: unknown = err; e instanceof Error && out.length < 10; e = e.cause) out.push(e);
  return out;
}

export function messages(err: Error): string[] {
  return chain(err).map((e) => e.message);
}

/**
 * Registers the file's hooks: the loopback-only safety net for the whole file, and after each
 * test the env stubs undone and every agent and server this module made closed. Call it once at
 * the top of a test file, before its describes.
 */
export function registerGuardHooks(): void {
  let removeSafetyNet: () => void = () => {};

  beforeAll(() => {
    removeSafetyNet = installLoopbackOnly();
  });

  afterAll(() => {
    removeSafetyNet();
  });

  afterEach(async () => {
    vi.unstubAllEnvs();
    await Promise.all(agents.splice(0).map((a) => a.destroy()));
    await Promise.all(
      servers.splice(0).map(
        (s) =>
          new Promise<void>((resolve) => {
            s.closeAllConnections();
            s.close(() => resolve());
          }),
      ),
    );
  });
}

// ---------------------------------------------------------------------------------------------
// Names and servers for the redirect tests

/** public-a.test and public-b.test play public hosts (127.0.0.2); private.test is loopback. */
export const DNS = fakeLookup({
  "public-a.test": "127.0.0.2",
  "public-b.test": "127.0.0.2",
  "private.test": "127.0.0.1",
});

/** A server redirecting every request to `location(seen)` with `status`. */
export function redirecting(location: (seen: Seen) => string, status = 302): Handler {
  return (_req, res, seen) => {
    res.writeHead(status, { location: location(seen) });
    res.end();
  };
}
