/**
 * What an owner's sign-in refuses (PRODUCT.md §12), against a real authorization server
 * (oidc-provider) and a real MCP server that checks every bearer token by introspection: an
 * authorization response from another issuer or without one, a `state` delivered to another
 * browser, an unknown, reused or aged sign-in, a denial at the authorization server, a token
 * endpoint on a private address, a refresh the authorization server refuses, callers who are not
 * owners. A refused sign-in stores nothing, never redeems the code, and is audited.
 */
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { and, eq } from "drizzle-orm";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { SignInOutcome } from "@/lib/api-types";
import { refusedAddressKind } from "@/server/net/address-policy";
import { auditEvents, oauthPending, serverOauth } from "@/server/store/schema";
import { installLoopbackOnly } from "@/test/fixtures/net/loopback-only";
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
import { createAgentToken, createTestUser, request, waitForEvent } from "@/test/support/runtime";

let world: OAuthWorld | null = null;
let host: SignInHost | null = null;
/** The resource server's request log and deny list of the current world. */
let worldDir: string | null = null;
let removeNet: (() => void) | null = null;

// The private-address case advertises 169.254.169.254: should anything dial it, it fails here
// instead of leaving the machine.
beforeAll(() => {
  removeNet = installLoopbackOnly();
});
afterAll(() => removeNet?.());

afterEach(async () => {
  await host?.rt.stop();
  await world?.close();
  if (worldDir) rmSync(worldDir, { recursive: true, force: true });
  worldDir = null;
  host = null;
  world = null;
});

type WorldOptions = Parameters<typeof startOAuthWorld>[0];

async function start(
  opts: {
    as?: WorldOptions["as"];
    worldHost?: string;
    entry?: Record<string, unknown>;
    refuseAddress?: (ip: string) => string | null;
  } = {},
) {
  worldDir = mkdtempSync(path.join(tmpdir(), "gh-oauth-"));
  world = await startOAuthWorld({
    dir: worldDir,
    ...(opts.worldHost ? { host: opts.worldHost } : {}),
    as: opts.as ?? {},
  });
  host = await startSignInHost(
    {
      remote: {
        url: world.url,
        enabled: true,
        allowPrivate: true,
        auth: { type: "oauth", allowPrivate: true, scopes: ["read", "write"] },
        ...opts.entry,
      },
    },
    opts.refuseAddress ? { refuseAddress: opts.refuseAddress } : {},
  );
  return { world, host };
}

/** Connect, then the sign-in at the authorization server: the location the browser is sent back to. */
async function locationFor(h: SignInHost, w: OAuthWorld, opts: { deny?: boolean } = {}): Promise<string> {
  const authorizationUrl = await connect(h, "remote");
  return w.as.signInHeadless(authorizationUrl, { login: "alice", ...opts });
}

function withParams(location: string, change: (p: URLSearchParams) => void): string {
  const url = new URL(location);
  change(url.searchParams);
  return url.href;
}

/** The outcomes of the `server.oauth.refused` audit rows of `remote`, in order. */
async function refusals(h: SignInHost): Promise<SignInOutcome[]> {
  const rows = await h.runtime.db
    .select()
    .from(auditEvents)
    .where(and(eq(auditEvents.action, "server.oauth.refused"), eq(auditEvents.subject, "remote")));
  return rows.map((row) => (JSON.parse(row.detail ?? "{}") as { outcome: SignInOutcome }).outcome);
}

function audited(h: SignInHost, action: string) {
  return h.runtime.db
    .select()
    .from(auditEvents)
    .where(and(eq(auditEvents.action, action), eq(auditEvents.subject, "remote")));
}

/** The authorization-code redemptions the authorization server saw. */
function codeExchanges(w: OAuthWorld) {
  return w.as.log.filter((e) => e.kind === "token" && e.grantType === "authorization_code");
}

/** No grant row at all, no tokens, and no token request reached the authorization server. */
async function expectNothingStored(h: SignInHost, w: OAuthWorld): Promise<void> {
  expect(await h.runtime.db.select().from(serverOauth)).toEqual([]);
  expect(await storedTokens(h.runtime, "remote")).toBeNull();
  expect(w.as.log.filter((e) => e.kind === "token")).toEqual([]);
}

describe("a sign-in is refused, and leaves nothing behind", () => {
  it("an authorization response naming another issuer: the code is never exchanged, and the sign-in is used up", async () => {
    const { world, host } = await start();
    const location = await locationFor(host, world);
    expect(new URL(location).searchParams.get("iss")).toBe(world.as.issuer);
    const forged = withParams(location, (p) => p.set("iss", "http://127.0.0.9:4444"));
    expect(await arrive(host, forged)).toMatchObject({ outcome: "issuer_mismatch", server: "remote" });
    await expectNothingStored(host, world);
    expect(await host.runtime.db.select().from(oauthPending)).toEqual([]);
    // The real answer, replayed: the sign-in it belonged to was taken by the forged one.
    expect((await arrive(host, location)).outcome).toBe("expired");
    await expectNothingStored(host, world);
    expect(await refusals(host)).toEqual(["issuer_mismatch"]);
    expect(await audited(host, "server.oauth.connected")).toEqual([]);
    expect(host.runtime.manager.get("remote").snapshot().state).toBe("needs_auth");
  });

  it("an authorization response without iss, from a server that says it sends one (RFC 9207 §2.4)", async () => {
    const { world, host } = await start();
    const location = await locationFor(host, world);
    const stripped = withParams(location, (p) => p.delete("iss"));
    expect(await arrive(host, stripped)).toMatchObject({ outcome: "issuer_mismatch", server: "remote" });
    await expectNothingStored(host, world);
    expect(await refusals(host)).toEqual(["issuer_mismatch"]);
  });

  it("a state delivered to a browser without the sign-in cookie, or with another browser's, is wrong_user", async () => {
    const { world, host } = await start();
    const location = await locationFor(host, world);
    const olgasBinding = host.binding;
    expect(olgasBinding).toMatch(/^gh_oauth=[A-Za-z0-9_-]{43}$/);

    // Another owner's browser presses Connect and gets a binding of its own.
    const oscar = await createTestUser(host.runtime, "oscar", ["owner"]);
    const other: SignInHost = { ...host, cookie: oscar.cookie, binding: null };
    await connect(other, "remote");
    expect(other.binding).toMatch(/^gh_oauth=/);
    expect(other.binding).not.toBe(olgasBinding);

    expect(await arrive(host, location, other.binding)).toMatchObject({
      outcome: "wrong_user",
      server: "remote",
    });
    await expectNothingStored(host, world);
    // The pending sign-in went with that try: olga's own browser now comes back too late.
    expect((await arrive(host, location, olgasBinding)).outcome).toBe("expired");
    await expectNothingStored(host, world);

    // A second sign-in, delivered with no cookie, then with a made-up one.
    const second = await locationFor(host, world);
    expect((await arrive(host, second, null)).outcome).toBe("wrong_user");
    const third = await locationFor(host, world);
    const madeUp = `gh_oauth=${randomBytes(32).toString("base64url")}`;
    expect((await arrive(host, third, madeUp)).outcome).toBe("wrong_user");
    expect((await arrive(host, third)).outcome).toBe("expired");
    await expectNothingStored(host, world);
    expect(await refusals(host)).toEqual(["wrong_user", "wrong_user", "wrong_user"]);
    const refused = await audited(host, "server.oauth.refused");
    // Audited as the owner who started the sign-in, not whoever came back with it.
    expect(refused.map((r) => r.actor)).toEqual(["olga", "olga", "olga"]);
  });

  it("an unknown state, or none, is expired (no server is named, nothing is audited)", async () => {
    const { world, host } = await start();
    const location = await locationFor(host, world);
    const unknown = withParams(location, (p) => p.set("state", randomBytes(32).toString("base64url")));
    expect(await arrive(host, unknown)).toMatchObject({ outcome: "expired", server: null });
    const none = withParams(location, (p) => p.delete("state"));
    expect(await arrive(host, none)).toMatchObject({ outcome: "expired", server: null });
    await expectNothingStored(host, world);
    // Neither could be tied to a sign-in: there is nobody to audit it for.
    expect(await refusals(host)).toEqual([]);
    // The real sign-in is still there and still works.
    expect((await arrive(host, location)).outcome).toBe("connected");
  });

  it("access denied at the authorization server is denied", async () => {
    const { world, host } = await start();
    const location = await locationFor(host, world, { deny: true });
    expect(new URL(location).searchParams.get("error")).toBe("access_denied");
    expect(await arrive(host, location)).toMatchObject({ outcome: "denied", server: "remote" });
    await expectNothingStored(host, world);
    expect(await refusals(host)).toEqual(["denied"]);
  });

  it("a sign-in started more than 10 minutes ago is expired, its code never exchanged", async () => {
    const { world, host } = await start();
    const location = await locationFor(host, world);
    // Aged in the store, as ten minutes would leave it.
    const past = new Date(Date.now() - 1000).toISOString();
    const aged = await host.runtime.db
      .update(oauthPending)
      .set({ expiresAt: past })
      .returning({ stateHash: oauthPending.stateHash });
    expect(aged).toHaveLength(1);
    expect(await arrive(host, location)).toMatchObject({ outcome: "expired", server: "remote" });
    await expectNothingStored(host, world);
    expect(await refusals(host)).toEqual(["expired"]);
    expect(await host.runtime.db.select().from(oauthPending)).toEqual([]);
  });
});

/** 127.0.0.2 plays a public host; every other address is judged by the real policy. */
const PUBLIC_127_0_0_2 = (ip: string) => (ip === "127.0.0.2" ? null : refusedAddressKind(ip));

describe("a token endpoint on a private address", () => {
  /**
   * A server on "public" 127.0.0.2 without allowPrivate whose authorization server advertises
   * `tokenEndpoint`; `asPort` is the authorization server's port (chosen before it starts).
   */
  async function privateTokenEndpoint(tokenEndpoint: (asPort: number) => string) {
    const port = await freePort();
    const started = await start({
      worldHost: "127.0.0.2",
      as: { port, tokenEndpointOverride: tokenEndpoint(port) },
      entry: { allowPrivate: false, auth: { type: "oauth", scopes: ["read", "write"] } },
      refuseAddress: PUBLIC_127_0_0_2,
    });
    // Discovery, registration and the sign-in page are on 127.0.0.2: Connect works.
    const authorizationUrl = await connect(started.host, "remote");
    expect(authorizationUrl.origin).toBe(started.world.as.issuer);
    expect(started.world.as.log.filter((e) => e.kind === "registration")).toEqual([
      expect.objectContaining({ ok: true }),
    ]);
    const location = await started.world.as.signInHeadless(authorizationUrl, { login: "alice" });
    expect(new URL(location).searchParams.get("code")).toBeTruthy();
    return { ...started, location };
  }

  it("a metadata address over https is refused by the guard: refused_address, nothing sent", async () => {
    const { world, host, location } = await privateTokenEndpoint(() => "https://169.254.169.254/token");
    expect(await arrive(host, location)).toMatchObject({ outcome: "refused_address", server: "remote" });
    await expectNothingStored(host, world);
    expect(await refusals(host)).toEqual(["refused_address"]);
    const why = JSON.parse((await audited(host, "server.oauth.refused"))[0]?.detail ?? "{}") as {
      why: string;
    };
    expect(why.why).toMatch(/169\.254\.169\.254.*link-local.*allowPrivate/);
  });

  it("a metadata address over plain http is refused before the guard (the SDK's https rule): failed", async () => {
    const { world, host, location } = await privateTokenEndpoint(() => "http://169.254.169.254/token");
    // The SDK refuses a plain-http token endpoint off loopback itself, so the guard never sees it
    // and the outcome is the generic one.
    expect(await arrive(host, location)).toMatchObject({ outcome: "failed", server: "remote" });
    await expectNothingStored(host, world);
    expect(await refusals(host)).toEqual(["failed"]);
  });

  it("the authorization server's own token endpoint on 127.0.0.1 (loopback) is refused_address", async () => {
    const { world, host, location } = await privateTokenEndpoint((p) => `http://127.0.0.1:${p}/token`);
    expect(await arrive(host, location)).toMatchObject({ outcome: "refused_address", server: "remote" });
    await expectNothingStored(host, world);
    expect(await refusals(host)).toEqual(["refused_address"]);
    const why = JSON.parse((await audited(host, "server.oauth.refused"))[0]?.detail ?? "{}") as {
      why: string;
    };
    expect(why.why).toMatch(/127\.0\.0\.1.*loopback.*allowPrivate/);
  });

  it("with auth.allowPrivate the same loopback token endpoint is used: the rule is auth.allowPrivate's", async () => {
    const port = await freePort();
    const { world, host } = await start({
      as: { port, tokenEndpointOverride: `http://127.0.0.1:${port}/token` },
      entry: { allowPrivate: true },
      refuseAddress: PUBLIC_127_0_0_2,
    });
    expect(await signIn(host, world, "remote")).toBe("connected");
    expect(codeExchanges(world)).toEqual([expect.objectContaining({ ok: true })]);
    expect((await storedTokens(host.runtime, "remote"))?.access).toBeTruthy();
    await waitForState(host, "remote", "ready");
  });
});

/** Resolves once `remote` is neither ready nor connecting: whatever a failed renewal led to. */
async function waitForSettled(h: SignInHost): Promise<void> {
  const settled = () => !["ready", "connecting"].includes(h.runtime.manager.get("remote").snapshot().state);
  await waitForEvent(h.runtime.bus, (e) => e.type === "server" && settled(), {
    already: settled,
    timeoutMs: 20_000,
    what: () => `remote to leave ready (${JSON.stringify(h.runtime.manager.get("remote").snapshot())})`,
  });
}

describe("a grant the authorization server no longer honours", () => {
  it("a refused refresh sends the server to needs_auth, forgets the tokens, and a new sign-in brings it back", async () => {
    const { world, host } = await start();
    expect(await signIn(host, world, "remote")).toBe("connected");
    await waitForState(host, "remote", "ready");
    expect((await callRemote(host)).call.status).toBe("succeeded");

    // The user revokes Gatehouse at the provider: every token of the grant dies.
    await world.as.revokeAll();
    const call = await callRemote(host);
    await waitForSettled(host);
    expect(host.runtime.manager.get("remote").snapshot()).toMatchObject({ state: "needs_auth" });
    expect(call.call.status).toBe("failed");
    expect(call.call.error?.message).toMatch(/server remote waits for an owner to sign in to it/);
    const refreshes = world.as.log.filter((e) => e.kind === "token" && e.grantType === "refresh_token");
    expect(refreshes).toEqual([expect.objectContaining({ ok: false, error: "invalid_grant" })]);

    const view = await viewOf(host, "remote");
    expect(view.auth).toMatchObject({ connected: false });
    expect(view.auth?.reason).toMatch(/authorization server refused to renew the sign-in \(invalid_grant\)/);
    expect(await audited(host, "server.oauth.expired")).toEqual([
      expect.objectContaining({
        actor: "gatehouse",
        detail: expect.stringMatching(/refused to renew.*invalid_grant/),
      }),
    ]);
    // The row stays (its client registration is kept), without tokens.
    expect(await host.runtime.db.select().from(serverOauth)).toHaveLength(1);
    expect(await storedTokens(host.runtime, "remote")).toBeNull();

    expect(await signIn(host, world, "remote")).toBe("connected");
    await waitForState(host, "remote", "ready");
    expect((await callRemote(host)).call.status).toBe("succeeded");
    expect((await viewOf(host, "remote")).auth).toMatchObject({ connected: true, reason: null });
    // The kept registration was used again.
    expect(world.as.log.filter((e) => e.kind === "registration")).toHaveLength(1);
  });
});

describe("only owners sign Gatehouse in", () => {
  it("reviewers, agents, requests without an Origin, stdio and unknown servers are refused", async () => {
    const { host } = await start();
    const rita = await createTestUser(host.runtime, "rita", ["reviewer"]);
    const agent = await createAgentToken(host.runtime, "bot");
    const codeOf = async (res: Response) => ((await res.json()) as { error: { code: string } }).error.code;

    for (const method of ["POST", "DELETE"]) {
      const reviewer = await request(method, "/api/servers/remote/oauth", { cookie: rita.cookie });
      expect([method, reviewer.status, await codeOf(reviewer)]).toEqual([method, 403, "forbidden"]);
      const bot = await request(method, "/api/servers/remote/oauth", { bearer: agent });
      expect([method, bot.status, await codeOf(bot)]).toEqual([method, 403, "forbidden"]);
      const noOrigin = await request(method, "/api/servers/remote/oauth", {
        cookie: host.cookie,
        origin: null,
      });
      expect([method, noOrigin.status, await codeOf(noOrigin)]).toEqual([method, 403, "bad_origin"]);
    }
    // A cross-site page's Connect is no owner's either.
    const elsewhere = await request("POST", "/api/servers/remote/oauth", {
      cookie: host.cookie,
      origin: "http://127.0.0.9:3000",
    });
    expect([elsewhere.status, await codeOf(elsewhere)]).toEqual([403, "bad_origin"]);
    // Nobody was sent anywhere, no sign-in was started.
    expect(await host.runtime.db.select().from(oauthPending)).toEqual([]);

    const demo = await pressConnect(host, "demo");
    expect([demo.status, await codeOf(demo)]).toEqual([409, "not_oauth"]);
    const unknown = await pressConnect(host, "nope");
    expect([unknown.status, await codeOf(unknown)]).toEqual([404, "not_found"]);
    // The owner's own Connect works: the refusals above were the callers'.
    expect((await pressConnect(host, "remote")).status).toBe(200);
  });
});
