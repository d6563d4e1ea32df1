/**
 * OAuth sign-ins to a remote server across replicas on one PostgreSQL database (PRODUCT.md §12,
 * §14): a sign-in started on one replica and finished on another, a grant stored or forgotten
 * on one and dialled with (or not) by every replica, and renewals that never spend one refresh
 * token twice (the authorization server rotates them: a refresh token presented again ends the
 * whole grant). A real authorization server (oidc-provider) in front of a real MCP server that
 * checks every bearer token by introspection; real runtimes, the real routes.
 *
 * Two runtimes on one store exist only on PostgreSQL (SQLite is one process per file): the
 * cross-replica cases run there alone; what one runtime does is tested on both stores.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { refreshAuthorization } from "@modelcontextprotocol/client";
import { afterEach, describe, expect, it } from "vitest";
import type { LiveEvent } from "@/lib/api-types";
import { OAuthStore } from "@/server/oauth/store";
import { setRuntime } from "@/server/runtime";
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
  waitForState,
} from "@/test/support/oauth";
import { request, startTestRuntime } from "@/test/support/runtime";
import { testDialect } from "@/test/support/store";

let world: OAuthWorld | null = null;
let worldDir: string | null = null;
const hosts: SignInHost[] = [];

afterEach(async () => {
  for (const h of hosts.splice(0)) await h.rt.stop();
  await world?.close();
  if (worldDir) rmSync(worldDir, { recursive: true, force: true });
  world = null;
  worldDir = null;
});

function remote(w: OAuthWorld) {
  return {
    remote: {
      url: w.url,
      enabled: true,
      allowPrivate: true,
      auth: { type: "oauth", allowPrivate: true, scopes: ["read", "write"] },
    },
  };
}

/** The authorization and resource servers, and replica A with an owner signed in to the console. */
async function startA(): Promise<{ world: OAuthWorld; a: SignInHost }> {
  worldDir = mkdtempSync(path.join(tmpdir(), "gh-oauth-"));
  world = await startOAuthWorld({ dir: worldDir });
  const a = await startSignInHost(remote(world));
  hosts.push(a);
  return { world, a };
}

/** Replica B on A's database (PostgreSQL), the same owner's session cookie working there too. */
async function startB(a: SignInHost, w: OAuthWorld): Promise<SignInHost> {
  const rt = await startTestRuntime({ servers: remote(w), databaseUrl: a.rt.databaseUrl });
  const b: SignInHost = { rt, runtime: rt.runtime, cookie: a.cookie, binding: null };
  hosts.push(b);
  return b;
}

/** The refresh-token grants the authorization server saw. */
function renewals(w: OAuthWorld) {
  return w.as.log.filter((e) => e.kind === "token" && e.grantType === "refresh_token");
}

describe("one replica", () => {
  it("tells the other replicas when a grant is stored and when it is forgotten", async () => {
    const { world, a } = await startA();
    const heard: LiveEvent[] = [];
    const unsubscribe = a.runtime.bus.subscribe((e) => {
      if (e.type === "oauth") heard.push(e);
    });
    expect(await signIn(a, world, "remote")).toBe("connected");
    await waitForState(a, "remote", "ready");
    expect(heard).toEqual([{ type: "oauth", server: "remote" }]);
    const res = await request("DELETE", "/api/servers/remote/oauth", { cookie: a.cookie });
    expect(res.status).toBe(200);
    expect(heard).toHaveLength(2);
    unsubscribe();
  });

  it("renewing, uses the tokens another process stored meanwhile rather than spend its spent refresh token", async () => {
    const { world, a } = await startA();
    expect(await signIn(a, world, "remote")).toBe("connected");
    await waitForState(a, "remote", "ready");
    // Another process renews the grant and stores the result (the runtime's memory not told):
    // the refresh token this runtime holds is spent at the authorization server.
    const store = new OAuthStore(a.runtime.db, a.runtime.secrets);
    const grant = await store.grant("remote");
    const { tokens, discovery, client, resource } = grant?.secrets ?? {};
    if (!grant || !tokens?.refresh_token || !discovery || !client) throw new Error("no grant to renew");
    const { redirectUri: _, issuer: __, ...clientInformation } = client;
    const renewed = await refreshAuthorization(discovery.authorizationServerUrl, {
      metadata: discovery.authorizationServerMetadata,
      clientInformation,
      refreshToken: tokens.refresh_token,
      ...(resource ? { resource: new URL(resource) } : {}),
    });
    const now = Date.now();
    await store.saveGrant({
      ...grant,
      secrets: { ...grant.secrets, tokens: { ...renewed, issuer: tokens.issuer, obtainedAt: now } },
      accessExpiresAt: new Date(now + (renewed.expires_in ?? 3600) * 1000).toISOString(),
      refreshedAt: new Date(now).toISOString(),
    });
    world.deny(tokens.access_token);
    expect((await callRemote(a)).call.status).toBe("succeeded");
    expect(renewals(world).filter((e) => e.kind === "token" && !e.ok)).toEqual([]);
    const after = await storedTokens(a.runtime, "remote");
    expect(await world.as.isActive(after?.refresh ?? "")).toBe(true);
  });
});

describe.runIf(testDialect === "postgres")("replicas on one database", () => {
  it("a sign-in started on one replica and finished on another connects both", async () => {
    const { world, a } = await startA();
    const b = await startB(a, world);
    await waitForState(b, "remote", "needs_auth");
    setRuntime(a.runtime);
    const authorizationUrl = await connect(a, "remote");
    const location = await world.as.signInHeadless(authorizationUrl, { login: "alice" });
    setRuntime(b.runtime);
    expect((await arrive(a, location)).outcome).toBe("connected");
    await waitForState(b, "remote", "ready");
    await waitForState(a, "remote", "ready");
    setRuntime(a.runtime);
    expect((await callRemote(a)).call.status).toBe("succeeded");
  });

  it("a Disconnect on one replica puts the server in needs_auth on the other", async () => {
    const { world, a } = await startA();
    const b = await startB(a, world);
    setRuntime(a.runtime);
    expect(await signIn(a, world, "remote")).toBe("connected");
    await waitForState(b, "remote", "ready");
    const res = await request("DELETE", "/api/servers/remote/oauth", { cookie: a.cookie });
    expect(res.status).toBe(200);
    await waitForState(b, "remote", "needs_auth");
  });

  it("replicas renewing at once spend the refresh token once, and both go on with the new tokens", async () => {
    const { world, a } = await startA();
    const b = await startB(a, world);
    setRuntime(a.runtime);
    expect(await signIn(a, world, "remote")).toBe("connected");
    await waitForState(a, "remote", "ready");
    await waitForState(b, "remote", "ready");
    const before = await storedTokens(a.runtime, "remote");
    // Both hold this access token; refused from now on, each replica's next request renews.
    world.deny(before?.access ?? "");
    const [onA, onB] = await Promise.all([callRemote(a), callRemote(b)]);
    expect(onA.call.status).toBe("succeeded");
    expect(onB.call.status).toBe("succeeded");
    // Every renewal was granted: none presented a refresh token another had spent (which would
    // have ended the grant). A request already on its way with the old token may renew once more.
    expect(renewals(world).length).toBeGreaterThan(0);
    expect(renewals(world).filter((e) => e.kind === "token" && !e.ok)).toEqual([]);
    const after = await storedTokens(a.runtime, "remote");
    expect(after?.access).not.toBe(before?.access);
    expect(await world.as.isActive(after?.refresh ?? "")).toBe(true);
  });
});
