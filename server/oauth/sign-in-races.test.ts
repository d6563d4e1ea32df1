/**
 * What happens around a sign-in while something else is under way, or after the authorization
 * server changed under Gatehouse: a renewal that is answered after a Disconnect or a new sign-in,
 * a client registration the authorization server forgot, an authorization server's page-long
 * error text, and the sign-in cookie's attributes.
 */
import { mkdtempSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { tmpdir } from "node:os";
import path from "node:path";
import { and, eq } from "drizzle-orm";
import { afterEach, describe, expect, it } from "vitest";
import { auditEvents } from "@/server/store/schema";
import { startAuthorizationServer } from "@/test/fixtures/oauth/authorization-server.mjs";
import { freePort } from "@/test/support/http-servers";
import {
  arrive,
  callRemote,
  connect,
  type OAuthWorld,
  pressConnect,
  type SignInHost,
  signIn,
  startOAuthWorld,
  startSignInHost,
  storedTokens,
  viewOf,
  waitForState,
} from "@/test/support/oauth";
import { request } from "@/test/support/runtime";

let world: OAuthWorld | null = null;
let host: SignInHost | null = null;
const proxies: Server[] = [];

afterEach(async () => {
  await host?.rt.stop();
  await world?.close();
  for (const p of proxies.splice(0)) p.close();
  host = null;
  world = null;
});

/**
 * A proxy in front of the authorization server's token endpoint: passes requests on; `hold()`
 * holds the answer of the next request until `release()`, `answerWith()` replaces the answer of
 * the next request (each once).
 */
async function tokenProxy(asOrigin: string) {
  let holding = false;
  let arrived: () => void = () => {};
  let release: () => void = () => {};
  let replaced: { status: number; body: string } | null = null;
  const arrival = new Promise<void>((r) => {
    arrived = r;
  });
  const released = new Promise<void>((r) => {
    release = r;
  });
  const server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const headers = new Headers();
    for (const n of ["content-type", "authorization", "accept"]) {
      const v = req.headers[n];
      if (typeof v === "string") headers.set(n, v);
    }
    const answer = await fetch(new URL(req.url ?? "/", asOrigin), {
      method: req.method ?? "GET",
      headers,
      ...(chunks.length > 0 ? { body: Buffer.concat(chunks) } : {}),
    });
    const holdThis = holding;
    const replaceThis = replaced;
    holding = false;
    replaced = null;
    let status = answer.status;
    let body = await answer.text();
    if (replaceThis) ({ status, body } = replaceThis);
    if (holdThis) {
      arrived();
      await released;
    }
    res.writeHead(status, { "content-type": "application/json" });
    res.end(body);
  });
  proxies.push(server);
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const address = server.address();
  if (!address || typeof address === "string") throw new Error("no proxy port");
  return {
    url: `http://127.0.0.1:${address.port}`,
    hold: () => {
      holding = true;
    },
    arrival,
    release: () => release(),
    answerWith: (status: number, body: string) => {
      replaced = { status, body };
    },
  };
}

const dir = () => mkdtempSync(path.join(tmpdir(), "gh-oauth-race-"));
const remote = (url: string) => ({
  remote: {
    url,
    enabled: true,
    allowPrivate: true,
    auth: { type: "oauth", allowPrivate: true, scopes: ["read"] },
  },
});

function audit(h: SignInHost, action: string) {
  return h.runtime.db
    .select()
    .from(auditEvents)
    .where(and(eq(auditEvents.action, action), eq(auditEvents.subject, "remote")));
}

/**
 * A world whose token endpoint is behind {@link tokenProxy}, and olga signed in. A test makes
 * the next call renew by having the server refuse the current token ({@link denyCurrent}).
 */
async function signedInBehindProxy() {
  const asPort = await freePort();
  const proxy = await tokenProxy(`http://127.0.0.1:${asPort}`);
  const w = await startOAuthWorld({
    dir: dir(),
    as: { port: asPort, tokenEndpointOverride: `${proxy.url}/token` },
  });
  world = w;
  const h = await startSignInHost(remote(w.url));
  host = h;
  expect(await signIn(h, w, "remote")).toBe("connected");
  await waitForState(h, "remote", "ready");
  return { proxy, world: w, host: h };
}

/** From now on the server refuses the current access token: the next call renews it on its 401. */
async function denyCurrent(w: OAuthWorld, h: SignInHost): Promise<void> {
  w.deny((await storedTokens(h.runtime, "remote"))?.access ?? "");
}

describe("a renewal answered after its sign-in ended", () => {
  it("after a Disconnect, its tokens are dropped: nothing comes back, and the reason stays the Disconnect's", async () => {
    const { proxy, host, world } = await signedInBehindProxy();

    await denyCurrent(world, host);
    proxy.hold();
    const call = callRemote(host);
    await proxy.arrival;
    const res = await request("DELETE", "/api/servers/remote/oauth", { cookie: host.cookie });
    expect(res.status).toBe(200);
    expect(await storedTokens(host.runtime, "remote")).toBeNull();
    proxy.release();
    const answered = await call;
    expect(answered.call.status).toBe("failed");

    expect(await storedTokens(host.runtime, "remote")).toBeNull();
    await waitForState(host, "remote", "needs_auth");
    const view = await viewOf(host, "remote");
    expect(view.auth?.connected).toBe(false);
    expect(view.auth?.reason).toMatch(/disconnected by olga:/);
    expect(await audit(host, "server.oauth.expired")).toEqual([]);
  });

  it("after a new sign-in, the old renewal's refusal neither forgets nor spoils the new grant", async () => {
    const { proxy, host, world } = await signedInBehindProxy();

    // The next token request, a renewal, is held and then refused, as if its grant had been
    // revoked in between.
    await denyCurrent(world, host);
    proxy.hold();
    proxy.answerWith(400, JSON.stringify({ error: "invalid_grant", error_description: "grant revoked" }));
    const call = callRemote(host);
    await proxy.arrival;
    // Meanwhile the owner signs in again; its code exchange is answered as usual.
    expect(await signIn(host, world, "remote")).toBe("connected");
    const fresh = await storedTokens(host.runtime, "remote");
    expect(fresh).not.toBeNull();
    proxy.release();
    await call;

    // The late refusal was the old grant's: the new one is still there, untouched.
    expect(await storedTokens(host.runtime, "remote")).toEqual(fresh);
    expect(await audit(host, "server.oauth.expired")).toEqual([]);
    await waitForState(host, "remote", "ready");
    expect((await viewOf(host, "remote")).auth).toMatchObject({ connected: true, reason: null });
    expect((await callRemote(host)).call.status).toBe("succeeded");
  });
});

describe("a client registration the authorization server forgot", () => {
  it("a Connect after one that never came back registers anew, so the owner is never stuck", async () => {
    const asPort = await freePort();
    world = await startOAuthWorld({ dir: dir(), as: { port: asPort } });
    host = await startSignInHost(remote(world.url));
    expect(await signIn(host, world, "remote")).toBe("connected");
    await waitForState(host, "remote", "ready");
    const firstClient = (await connect(host, "remote")).searchParams.get("client_id");
    // That Connect is left unfinished. The authorization server loses its registrations (an
    // in-memory one restarted, a database reset) and answers the old client id with an error
    // page of its own, which never comes back to Gatehouse.
    await world.as.close();
    world.as = await startAuthorizationServer({ host: "127.0.0.1", port: asPort, resource: world.url });
    // The owner presses Connect again: the earlier one never came back, so Gatehouse registers anew.
    const again = await connect(host, "remote");
    expect(again.searchParams.get("client_id")).not.toBe(firstClient);
    expect(world.as.log.filter((e) => e.kind === "registration")).toEqual([
      expect.objectContaining({ ok: true }),
    ]);
    expect((await arrive(host, await world.as.signInHeadless(again))).outcome).toBe("connected");
    await waitForState(host, "remote", "ready");
  });

  it("after a Disconnect (which ends every started sign-in), one Connect to the dead client, then a fresh registration", async () => {
    const asPort = await freePort();
    world = await startOAuthWorld({ dir: dir(), as: { port: asPort } });
    host = await startSignInHost(remote(world.url));
    expect(await signIn(host, world, "remote")).toBe("connected");
    await waitForState(host, "remote", "ready");
    const firstClient = (await connect(host, "remote")).searchParams.get("client_id");
    await world.as.close();
    world.as = await startAuthorizationServer({ host: "127.0.0.1", port: asPort, resource: world.url });
    expect((await request("DELETE", "/api/servers/remote/oauth", { cookie: host.cookie })).status).toBe(200);
    // The kept registration is tried once (the authorization server answers it with its own
    // error page, which never comes back); the Connect after that registers anew.
    expect((await connect(host, "remote")).searchParams.get("client_id")).toBe(firstClient);
    const fresh = await connect(host, "remote");
    expect(fresh.searchParams.get("client_id")).not.toBe(firstClient);
    expect((await arrive(host, await world.as.signInHeadless(fresh))).outcome).toBe("connected");
    await waitForState(host, "remote", "ready");
  });
});

describe("an authorization server's error text", () => {
  it("reaches the audit and the log as one short line, however long it was", async () => {
    const asPort = await freePort();
    const proxy = await tokenProxy(`http://127.0.0.1:${asPort}`);
    world = await startOAuthWorld({
      dir: dir(),
      as: { port: asPort, tokenEndpointOverride: `${proxy.url}/token` },
    });
    host = await startSignInHost(remote(world.url));
    const description = `${"the code was refused because ".repeat(200)}\n\nand more`;
    proxy.answerWith(400, JSON.stringify({ error: "invalid_request", error_description: description }));
    const authorizationUrl = await connect(host, "remote");
    const back = await arrive(host, await world.as.signInHeadless(authorizationUrl));
    expect(back.outcome).toBe("failed");
    const [refused] = await audit(host, "server.oauth.refused");
    const detail = JSON.parse(refused?.detail ?? "{}") as { why?: string };
    expect(detail.why).toMatch(/^exchanging the code failed: /);
    expect(detail.why?.length).toBeLessThan(300);
    expect(detail.why).not.toContain("\n");
  });
});

describe("the sign-in cookie", () => {
  it("is HttpOnly and SameSite=Lax for the whole site; over https __Host- and Secure; a second Connect keeps the first beside its own", async () => {
    world = await startOAuthWorld({ dir: dir() });
    host = await startSignInHost(remote(world.url));
    const plain = await pressConnect(host, "remote");
    expect(plain.headers.get("set-cookie")).toMatch(
      /^gh_oauth=[A-Za-z0-9_-]{43}; Path=\/; HttpOnly; SameSite=Lax; Max-Age=600$/,
    );
    const first = (host.binding ?? "").replace(/^gh_oauth=/, "");
    await pressConnect(host, "remote");
    expect(host.binding).toMatch(new RegExp(`^gh_oauth=[A-Za-z0-9_-]{43}\\.${first}$`));

    // Over https (behind a proxy that says so) the session cookie has its __Host- name too.
    host.binding = null;
    host.cookie = host.cookie.replace(/^gh_session=/, "__Host-gh_session=");
    const secure = await pressConnect(host, "remote", { headers: { "x-forwarded-proto": "https" } });
    expect(secure.status).toBe(200);
    expect(secure.headers.get("set-cookie")).toMatch(
      /^__Host-gh_oauth=[A-Za-z0-9_-]{43}; Path=\/; HttpOnly; SameSite=Lax; Max-Age=600; Secure$/,
    );
  });

  it("a sign-in never reuses a gh_oauth cookie the browser already has: every Connect mints a fresh binding", async () => {
    world = await startOAuthWorld({ dir: dir() });
    host = await startSignInHost(remote(world.url));
    // A page on another port of the same host planted a binding it knows.
    const planted = `gh_oauth=${"p".repeat(43)}`;
    host.binding = planted;
    const authorizationUrl = await connect(host, "remote");
    expect(host.binding).not.toBe(planted);
    expect(host.binding).toMatch(/^gh_oauth=[A-Za-z0-9_-]{43}/);
    expect(host.binding?.startsWith(planted)).toBe(false);
    const location = await world.as.signInHeadless(authorizationUrl);
    // The planted value alone does not finish the sign-in; the browser's own cookie does.
    expect((await arrive(host, location, planted)).outcome).toBe("wrong_user");
    const second = await connect(host, "remote");
    const back = await arrive(host, await world.as.signInHeadless(second));
    expect(back.outcome).toBe("connected");
  });

  it("two sign-ins started side by side in one browser both come back to it", async () => {
    world = await startOAuthWorld({ dir: dir() });
    host = await startSignInHost(remote(world.url));
    const firstUrl = await connect(host, "remote");
    const secondUrl = await connect(host, "remote");
    const first = await world.as.signInHeadless(firstUrl);
    const second = await world.as.signInHeadless(secondUrl);
    expect((await arrive(host, second)).outcome).toBe("connected");
    expect((await arrive(host, first)).outcome).toBe("connected");
  });
});
