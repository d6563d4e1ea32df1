/**
 * `/mcp` at the door: bearer authentication and DNS-rebinding protection, through the real
 * route module (app/mcp/route.ts) and the SDK's own client, against a real runtime with the
 * demo server.
 */
import { describe, expect, it } from "vitest";
import { revokeToken } from "@/server/auth/tokens";
import { initializeRequest, routeHandler } from "@/test/support/mcp";
import { createAgentToken, createTestUser, ORIGIN } from "@/test/support/runtime";
import { endpointFixtures, expectRefused } from "./endpoint-fixtures";
import { allowedPeers, peerProblem } from "./guard";

const { start, endpoint, connect } = endpointFixtures();

describe("authentication", () => {
  it("no token: 401 with WWW-Authenticate and a JSON-RPC error body, and no session is opened", async () => {
    const t = await start();
    const res = await routeHandler(initializeRequest());
    expect(res.headers.get("www-authenticate")).toBe('Bearer realm="gatehouse"');
    expect(await expectRefused(res, 401)).toMatch(/Authorization: Bearer/);
    expect(t.runtime.agentMcp.sessionCount()).toBe(0);
  });

  it("a wrong token: 401 with WWW-Authenticate", async () => {
    const t = await start();
    await createAgentToken(t.runtime, "bot");
    const res = await routeHandler(initializeRequest({ authorization: "Bearer gh_not-a-real-token" }));
    expect(res.headers.get("www-authenticate")).toBe('Bearer realm="gatehouse"');
    expect(await expectRefused(res, 401)).toMatch(/not valid/);
  });

  it("a revoked token: 401, also on the session it opened before", async () => {
    const t = await start();
    const token = await createAgentToken(t.runtime, "bot");
    const session = await connect({ token });
    const sid = session.transport.sessionId ?? "";
    expect(sid).not.toBe("");
    await revokeToken(t.runtime.db, { name: "bot", actor: "test" });
    await expect(session.client.listTools()).rejects.toThrow(/bearer token is not valid/);
    const fresh = await routeHandler(initializeRequest({ authorization: `Bearer ${token}` }));
    expect(fresh.headers.get("www-authenticate")).toBe('Bearer realm="gatehouse"');
    await expectRefused(fresh, 401);
  });

  it("a reviewer's session cookie is not an agent token: 401", async () => {
    const t = await start();
    const rita = await createTestUser(t.runtime, "rita", ["reviewer", "owner"]);
    const res = await routeHandler(initializeRequest({ cookie: rita.cookie }));
    await expectRefused(res, 401);
  });

  it("a valid token opens a session: initialize answers with an Mcp-Session-Id and the server's name", async () => {
    const t = await start();
    const { client, transport } = await connect({ token: await createAgentToken(t.runtime, "bot") });
    expect(transport.sessionId).toMatch(/^[0-9a-f-]{36}$/);
    expect(client.getServerVersion()?.name).toBe("gatehouse");
    expect(client.getServerCapabilities()?.tools?.listChanged).toBe(true);
    expect(client.getInstructions()).toMatch(/approve/);
    expect(t.runtime.agentMcp.sessionCount("bot")).toBe(1);
  });
});

describe("DNS-rebinding protection", () => {
  it("a Host that is not Gatehouse's own is refused with 403, before the token is even looked at", async () => {
    const t = await start();
    const token = await createAgentToken(t.runtime, "bot");
    for (const host of ["evil.example.com", "evil.example.com:3000", "127.0.0.1:4000", "localhost"]) {
      const res = await routeHandler(initializeRequest({ host, authorization: `Bearer ${token}` }));
      expect(await expectRefused(res, 403)).toMatch(/host/);
    }
    const anonymous = await routeHandler(initializeRequest({ host: "evil.example.com" }));
    expect(anonymous.headers.get("www-authenticate")).toBeNull();
    await expectRefused(anonymous, 403);
    expect(t.runtime.agentMcp.sessionCount()).toBe(0);
  });

  it("an Origin from another site is refused with 403, even with a valid token", async () => {
    const t = await start();
    const token = await createAgentToken(t.runtime, "bot");
    for (const origin of [
      "http://evil.example.com",
      "null",
      "http://127.0.0.1:4000",
      "https://127.0.0.1:3000",
    ]) {
      const res = await routeHandler(initializeRequest({ origin, authorization: `Bearer ${token}` }));
      expect(await expectRefused(res, 403)).toMatch(/origin/);
    }
    expect(t.runtime.agentMcp.sessionCount()).toBe(0);
  });

  it("the loopback names on PORT are accepted as Host and Origin, and a missing Origin too", async () => {
    const t = await start();
    const token = await createAgentToken(t.runtime, "bot");
    const ok: Record<string, string>[] = [
      { host: "127.0.0.1:3000", origin: ORIGIN },
      { host: "localhost:3000", origin: "http://localhost:3000" },
      { host: "[::1]:3000", origin: "http://[::1]:3000" },
      { host: "LOCALHOST:3000" },
    ];
    for (const headers of ok) {
      const res = await routeHandler(initializeRequest({ ...headers, authorization: `Bearer ${token}` }));
      expect(res.status).toBe(200);
      expect(res.headers.get("mcp-session-id")).toBeTruthy();
      await res.body?.cancel();
    }
  });

  it("the default allow-list follows HOST, PORT, GATEHOUSE_PUBLIC_ORIGIN and agentEndpoint", () => {
    const peers = allowedPeers({
      host: "gatehouse.lan",
      port: "8080",
      publicOrigin: "https://mcp.example.com/",
      extraHosts: ["Tools.Example.org:9000"],
      extraOrigins: ["https://tools.example.org:9000"],
    });
    const problem = (host: string, origin?: string) =>
      peerProblem(new Headers({ host, ...(origin ? { origin } : {}) }), peers);
    expect(problem("127.0.0.1:8080", "http://localhost:8080")).toBeNull();
    expect(problem("gatehouse.lan:8080", "http://gatehouse.lan:8080")).toBeNull();
    expect(problem("mcp.example.com", "https://mcp.example.com")).toBeNull();
    expect(problem("tools.example.org:9000", "https://tools.example.org:9000")).toBeNull();
    expect(problem("127.0.0.1:3000")).toMatch(/host/);
    expect(problem("mcp.example.com", "http://mcp.example.com")).toMatch(/origin/);
    // A wildcard listen address is not a name anyone sends.
    expect(allowedPeers({ host: "0.0.0.0", port: "3000" }).hosts).not.toContain("0.0.0.0:3000");
  });

  it("agentEndpoint.allowedHosts from the config lets a client in under another name", async () => {
    const t = await start();
    const token = await createAgentToken(t.runtime, "bot");
    const e = endpoint(
      t,
      {},
      {
        ...t.runtime.config,
        agentEndpoint: { allowedHosts: ["gatehouse.lan:3000"], allowedOrigins: [] },
      },
    );
    const named = initializeRequest({ host: "gatehouse.lan:3000", authorization: `Bearer ${token}` });
    const res = await e.handle(named);
    expect(res.status).toBe(200);
    await res.body?.cancel();
    const other = await e.handle(
      initializeRequest({ host: "other.lan:3000", authorization: `Bearer ${token}` }),
    );
    await expectRefused(other, 403);
  });
});
