/**
 * Renewing an owner's sign-in without the owner, against a real authorization server
 * (oidc-provider) and a real MCP server that checks every bearer token by introspection: when a
 * token is renewed before it expires (not on every request, however short it lives), a renewal
 * on a 401 that takes a while, and the log, which never holds a token through it all.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import { REFRESH_MARGIN_MS } from "@/server/oauth";
import { renewalDue } from "@/server/oauth/renewal";
import { freePort } from "@/test/support/http-servers";
import {
  callRemote,
  type OAuthWorld,
  type SignInHost,
  signIn,
  startOAuthWorld,
  startSignInHost,
  storedTokens,
  waitForState,
} from "@/test/support/oauth";

let world: OAuthWorld | null = null;
let host: SignInHost | null = null;
let worldDir: string | null = null;
const proxies: Server[] = [];

afterEach(async () => {
  vi.restoreAllMocks();
  await host?.rt.stop();
  await world?.close();
  if (worldDir) rmSync(worldDir, { recursive: true, force: true });
  worldDir = null;
  for (const p of proxies.splice(0)) {
    p.closeAllConnections();
    await new Promise((resolve) => p.close(resolve));
  }
  host = null;
  world = null;
});

async function start(opts: { as?: Parameters<typeof startOAuthWorld>[0]["as"] } = {}) {
  worldDir = mkdtempSync(path.join(tmpdir(), "gh-oauth-"));
  world = await startOAuthWorld({ dir: worldDir, as: opts.as ?? {} });
  host = await startSignInHost({
    remote: {
      url: world.url,
      enabled: true,
      allowPrivate: true,
      auth: { type: "oauth", allowPrivate: true, scopes: ["read", "write"] },
    },
  });
  return { world, host };
}

/** The refresh-token grants the authorization server saw. */
function renewals(w: OAuthWorld) {
  return w.as.log.filter((e) => e.kind === "token" && e.grantType === "refresh_token");
}

describe("when a token is renewed", () => {
  it("a token is renewed at the smaller of a minute and a third of its lifetime before expiry", () => {
    const obtained = Date.parse("2026-12-07T00:00:00Z");
    const hour = obtained + 3600_000;
    // An hour-long token: a minute before it expires.
    expect(renewalDue(hour, obtained, hour - REFRESH_MARGIN_MS - 1)).toBe(false);
    expect(renewalDue(hour, obtained, hour - REFRESH_MARGIN_MS)).toBe(true);
    // A 30-second token: ten seconds before, never at once.
    const short = obtained + 30_000;
    expect(renewalDue(short, obtained, obtained)).toBe(false);
    expect(renewalDue(short, obtained, short - 10_001)).toBe(false);
    expect(renewalDue(short, obtained, short - 10_000)).toBe(true);
    // Not known when it was obtained: the minute.
    expect(renewalDue(short, undefined, short - REFRESH_MARGIN_MS)).toBe(true);
  });

  it("an access token that lives less than a minute is not renewed on every request", async () => {
    const { world, host } = await start({ as: { accessTokenTtlSeconds: 30 } });
    expect(await signIn(host, world, "remote")).toBe("connected");
    await waitForState(host, "remote", "ready");
    const first = await storedTokens(host.runtime, "remote");
    for (let i = 0; i < 3; i++) expect((await callRemote(host)).call.status).toBe("succeeded");
    expect(renewals(world)).toEqual([]);
    expect((await storedTokens(host.runtime, "remote"))?.access).toBe(first?.access);
  });
});

/**
 * A slow authorization server: a loopback server that answers each request only after `delayMs`,
 * with what `origin` answered to it. Returns its origin.
 */
async function slowProxy(origin: string, delayMs: number): Promise<string> {
  const server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    // The delay is the behaviour under test (a renewal that takes a while), not a wait for an event.
    await new Promise((resolve) => setTimeout(resolve, delayMs));
    const headers = new Headers();
    for (const name of ["content-type", "authorization", "accept"]) {
      const value = req.headers[name];
      if (typeof value === "string") headers.set(name, value);
    }
    const answer = await fetch(new URL(req.url ?? "/", origin), {
      method: req.method ?? "GET",
      headers,
      ...(chunks.length > 0 ? { body: Buffer.concat(chunks) } : {}),
    });
    res.writeHead(answer.status, { "content-type": answer.headers.get("content-type") ?? "text/plain" });
    res.end(await answer.text());
  });
  proxies.push(server);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  if (address === null || typeof address === "string") throw new Error("no address");
  return `http://127.0.0.1:${address.port}`;
}

describe("renewing on a 401", () => {
  // Fails today: the transport fails a request 25 ms (SETTLE_MS in server/mcp/http-transport.ts)
  // after the body of its 401 answer ended, though the SDK is renewing the token to send it
  // again: a renewal slower than that fails the call ("the server's response stream ended before
  // it answered"), and the resent request's answer is dropped as one for an unknown id.
  it("a renewal that takes a while still answers the call", async () => {
    const asPort = await freePort();
    const token = await slowProxy(`http://127.0.0.1:${asPort}`, 300);
    const { world, host } = await start({ as: { port: asPort, tokenEndpointOverride: `${token}/token` } });
    expect(await signIn(host, world, "remote")).toBe("connected");
    await waitForState(host, "remote", "ready");
    world.deny((await storedTokens(host.runtime, "remote"))?.access ?? "");
    const call = await callRemote(host);
    expect(call.call.error).toBeNull();
    expect(call.call.status).toBe("succeeded");
    expect(world.as.log.filter((e) => e.kind === "token" && e.grantType === "refresh_token")).toEqual([
      expect.objectContaining({ ok: true }),
    ]);
    expect(
      world
        .requests()
        .filter((r) => r.rpc === "tools/call")
        .map((r) => r.status),
    ).toEqual([401, 200]);
  });
});

describe("the log", () => {
  it("never holds a token, through a sign-in and renewals", async () => {
    const lines: string[] = [];
    for (const stream of [process.stdout, process.stderr]) {
      vi.spyOn(stream, "write").mockImplementation((chunk: string | Uint8Array) => {
        lines.push(typeof chunk === "string" ? chunk : Buffer.from(chunk).toString("utf8"));
        return true;
      });
    }
    vi.stubEnv("GATEHOUSE_LOG_LEVEL", "debug");
    // Each call finds its token refused by the server (as a revoked one would be) and renews it.
    const { world, host } = await start();
    expect(await signIn(host, world, "remote")).toBe("connected");
    await waitForState(host, "remote", "ready");
    const first = await storedTokens(host.runtime, "remote");
    world.deny(first?.access ?? "");
    expect((await callRemote(host)).call.status).toBe("succeeded");
    const second = await storedTokens(host.runtime, "remote");
    expect(second?.access).not.toBe(first?.access);
    world.deny(second?.access ?? "");
    expect((await callRemote(host)).call.status).toBe("succeeded");
    const third = await storedTokens(host.runtime, "remote");
    expect(third?.access).not.toBe(second?.access);
    vi.unstubAllEnvs();

    const text = lines.join("");
    // The capture saw the sign-in and the renewals.
    expect(text).toMatch(/server remote: signed in at/);
    expect(text).toMatch(/server remote: access token renewed/);
    const secrets = [first, second, third].flatMap((t) => [t?.access, t?.refresh]);
    expect(secrets.every((s) => typeof s === "string" && s.length > 20)).toBe(true);
    // The lines themselves, so a failure shows what leaked.
    for (const secret of secrets) expect(lines.filter((l) => l.includes(secret ?? "∅"))).toEqual([]);
  });
});
