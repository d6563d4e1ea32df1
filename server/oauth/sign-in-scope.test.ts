/**
 * What an OAuth sign-in asks for and is bound to (PRODUCT.md §12), against a real authorization
 * server (oidc-provider) and a real MCP server that checks every bearer token by introspection:
 * a step-up on `insufficient_scope` that keeps what was granted, a server that asks for a
 * sign-in only by its 401, a client configured in gatehouse.json instead of a registered one,
 * and a grant that belongs to the URL it was given for.
 */
import { createHash, randomBytes } from "node:crypto";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import { refusedAddressKind } from "@/server/net/address-policy";
import { OAuthStore } from "@/server/oauth/store";
import { first as firstRow, sqliteOf } from "@/server/store/db";
import { serverOauth } from "@/server/store/schema";
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

/** 127.0.0.1 plays a public host; every other address is judged by the real policy. */
const LOOPBACK_PUBLIC = (ip: string) => (ip === "127.0.0.1" ? null : refusedAddressKind(ip));

let world: OAuthWorld | null = null;
let host: SignInHost | null = null;
/** The resource server's request log and deny list of the current world. */
let worldDir: string | null = null;

afterEach(async () => {
  await host?.rt.stop();
  await world?.close();
  if (worldDir) rmSync(worldDir, { recursive: true, force: true });
  worldDir = null;
  host = null;
  world = null;
});

type WorldOptions = Parameters<typeof startOAuthWorld>[0];

async function startWorld(as: WorldOptions["as"] = {}): Promise<OAuthWorld> {
  worldDir = mkdtempSync(path.join(tmpdir(), "gh-oauth-"));
  world = await startOAuthWorld({ dir: worldDir, as });
  return world;
}

/** The first 12 hex characters of a token's SHA-256, as the resource server logs it. */
function hashOf(token: string): string {
  return createHash("sha256").update(token).digest("hex").slice(0, 12);
}

/**
 * Every file of the store (the database, its WAL and shared memory) as it is on disk now. About
 * SQLite's files: this suite runs in the sqlite project only.
 */
function storeFiles(h: SignInHost): string[] {
  sqliteOf(h.runtime.db)?.pragma("wal_checkpoint(PASSIVE)");
  const dir = path.dirname(h.rt.dbFile);
  return readdirSync(dir)
    .filter((f) => f.startsWith("gatehouse.db"))
    .map((f) => readFileSync(path.join(dir, f)).toString("latin1"));
}

const scopesOf = (s: string | null | undefined) => (s ?? "").split(" ").filter(Boolean);

describe("scope", () => {
  it("a step-up on insufficient_scope asks for the union of what was granted and what the server wants", async () => {
    const world = await startWorld();
    host = await startSignInHost(
      {
        remote: {
          url: world.url,
          enabled: true,
          allowPrivate: true,
          auth: { type: "oauth", allowPrivate: true, scopes: ["read"] },
        },
      },
      // write_note is not read-only: a rule lets it run without review, so its outcome is seen here.
      { config: { rules: [{ name: "notes", tools: ["remote_write_note"], decision: "allow" }] } },
    );
    const first = await connect(host, "remote");
    expect(scopesOf(first.searchParams.get("scope"))).toContain("read");
    expect(scopesOf(first.searchParams.get("scope"))).not.toContain("write");
    expect((await arrive(host, await world.as.signInHeadless(first))).outcome).toBe("connected");
    await waitForState(host, "remote", "ready");
    expect((await viewOf(host, "remote")).auth?.scopes).not.toContain("write");

    const refused = await callRemote(host, "remote_write_note", { text: "hello" });
    expect(refused.call.status).toBe("failed");
    expect(refused.call.error?.message).toMatch(
      /server remote needs a scope for this request that Gatehouse's credentials do not carry; an owner can see why on the Servers page/,
    );
    expect(world.requests().filter((r) => r.auth === "insufficient_scope" && r.status === 403)).toHaveLength(
      1,
    );
    // The server stays usable for what the grant allows, and the owner is told what it asked for.
    expect(host.runtime.manager.get("remote").snapshot().state).toBe("ready");
    const asked = await viewOf(host, "remote");
    expect(asked.auth).toMatchObject({ connected: true });
    expect(asked.auth?.reason).toMatch(/the server asks for more scope than was granted \(read write\)/);
    expect((await callRemote(host)).call.status).toBe("succeeded");

    const again = await connect(host, "remote");
    const wanted = scopesOf(again.searchParams.get("scope"));
    expect(wanted).toEqual(expect.arrayContaining(["read", "write"]));
    // A registered client is held to the scope it registered with: the step-up registered anew.
    const registrations = world.as.log.filter((e) => e.kind === "registration");
    expect(registrations).toHaveLength(2);
    expect(registrations.every((e) => e.kind === "registration" && e.ok)).toBe(true);
    expect(again.searchParams.get("client_id")).toBe(
      registrations[1]?.kind === "registration" ? registrations[1].clientId : "∅",
    );
    expect((await arrive(host, await world.as.signInHeadless(again))).outcome).toBe("connected");
    await waitForState(host, "remote", "ready");
    const granted = await viewOf(host, "remote");
    expect(granted.auth?.scopes).toEqual(expect.arrayContaining(["read", "write"]));
    expect(granted.auth?.reason).toBeNull();
    const row = await firstRow(host.runtime.db.select().from(serverOauth));
    expect(scopesOf(row?.scope)).toEqual(expect.arrayContaining(["read", "write"]));

    const wrote = await callRemote(host, "remote_write_note", { text: "hello" });
    expect(wrote.call.status).toBe("succeeded");
    expect(JSON.stringify(wrote.call.result)).toContain("noted: hello");
  });
});

describe("a server that asks for a sign-in only by its 401", () => {
  it("waits in needs_auth from its challenge, signs in from the challenge's metadata, and keeps the grant across a restart", async () => {
    const world = await startWorld();
    const entry = { remote: { url: world.url, enabled: true, allowPrivate: true } };
    // Without an "auth" key there is no auth.allowPrivate: the authorization server, on another
    // loopback port than the server's own URL, plays a public host.
    host = await startSignInHost(entry, { refuseAddress: LOOPBACK_PUBLIC });
    await waitForState(host, "remote", "needs_auth");
    const waiting = await viewOf(host, "remote");
    expect(waiting.auth).toMatchObject({ kind: "oauth", source: "challenge", connected: false });
    expect(waiting.auth?.reason).toMatch(
      /asks for an OAuth sign-in \(HTTP 401 naming its resource metadata\)/,
    );
    expect(waiting.lastError).toMatch(/asks for an OAuth sign-in/);
    expect(world.requests()).toEqual(
      expect.arrayContaining([expect.objectContaining({ path: "/mcp", status: 401, auth: "none" })]),
    );

    const authorizationUrl = await connect(host, "remote");
    expect(authorizationUrl.origin).toBe(world.as.issuer);
    expect(authorizationUrl.searchParams.get("resource")).toBe(world.url);
    // The challenge named the metadata document: it was read from there.
    expect(world.requests()).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ method: "GET", path: "/.well-known/oauth-protected-resource/mcp" }),
      ]),
    );
    expect((await arrive(host, await world.as.signInHeadless(authorizationUrl))).outcome).toBe("connected");
    await waitForState(host, "remote", "ready");
    expect((await callRemote(host)).call.status).toBe("succeeded");
    expect((await viewOf(host, "remote")).auth).toMatchObject({ source: "challenge", connected: true });

    const first = host;
    const dir = first.rt.dir;
    await first.rt.stop({ keepDir: true });
    const rt = await startTestRuntime({ dir, servers: entry, refuseAddress: LOOPBACK_PUBLIC });
    host = { rt, runtime: rt.runtime, cookie: first.cookie, binding: null };
    await waitForState(host, "remote", "ready");
    expect((await callRemote(host)).call.status).toBe("succeeded");
    expect((await viewOf(host, "remote")).auth).toMatchObject({ source: "challenge", connected: true });
    expect(
      world.as.log.filter((e) => e.kind === "token" && e.grantType === "authorization_code"),
    ).toHaveLength(1);
  });
});

describe("a configured client", () => {
  it("signs in as the client of gatehouse.json: nothing registered, its secret neither stored nor shown", async () => {
    const clientId = "gatehouse-configured";
    const clientSecret = `cs-${randomBytes(24).toString("base64url")}`;
    const world = await startWorld({
      accessTokenTtlSeconds: 30,
      staticClients: [
        {
          client_id: clientId,
          client_secret: clientSecret,
          redirect_uris: ["http://127.0.0.1:3000/oauth/callback"],
          token_endpoint_auth_method: "client_secret_basic",
        },
      ],
    });
    host = await startSignInHost(
      {
        remote: {
          url: world.url,
          enabled: true,
          allowPrivate: true,
          auth: {
            type: "oauth",
            scopes: ["read", "write"],
            clientId,
            clientSecret: "${REMOTE_CLIENT_SECRET}",
            issuer: world.as.issuer,
            allowPrivate: true,
          },
        },
      },
      { env: { REMOTE_CLIENT_SECRET: clientSecret } },
    );
    // The SDK warns (on the console, outside Gatehouse's log) of a stored client with no issuer
    // stamp: a configured client is stamped with its configured issuer.
    const warned: string[] = [];
    const warn = vi.spyOn(console, "warn").mockImplementation((...args: unknown[]) => {
      warned.push(args.map(String).join(" "));
    });
    const authorizationUrl = await connect(host, "remote");
    expect(authorizationUrl.searchParams.get("client_id")).toBe(clientId);
    expect((await arrive(host, await world.as.signInHeadless(authorizationUrl))).outcome).toBe("connected");
    await waitForState(host, "remote", "ready");
    expect((await callRemote(host)).call.status).toBe("succeeded");
    // The server refuses the token from now on: the call renews it, as the configured client.
    world.deny((await storedTokens(host.runtime, "remote"))?.access ?? "");
    expect((await callRemote(host)).call.status).toBe("succeeded");
    warn.mockRestore();
    expect(warned.filter((w) => w.includes("issuer"))).toEqual([]);

    expect(world.as.log.filter((e) => e.kind === "registration")).toEqual([]);
    // The code, then the renewal, all authenticated as the configured client.
    const [code, ...renewals] = world.as.log.filter((e) => e.kind === "token");
    expect(code).toMatchObject({ grantType: "authorization_code", clientId, ok: true });
    expect(renewals.length).toBeGreaterThan(0);
    for (const r of renewals) expect(r).toMatchObject({ grantType: "refresh_token", clientId, ok: true });

    const res = await request("GET", "/api/servers", { cookie: host.cookie });
    const shown = await res.text();
    expect(shown).toContain(clientId);
    expect(shown).not.toContain(clientSecret);
    expect((await viewOf(host, "remote")).auth?.client).toBe(clientId);
    for (const file of storeFiles(host)) expect(file).not.toContain(clientSecret);
    // Nor sealed: the grant keeps no client of its own for a configured one.
    const grant = await new OAuthStore(host.runtime.db, host.runtime.secrets).grant("remote");
    expect(grant?.secrets.tokens).toBeDefined();
    expect(grant?.secrets.client).toBeUndefined();
    expect(JSON.stringify(grant)).not.toContain(clientSecret);
  });
});

describe("a grant belongs to its URL", () => {
  it("after the server's URL changed the old tokens are not sent: needs_auth, saying why", async () => {
    const world = await startWorld();
    host = await startSignInHost({
      remote: {
        url: world.url,
        enabled: true,
        allowPrivate: true,
        auth: { type: "oauth", allowPrivate: true },
      },
    });
    expect(await signIn(host, world, "remote")).toBe("connected");
    await waitForState(host, "remote", "ready");
    const tokens = await storedTokens(host.runtime, "remote");
    const oldHash = hashOf(tokens?.access ?? "");
    expect(world.requests().some((r) => r.tokenHash === oldHash)).toBe(true);

    const first = host;
    const dir = first.rt.dir;
    await first.rt.stop({ keepDir: true });
    const before = world.requests().length;
    // The resource server answers there too (it reads the path only): a dial would be seen.
    const moved = `${world.url}?tenant=2`;
    const rt = await startTestRuntime({
      dir,
      ...(first.rt.databaseUrl ? { databaseUrl: first.rt.databaseUrl } : {}),
      servers: {
        remote: {
          url: moved,
          enabled: true,
          allowPrivate: true,
          auth: { type: "oauth", allowPrivate: true },
        },
      },
    });
    host = { rt, runtime: rt.runtime, cookie: first.cookie, binding: null };
    await waitForState(host, "remote", "needs_auth");
    expect(host.runtime.manager.get("remote").snapshot().lastError).toMatch(
      /the server's URL changed since the sign-in: an owner must sign in again/,
    );
    const view = await viewOf(host, "remote");
    expect(view.auth?.reason).toMatch(/the server's URL changed since the sign-in/);
    // A grant for another URL is no sign-in to this one.
    expect(view.auth?.connected).toBe(false);
    expect(world.requests().slice(before)).toEqual([]);
  });
});
