/**
 * The Host check in front of everything (DNS-rebinding protection): a real loopback HTTP server
 * with the production server's own request listener (`gatehouseListener`, which server/main.ts
 * runs: the same allow-list, the real hot-path handlers of `/api/calls` and `/mcp`), and, standing in
 * for Next, a handler that serves the real route modules under app/api and answers a page for
 * anything else, recording every request it is handed. Also `route()`'s own check, the one
 * `npm run dev` (no front door) relies on.
 */
import http, { type IncomingHttpHeaders } from "node:http";
import net, { type AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { issueSetupCode } from "@/server/auth/users";
import type { Runtime } from "@/server/runtime";
import { closeDb } from "@/server/store/db";
import { sessions, users } from "@/server/store/schema";
import {
  createAgentToken,
  createTestUser,
  loadRoute,
  type RouteHandler,
  request,
  startTestRuntime,
  type TestRuntime,
  type TestRuntimeOptions,
} from "@/test/support/runtime";
import { gatehouseListener } from "./front-door";
import { BRIDGE_MAX_BODY_BYTES, readBody, sendResponse, webRequest } from "./node-bridge";

const EVIL = "evil.example:3000";
const REFUSED = `requests for host "${EVIL}" are not accepted; add it to agentEndpoint.allowedHosts in the config if Gatehouse is reached under that name`;

/** What Next serves in these tests: the route files by path, and a page for everything else. */
const API_FILES: Record<string, string> = {
  "/api/session": "session/route.ts",
  "/api/setup": "setup/route.ts",
  "/api/me": "me/route.ts",
};

interface Door {
  port: number;
  /** `METHOD path` of every request the stand-in for Next was handed. */
  nextSaw: string[];
}

interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  text: string;
}

let rt: TestRuntime | undefined;
const servers: http.Server[] = [];
afterEach(async () => {
  for (const server of servers.splice(0)) {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
  await rt?.stop();
  rt = undefined;
});

async function start(opts: TestRuntimeOptions = {}): Promise<Runtime> {
  rt = await startTestRuntime(opts);
  return rt.runtime;
}

/** The front door over `runtime`, listening on a free loopback port. */
async function openDoor(runtime: Runtime): Promise<Door> {
  const nextSaw: string[] = [];
  const next = async (req: http.IncomingMessage, res: http.ServerResponse) => {
    const url = req.url ?? "/";
    nextSaw.push(`${req.method} ${url}`);
    const file = API_FILES[url.split("?")[0] ?? ""];
    if (!file) {
      await sendResponse(res, new Response("a page", { headers: { "Content-Type": "text/html" } }));
      return;
    }
    const handler = (await loadRoute(file))[req.method ?? ""] as RouteHandler;
    const body = (await readBody(req, BRIDGE_MAX_BODY_BYTES)) ?? Buffer.alloc(0);
    // Next addresses its request to its own host and port, in the scheme X-Forwarded-Proto says.
    const scheme = req.headers["x-forwarded-proto"] === "https" ? "https" : "http";
    const web = webRequest(req, res, `${scheme}://127.0.0.1:3000`, body);
    await sendResponse(res, await handler(web, { params: Promise.resolve({}) }));
  };
  const server = http.createServer(gatehouseListener(runtime, next, "127.0.0.1:3000", {}));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  servers.push(server);
  return { port: (server.address() as AddressInfo).port, nextSaw };
}

/**
 * One request to the door, addressed to `host` (the Host header; null sends none, as an
 * HTTP/1.0 client may), whatever port it really connects to.
 */
function send(
  door: Door,
  method: string,
  path: string,
  opts: { host: string | null; headers?: Record<string, string>; body?: unknown },
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = { ...opts.headers };
    if (opts.host !== null) headers.host = opts.host;
    let body: string | undefined;
    if (opts.body !== undefined) {
      body = JSON.stringify(opts.body);
      headers["content-type"] = "application/json";
    }
    const req = http.request({
      host: "127.0.0.1",
      port: door.port,
      method,
      path,
      agent: false,
      setHost: false,
      headers,
    });
    req.once("error", reject);
    req.once("response", (res) => {
      res.setEncoding("utf8");
      let text = "";
      res.on("data", (chunk: string) => {
        text += chunk;
      });
      res.once("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text }));
    });
    req.end(body);
  });
}

function signInBody(name: string, password: string) {
  return { name, password };
}

describe("every request the production server answers checks Host first", () => {
  it("a page asked for under another host is refused with a line of text, and Next never sees it", async () => {
    const door = await openDoor(await start());
    const res = await send(door, "GET", "/login", { host: EVIL });
    expect(res.status).toBe(403);
    expect(res.headers["content-type"]).toBe("text/plain; charset=utf-8");
    expect(res.text).toBe(`Gatehouse: ${REFUSED}.\n`);
    // The security headers go out on a refusal too.
    expect(res.headers["x-content-type-options"]).toBe("nosniff");
    expect(door.nextSaw).toEqual([]);
  });

  it("a sign-in under another host is refused before it is counted, and sets no cookie", async () => {
    const runtime = await start();
    const alice = await createTestUser(runtime, "alice", ["reviewer"]);
    const sessionsBefore = await runtime.db.select().from(sessions);
    const door = await openDoor(runtime);
    // The right password: a rebinding page must not get a session, nor learn that it was right.
    const res = await send(door, "POST", "/api/session", {
      host: EVIL,
      headers: { origin: `http://${EVIL}` },
      body: signInBody("alice", alice.password),
    });
    expect(res.status).toBe(403);
    expect(JSON.parse(res.text)).toEqual({ error: { code: "bad_host", message: REFUSED } });
    expect(res.headers["set-cookie"]).toBeUndefined();
    expect(await runtime.throttle.size()).toEqual({ names: 0, addresses: 0 });
    expect(await runtime.db.select().from(sessions)).toEqual(sessionsBefore);
    expect(door.nextSaw).toEqual([]);

    const ok = await send(door, "POST", "/api/session", {
      host: "127.0.0.1:3000",
      headers: { origin: "http://127.0.0.1:3000" },
      body: signInBody("alice", alice.password),
    });
    expect(ok.status).toBe(200);
    expect(ok.headers["set-cookie"]?.[0]).toMatch(/^gh_session=/);
  });

  it("the setup route under another host is refused and leaves the setup code unused", async () => {
    const runtime = await start();
    const code = await issueSetupCode(runtime.db);
    expect(code).not.toBeNull();
    const door = await openDoor(runtime);
    const body = { code, name: "first", password: "correct horse battery" };
    const res = await send(door, "POST", "/api/setup", {
      host: EVIL,
      headers: { origin: `http://${EVIL}` },
      body,
    });
    expect(res.status).toBe(403);
    expect(JSON.parse(res.text)).toEqual({ error: { code: "bad_host", message: REFUSED } });
    expect(res.headers["set-cookie"]).toBeUndefined();
    expect(await runtime.db.select().from(users)).toEqual([]);
    expect(door.nextSaw).toEqual([]);

    const ok = await send(door, "POST", "/api/setup", {
      host: "localhost:3000",
      headers: { origin: "http://localhost:3000" },
      body,
    });
    expect(ok.status).toBe(201);
  });

  it("/mcp and /api/calls under another host are refused in their own formats, a valid token notwithstanding", async () => {
    const runtime = await start();
    const token = await createAgentToken(runtime, "bot");
    const door = await openDoor(runtime);
    const auth = { authorization: `Bearer ${token}` };
    const mcp = await send(door, "POST", "/mcp", {
      host: EVIL,
      headers: { ...auth, accept: "application/json, text/event-stream" },
      body: { jsonrpc: "2.0", id: 1, method: "initialize", params: {} },
    });
    expect(mcp.status).toBe(403);
    expect(JSON.parse(mcp.text)).toEqual({
      jsonrpc: "2.0",
      error: { code: -32000, message: `Forbidden: ${REFUSED}` },
      id: null,
    });
    expect(runtime.agentMcp.sessionCount()).toBe(0);
    const calls = await send(door, "GET", "/api/calls", { host: EVIL, headers: auth });
    expect(calls.status).toBe(403);
    expect(JSON.parse(calls.text)).toEqual({ error: { code: "bad_host", message: REFUSED } });

    // The same token under an allowed name is answered.
    expect((await send(door, "GET", "/api/calls", { host: "127.0.0.1:3000", headers: auth })).status).toBe(
      200,
    );
  });

  it("the hot path reads only the session cookie named for the scheme", async () => {
    const runtime = await start();
    const alice = await createTestUser(runtime, "alice", ["reviewer"]);
    const sid = alice.cookie.slice(alice.cookie.indexOf("=") + 1);
    const door = await openDoor(runtime);
    const asked = async (name: string, https: boolean) =>
      (
        await send(door, "GET", "/api/calls", {
          host: "127.0.0.1:3000",
          headers: { cookie: `${name}=${sid}`, ...(https ? { "x-forwarded-proto": "https" } : {}) },
        })
      ).status;
    expect(await asked("gh_session", true)).toBe(401);
    expect(await asked("__Host-gh_session", false)).toBe(401);
    expect(await asked("__Host-gh_session", true)).toBe(200);
    expect(await asked("gh_session", false)).toBe(200);
  });

  it("a request without a Host is refused like a wrong one", async () => {
    const door = await openDoor(await start());
    // HTTP/1.0 may leave Host out (Node refuses an HTTP/1.1 request without one by itself).
    const socket = net.connect(door.port, "127.0.0.1");
    socket.setEncoding("utf8");
    socket.end("GET /servers HTTP/1.0\r\n\r\n");
    let raw = "";
    for await (const chunk of socket) raw += chunk as string;
    expect(raw.split("\r\n")[0]).toBe("HTTP/1.1 403 Forbidden");
    expect(raw).toContain('requests for host "" are not accepted');
    expect(door.nextSaw).toEqual([]);
  });

  it("the loopback names on the port, and names from agentEndpoint.allowedHosts, are answered", async () => {
    const door = await openDoor(
      await start({ config: { agentEndpoint: { allowedHosts: ["Gatehouse.LAN:3000"] } } }),
    );
    for (const host of [
      "127.0.0.1:3000",
      "localhost:3000",
      "[::1]:3000",
      "LOCALHOST:3000",
      "gatehouse.lan:3000",
    ]) {
      const res = await send(door, "GET", "/servers", { host });
      expect([host, res.status, res.text]).toEqual([host, 200, "a page"]);
    }
    // Another port of an allowed name is another origin: refused.
    expect((await send(door, "GET", "/servers", { host: "127.0.0.1:3001" })).status).toBe(403);
    expect(door.nextSaw).toEqual(Array(5).fill("GET /servers"));
  });
});

describe("route() checks Host itself (next dev has no front door)", () => {
  it("a sign-in under another host is refused by the route before it is counted", async () => {
    const runtime = await start();
    const alice = await createTestUser(runtime, "alice", ["reviewer"]);
    const res = await request("POST", "/api/session", {
      headers: { host: EVIL },
      origin: `http://${EVIL}`,
      body: signInBody("alice", alice.password),
    });
    expect(res.status).toBe(403);
    expect(await res.json()).toEqual({ error: { code: "bad_host", message: REFUSED } });
    expect(res.headers.get("set-cookie")).toBeNull();
    expect(await runtime.throttle.size()).toEqual({ names: 0, addresses: 0 });
  });

  it("under an allowed host a foreign Origin is still refused: the Origin check is unchanged", async () => {
    const runtime = await start();
    const alice = await createTestUser(runtime, "alice", ["reviewer"]);
    const res = await request("POST", "/api/session", {
      origin: `http://${EVIL}`,
      body: signInBody("alice", alice.password),
    });
    expect(res.status).toBe(403);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe("bad_origin");
    expect(res.headers.get("set-cookie")).toBeNull();
  });
});

describe("the probes", () => {
  it("/healthz and /readyz answer under any Host, without a session, saying up or ready and nothing else; Next never sees them", async () => {
    const door = await openDoor(await start());
    for (const host of [EVIL, "10.0.0.7:3000"]) {
      const live = await send(door, "GET", "/healthz", { host });
      expect(live.status).toBe(200);
      expect(JSON.parse(live.text)).toEqual({ status: "ok" });
      const ready = await send(door, "GET", "/readyz", { host });
      expect(ready.status).toBe(200);
      expect(JSON.parse(ready.text)).toEqual({ status: "ready" });
    }
    // Not a way around the Host check for anything else.
    expect((await send(door, "GET", "/readyz/../login", { host: EVIL })).status).toBe(403);
    expect((await send(door, "POST", "/readyz", { host: EVIL })).status).toBe(403);
    expect(door.nextSaw).toEqual([]);
  });

  it("/readyz answers 503 store_unavailable, with Retry-After, once the store cannot answer", async () => {
    const runtime = await start();
    const door = await openDoor(runtime);
    await closeDb(runtime.db);
    const res = await send(door, "GET", "/readyz", { host: "127.0.0.1:3000" });
    expect(res.status).toBe(503);
    expect(res.headers["retry-after"]).toBe("5");
    expect(JSON.parse(res.text)).toEqual({
      error: { code: "store_unavailable", message: "the store cannot be reached" },
    });
    expect((await send(door, "GET", "/healthz", { host: "127.0.0.1:3000" })).status).toBe(200);
  });
});
