/**
 * The per-address sign-in bucket as the production server feeds it: a real loopback HTTP server
 * that does what server/main.ts does (stamp the client's address, then bridge to the sign-in
 * route), and real sockets from different loopback addresses.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { loadRoute, type RouteHandler } from "@/test/support/runtime";
import {
  BRIDGE_MAX_BODY_BYTES,
  clientAddressStamper,
  readBody,
  sendResponse,
  webRequest,
} from "../http/node-bridge";
import { CLIENT_ADDRESS_HEADER, clientAddressOf, trustedProxyCount } from "../request";
import { PER_ADDRESS } from "./access";
import { runtimePerTest } from "./auth-fixtures";

const start = runtimePerTest();

interface Edge {
  /** The address header each request reached the route with, in arrival order. */
  stamped: (string | undefined)[];
  /** Posts a wrong sign-in for `name`; resolves with the status. */
  signIn(name: string, opts?: { from?: string; headers?: Record<string, string> }): Promise<number>;
}

const servers: http.Server[] = [];
afterEach(async () => {
  for (const server of servers.splice(0)) {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
});

async function startEdge(env: Record<string, string> = {}): Promise<Edge> {
  const stamp = clientAddressStamper(env);
  const post = (await loadRoute("session/route.ts")).POST as RouteHandler;
  const stamped: (string | undefined)[] = [];
  let origin = "";
  const server = http.createServer((req, res) => {
    stamp(req);
    const header = req.headers[CLIENT_ADDRESS_HEADER];
    stamped.push(Array.isArray(header) ? header.join() : header);
    void (async () => {
      const body = await readBody(req, BRIDGE_MAX_BODY_BYTES);
      const request = webRequest(req, res, origin, body ?? Buffer.alloc(0));
      await sendResponse(res, await post(request, { params: Promise.resolve({}) }));
    })();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  servers.push(server);
  const port = (server.address() as AddressInfo).port;
  // The name Gatehouse answers to (its allow-list is for PORT, 3000 by default), whatever port this
  // stand-in listens on.
  origin = "http://127.0.0.1:3000";
  return {
    stamped,
    signIn(name, opts = {}) {
      return new Promise((resolve, reject) => {
        const req = http.request({
          host: "127.0.0.1",
          port,
          method: "POST",
          path: "/api/session",
          agent: false,
          localAddress: opts.from ?? "127.0.0.1",
          headers: { host: "127.0.0.1:3000", origin, "content-type": "application/json", ...opts.headers },
        });
        req.once("error", reject);
        req.once("response", (res) => {
          res.resume();
          res.once("end", () => resolve(res.statusCode ?? 0));
        });
        req.end(JSON.stringify({ name, password: "not-the-password" }));
      });
    },
  };
}

/** How many of `statuses` are each status. */
function tally(statuses: number[]): Record<number, number> {
  const out: Record<number, number> = {};
  for (const s of statuses) out[s] = (out[s] ?? 0) + 1;
  return out;
}

const SPRAY = PER_ADDRESS.max + 10;

describe("the client's address, as the edge reports it", () => {
  it("one client spraying names is throttled by its socket address; another address is not", async () => {
    await start();
    const edge = await startEdge();
    const statuses = await Promise.all(Array.from({ length: SPRAY }, (_, i) => edge.signIn(`name-${i}`)));
    expect(tally(statuses)).toEqual({ 401: PER_ADDRESS.max, 429: 10 });
    expect(await edge.signIn("name-fresh", { from: "127.0.0.2" })).toBe(401);
    expect(edge.stamped.at(-1)).toBe("127.0.0.2");
  }, 30_000);

  it("a forged client-address header from the client is ignored", async () => {
    await start();
    const edge = await startEdge();
    const statuses = await Promise.all(
      Array.from({ length: SPRAY }, (_, i) =>
        edge.signIn(`name-${i}`, { headers: { [CLIENT_ADDRESS_HEADER]: `10.0.0.${i}` } }),
      ),
    );
    expect(tally(statuses)).toEqual({ 401: PER_ADDRESS.max, 429: 10 });
    expect(new Set(edge.stamped)).toEqual(new Set(["127.0.0.1"]));
  }, 30_000);

  it("X-Forwarded-For is the client's own word unless a proxy is trusted", async () => {
    await start();
    const edge = await startEdge({ GATEHOUSE_TRUST_PROXY: "" });
    const statuses = await Promise.all(
      Array.from({ length: SPRAY }, (_, i) =>
        edge.signIn(`name-${i}`, { headers: { "x-forwarded-for": `203.0.113.${i}` } }),
      ),
    );
    expect(tally(statuses)).toEqual({ 401: PER_ADDRESS.max, 429: 10 });
  }, 30_000);

  it("with GATEHOUSE_TRUST_PROXY=1, X-Forwarded-For's right-most entry is the client", async () => {
    await start();
    const edge = await startEdge({ GATEHOUSE_TRUST_PROXY: "1" });
    // Many clients behind one proxy: each its own bucket.
    const many = await Promise.all(
      Array.from({ length: SPRAY }, (_, i) =>
        edge.signIn(`name-${i}`, { headers: { "x-forwarded-for": `203.0.113.${i}` } }),
      ),
    );
    expect(tally(many)).toEqual({ 401: SPRAY });
    expect(edge.stamped.slice(0, SPRAY).sort()).toEqual(
      Array.from({ length: SPRAY }, (_, i) => `203.0.113.${i}`).sort(),
    );
    // One client that writes its own entries in front of the proxy's gains nothing by it.
    const one = await Promise.all(
      Array.from({ length: PER_ADDRESS.max + 1 }, (_, i) =>
        edge.signIn(`other-${i}`, { headers: { "x-forwarded-for": `10.9.9.${i}, 198.51.100.5` } }),
      ),
    );
    expect(tally(one)).toEqual({ 401: PER_ADDRESS.max, 429: 1 });
  }, 30_000);
});

describe("reading the client's address", () => {
  it("takes the socket's address unless proxies are trusted, then the hop the last trusted proxy saw", () => {
    expect(clientAddressOf("127.0.0.1", "203.0.113.1", 0)).toBe("127.0.0.1");
    expect(clientAddressOf("127.0.0.1", "10.0.0.1, 203.0.113.1", 1)).toBe("203.0.113.1");
    expect(clientAddressOf("127.0.0.1", "10.0.0.1, 203.0.113.1, 192.0.2.9", 2)).toBe("203.0.113.1");
    expect(clientAddressOf("127.0.0.1", "203.0.113.1", 3)).toBe("203.0.113.1");
    expect(clientAddressOf("127.0.0.1", "[2001:db8::1]:443", 1)).toBe("2001:db8::1");
    expect(clientAddressOf("127.0.0.1", "203.0.113.1:5678", 1)).toBe("203.0.113.1");
    // Not an address, or no header: the proxy's own address.
    expect(clientAddressOf("127.0.0.1", "unknown", 1)).toBe("127.0.0.1");
    expect(clientAddressOf("127.0.0.1", null, 1)).toBe("127.0.0.1");
    expect(clientAddressOf(undefined, null, 0)).toBeNull();
  });

  it("GATEHOUSE_TRUST_PROXY is a number of proxies, true or false", () => {
    expect(trustedProxyCount(undefined)).toBe(0);
    expect(trustedProxyCount("")).toBe(0);
    expect(trustedProxyCount("0")).toBe(0);
    expect(trustedProxyCount("false")).toBe(0);
    expect(trustedProxyCount("1")).toBe(1);
    expect(trustedProxyCount("TRUE")).toBe(1);
    expect(trustedProxyCount("2")).toBe(2);
    expect(trustedProxyCount("yes")).toBeNull();
    expect(trustedProxyCount("10.0.0.0/8")).toBeNull();
  });
});
