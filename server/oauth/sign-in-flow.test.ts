/**
 * An owner signs Gatehouse in to a hosted MCP server (PRODUCT.md §12), end to end against a real
 * authorization server (oidc-provider) and a real MCP server that checks every bearer token by
 * introspection: discovery, dynamic registration, PKCE S256 with `state` and `resource`, the
 * callback, calls with the token, renewal without the owner, a restart, and Disconnect with
 * revocation. The tokens are in the store only sealed.
 */
import { mkdtempSync, readdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { and, eq } from "drizzle-orm";
import { afterEach, describe, expect, it } from "vitest";
import { redact } from "@/server/log";
import { OAuthStore } from "@/server/oauth/store";
import { first, sqliteOf } from "@/server/store/db";
import { auditEvents, oauthPending, serverOauth } from "@/server/store/schema";
import {
  arrive,
  callRemote,
  connect,
  type OAuthWorld,
  type SignInHost,
  signIn,
  startOAuthWorld,
  startSignInHost,
  storedTokens,
  viewOf,
  waitForState,
} from "@/test/support/oauth";
import { request, startTestRuntime } from "@/test/support/runtime";

let world: OAuthWorld | null = null;
let host: SignInHost | null = null;

afterEach(async () => {
  await host?.rt.stop();
  await world?.close();
  host = null;
  world = null;
});

async function start(as: Parameters<typeof startOAuthWorld>[0]["as"] = {}) {
  const dir = mkdtempSync(path.join(tmpdir(), "gh-oauth-"));
  world = await startOAuthWorld({ dir, as });
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

/**
 * Resolves once the current access token of `remote` is due for renewal (a third of its lifetime
 * before it expires). The passing of time is the behaviour under test here, so this waits for it.
 */
async function untilRenewalDue(h: SignInHost): Promise<void> {
  const grant = await new OAuthStore(h.runtime.db, h.runtime.secrets).grant("remote");
  const expiresAt = Date.parse(grant?.accessExpiresAt ?? "");
  const obtainedAt = grant?.secrets.tokens?.obtainedAt ?? expiresAt;
  const due = expiresAt - (expiresAt - obtainedAt) / 3;
  await new Promise((resolve) => setTimeout(resolve, Math.max(0, due - Date.now()) + 50));
}

function audit(h: SignInHost, action: string) {
  return h.runtime.db
    .select()
    .from(auditEvents)
    .where(and(eq(auditEvents.action, action), eq(auditEvents.subject, "remote")));
}

describe("signing in to an OAuth server", () => {
  it("waits in needs_auth, unasked, until an owner connects; then its tools come and calls carry the token", async () => {
    const { world, host } = await start();
    await waitForState(host, "remote", "needs_auth");
    const waiting = await viewOf(host, "remote");
    expect(waiting.auth).toMatchObject({ kind: "oauth", source: "config", connected: false });
    expect(waiting.auth?.reason).toMatch(/nobody has signed in .* press Connect/);
    // Nothing was sent to the MCP server without a token, and nothing with one.
    expect(world.requests().filter((r) => r.path === "/mcp")).toEqual([]);

    const authorizationUrl = await connect(host, "remote");
    expect(authorizationUrl.origin).toBe(world.as.issuer);
    expect(authorizationUrl.searchParams.get("code_challenge_method")).toBe("S256");
    expect(authorizationUrl.searchParams.get("code_challenge")).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(authorizationUrl.searchParams.get("state")).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(authorizationUrl.searchParams.get("resource")).toBe(world.url);
    expect(authorizationUrl.searchParams.get("redirect_uri")).toBe("http://127.0.0.1:3000/oauth/callback");
    const registrations = world.as.log.filter((e) => e.kind === "registration");
    expect(registrations).toEqual([
      expect.objectContaining({
        ok: true,
        redirectUris: ["http://127.0.0.1:3000/oauth/callback"],
        tokenEndpointAuthMethod: "none",
      }),
    ]);
    // The pending sign-in is kept under the state's hash, never the state itself.
    const state = authorizationUrl.searchParams.get("state") ?? "";
    const pending = await host.runtime.db.select().from(oauthPending);
    expect(pending).toHaveLength(1);
    expect(JSON.stringify(pending)).not.toContain(state);

    const location = await world.as.signInHeadless(authorizationUrl, { login: "alice" });
    expect(new URL(location).searchParams.get("iss")).toBe(world.as.issuer);
    const back = await arrive(host, location);
    expect(back).toMatchObject({ outcome: "connected", server: "remote" });
    expect(back.res.headers.get("content-type")).toMatch(/^text\/html/);

    await waitForState(host, "remote", "ready");
    const view = await viewOf(host, "remote");
    expect(view.auth).toMatchObject({
      connected: true,
      issuer: world.as.issuer,
      connectedBy: "olga",
      reason: null,
    });
    expect(view.auth?.scopes).toEqual(expect.arrayContaining(["read", "write"]));
    expect(Date.parse(view.auth?.expiresAt ?? "")).toBeGreaterThan(Date.now());
    expect(JSON.stringify(view)).not.toContain((await storedTokens(host.runtime, "remote"))?.access ?? "∅");

    const call = await callRemote(host);
    expect(call.httpStatus).toBe(200);
    expect(JSON.stringify(call.call)).toContain('\\"sub\\":\\"alice\\"');
    const served = world.requests().filter((r) => r.path === "/mcp" && r.auth === "active");
    expect(served.length).toBeGreaterThan(0);
    expect(world.as.log.filter((e) => e.kind === "token" && e.grantType === "authorization_code")).toEqual([
      expect.objectContaining({ ok: true, resource: world.url }),
    ]);
    expect(await audit(host, "server.oauth.started")).toEqual([expect.objectContaining({ actor: "olga" })]);
    expect(await audit(host, "server.oauth.connected")).toEqual([expect.objectContaining({ actor: "olga" })]);
  });

  it("keeps no token in clear text in the store's files", async () => {
    const { world, host } = await start();
    expect(await signIn(host, world, "remote")).toBe("connected");
    await waitForState(host, "remote", "ready");
    const tokens = await storedTokens(host.runtime, "remote");
    expect(tokens?.access.length).toBeGreaterThan(20);
    expect(tokens?.refresh?.length).toBeGreaterThan(20);
    // Every file of the store (the database, its WAL and shared memory), as they are on disk now.
    // About SQLite's files: this suite runs in the sqlite project only.
    sqliteOf(host.runtime.db)?.pragma("wal_checkpoint(PASSIVE)");
    const dir = path.dirname(host.rt.dbFile);
    const files = readdirSync(dir).filter((f) => f.startsWith("gatehouse.db") && !f.endsWith(".key"));
    expect(files).toContain("gatehouse.db");
    for (const f of files) {
      const bytes = readFileSync(path.join(dir, f)).toString("latin1");
      expect(bytes, f).not.toContain(tokens?.access);
      expect(bytes, f).not.toContain(tokens?.refresh);
    }
    const row = await first(host.runtime.db.select().from(serverOauth));
    expect(row?.sealed).toMatch(/^v1\./);
  });

  it("renews an access token near its expiry with the refresh token, without the owner", async () => {
    // Tokens live 6 s: each is renewed once a third of that (2 s) is left before it expires.
    const { world, host } = await start({ accessTokenTtlSeconds: 6 });
    expect(await signIn(host, world, "remote")).toBe("connected");
    await waitForState(host, "remote", "ready");
    const before = await storedTokens(host.runtime, "remote");
    await untilRenewalDue(host);
    const call = await callRemote(host);
    expect(call.httpStatus).toBe(200);
    const refreshes = world.as.log.filter((e) => e.kind === "token" && e.grantType === "refresh_token");
    expect(refreshes.length).toBeGreaterThan(0);
    expect(refreshes.every((e) => e.kind === "token" && e.ok && e.resource === world.url)).toBe(true);
    const after = await storedTokens(host.runtime, "remote");
    expect(after?.access).not.toBe(before?.access);
    // The server never had to refuse a token: each was renewed before it was sent.
    expect(world.requests().filter((r) => r.auth === "inactive")).toEqual([]);
    expect((await viewOf(host, "remote")).auth?.connectedBy).toBe("olga");
    // Two renewals on, the first tokens have left the log's redaction; the current ones have not.
    await untilRenewalDue(host);
    expect((await callRemote(host)).httpStatus).toBe(200);
    await untilRenewalDue(host);
    expect((await callRemote(host)).httpStatus).toBe(200);
    expect(world.as.log.filter((e) => e.kind === "token" && e.grantType === "refresh_token")).toHaveLength(3);
    const now = await storedTokens(host.runtime, "remote");
    expect(redact(`${before?.access}`)).toBe(before?.access);
    expect(redact(`${now?.access} ${now?.refresh}`)).toBe("[redacted] [redacted]");
  });

  it("renews once on a 401 and sends the request again", async () => {
    const { world, host } = await start();
    expect(await signIn(host, world, "remote")).toBe("connected");
    await waitForState(host, "remote", "ready");
    const before = await storedTokens(host.runtime, "remote");
    // The MCP server stops trusting the access token on its own (its keys rotated, say); the
    // authorization server still honours the grant, so a renewal gets one it accepts.
    world.deny(before?.access ?? "");
    const call = await callRemote(host);
    expect(call.httpStatus).toBe(200);
    expect(world.requests().filter((r) => r.auth === "inactive").length).toBeGreaterThan(0);
    // Each refused request renews (a request already on its way with the old token, the listen
    // stream's, may be refused too and renew once more); every renewal is granted.
    const renewals = world.as.log.filter((e) => e.kind === "token" && e.grantType === "refresh_token");
    expect(renewals.length).toBeGreaterThan(0);
    expect(renewals.every((e) => e.kind === "token" && e.ok)).toBe(true);
    expect((await storedTokens(host.runtime, "remote"))?.access).not.toBe(before?.access);
  });

  it("a restart keeps the grant: the server is dialled with it, nobody signs in again", async () => {
    const { world } = await start();
    const first = host as SignInHost;
    expect(await signIn(first, world, "remote")).toBe("connected");
    await waitForState(first, "remote", "ready");
    const dir = first.rt.dir;
    await first.rt.stop({ keepDir: true });
    const rt = await startTestRuntime({
      dir,
      ...(first.rt.databaseUrl ? { databaseUrl: first.rt.databaseUrl } : {}),
      servers: {
        remote: {
          url: world.url,
          enabled: true,
          allowPrivate: true,
          auth: { type: "oauth", allowPrivate: true },
        },
      },
    });
    host = { rt, runtime: rt.runtime, cookie: first.cookie, binding: null };
    await waitForState(host, "remote", "ready");
    const call = await callRemote(host);
    expect(call.httpStatus).toBe(200);
    // One sign-in, one registration: the second process used what the first stored.
    expect(world.as.log.filter((e) => e.kind === "registration")).toHaveLength(1);
    expect(
      world.as.log.filter((e) => e.kind === "token" && e.grantType === "authorization_code"),
    ).toHaveLength(1);
  });

  it("Disconnect revokes the tokens at the authorization server, forgets them and waits for a sign-in", async () => {
    const { world, host } = await start();
    expect(await signIn(host, world, "remote")).toBe("connected");
    await waitForState(host, "remote", "ready");
    const tokens = await storedTokens(host.runtime, "remote");
    expect(await world.as.isActive(tokens?.refresh ?? "")).toBe(true);

    const res = await request("DELETE", "/api/servers/remote/oauth", { cookie: host.cookie });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { revocation: string; server: { auth: { connected: boolean } } };
    expect(body.revocation).toBe("revoked");
    expect(body.server.auth.connected).toBe(false);
    expect(world.as.log.filter((e) => e.kind === "revocation")).toEqual(
      expect.arrayContaining([expect.objectContaining({ ok: true, tokenTypeHint: "refresh_token" })]),
    );
    expect(await world.as.isActive(tokens?.refresh ?? "")).toBe(false);
    expect(await world.as.isActive(tokens?.access ?? "")).toBe(false);
    // No token is left; the client registration is, for the next Connect.
    expect(await storedTokens(host.runtime, "remote")).toBeNull();
    expect(await host.runtime.db.select().from(serverOauth)).toEqual([
      expect.objectContaining({ server: "remote", connectedBy: null, accessExpiresAt: null, scope: null }),
    ]);
    await waitForState(host, "remote", "needs_auth");
    expect((await viewOf(host, "remote")).auth?.reason).toMatch(/disconnected by olga:/);
    expect(await audit(host, "server.oauth.disconnected")).toEqual([
      expect.objectContaining({ actor: "olga", detail: JSON.stringify({ revocation: "revoked" }) }),
    ]);
    // A second Disconnect has nothing to forget.
    const again = await request("DELETE", "/api/servers/remote/oauth", { cookie: host.cookie });
    expect(again.status).toBe(409);
    expect(((await again.json()) as { error: { code: string } }).error.code).toBe("not_signed_in");
    // Connecting again uses the client registered the first time: no second one is left behind.
    expect(await signIn(host, world, "remote")).toBe("connected");
    await waitForState(host, "remote", "ready");
    expect(world.as.log.filter((e) => e.kind === "registration")).toHaveLength(1);
  });

  it("Disconnect at an authorization server that cannot revoke its structured access token says what was revoked and until when the access token stays valid", async () => {
    const { world, host } = await start({ accessTokenFormat: "jwt" });
    expect(await signIn(host, world, "remote")).toBe("connected");
    const tokens = await storedTokens(host.runtime, "remote");
    const validUntil = (await viewOf(host, "remote")).auth?.expiresAt;
    expect(validUntil).toBeTruthy();

    const res = await request("DELETE", "/api/servers/remote/oauth", { cookie: host.cookie });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { revocation: string; accessExpiresAt?: string | null };
    expect(body).toMatchObject({ revocation: "refresh_only", accessExpiresAt: validUntil });
    // The refresh token was revoked; the access token was refused as a structured one (RFC 7009 §2.2.1).
    expect(await world.as.isActive(tokens?.refresh ?? "")).toBe(false);
    expect(world.as.log.filter((e) => e.kind === "revocation").map((e) => [e.tokenTypeHint, e.ok])).toEqual([
      ["refresh_token", true],
      ["access_token", false],
    ]);
    expect(await audit(host, "server.oauth.disconnected")).toEqual([
      expect.objectContaining({
        detail: JSON.stringify({ revocation: "refresh_only", accessValidUntil: validUntil }),
      }),
    ]);
    expect(await storedTokens(host.runtime, "remote")).toBeNull();
  });
});
