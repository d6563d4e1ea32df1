// biome-ignore-all lint/suspicious/noTemplateCurlyInString: the config's ${VAR} references are literal here.
/**
 * What a tool server that lies about its OAuth world cannot make Gatehouse do, against a real
 * hostile server (test/fixtures/oauth/hostile-server.mjs: wrong issuer, endless answers, private
 * and link-local URLs in its metadata) and the real authorization server (oidc-provider): a
 * configured client's secret goes only to its configured issuer, every answer of the flow is
 * capped as it streams, and the server's `allowPrivate` covers its own URL only.
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { and, eq } from "drizzle-orm";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { emptyFlow, FlowProvider } from "@/server/oauth/provider";
import { OAuthStore } from "@/server/oauth/store";
import { auditEvents, oauthPending } from "@/server/store/schema";
import { installLoopbackOnly } from "@/test/fixtures/net/loopback-only";
import { type HostileServer, startHostileServer } from "@/test/fixtures/oauth/hostile-server.mjs";
import {
  arrive,
  type OAuthWorld,
  pressConnect,
  type SignInHost,
  signIn,
  startOAuthWorld,
  startSignInHost,
  storedTokens,
  viewOf,
} from "@/test/support/oauth";
import { ORIGIN, request, startTestRuntime } from "@/test/support/runtime";

const SECRET = "cs-7Hq2-static-client-secret-value";
const MiB = 1024 * 1024;

let host: SignInHost | null = null;
let world: OAuthWorld | null = null;
const hostiles: HostileServer[] = [];
let removeNet: (() => void) | null = null;

// Metadata here names 169.254.169.254: should anything dial it, it fails here instead of leaving the machine.
beforeAll(() => {
  removeNet = installLoopbackOnly();
});
afterAll(() => removeNet?.());

afterEach(async () => {
  await host?.rt.stop();
  await world?.close();
  for (const h of hostiles.splice(0)) await h.close();
  host = null;
  world = null;
});

async function hostile(opts: Parameters<typeof startHostileServer>[0] = {}): Promise<HostileServer> {
  const h = await startHostileServer(opts);
  hostiles.push(h);
  return h;
}

/** A Gatehouse with `entry` as the server `remote` (enabled, allowPrivate: it is on loopback). */
async function gatehouse(
  entry: Record<string, unknown>,
  env: Record<string, string> = {},
): Promise<SignInHost> {
  host = await startSignInHost({ remote: { enabled: true, allowPrivate: true, ...entry } }, { env });
  return host;
}

/** Connect, answered with an error: its code and message. */
async function refusedConnect(h: SignInHost): Promise<{ status: number; code: string; message: string }> {
  const res = await pressConnect(h, "remote");
  const body = (await res.json()) as { error?: { code: string; message: string }; authorizationUrl?: string };
  expect(res.status, `Connect answered ${res.status} ${JSON.stringify(body)}`).not.toBe(200);
  return { status: res.status, code: body.error?.code ?? "", message: body.error?.message ?? "" };
}

/** Connect, then the hostile authorization page, followed by hand: where it sends the browser back. */
async function hostileLocation(h: SignInHost): Promise<string> {
  const res = await pressConnect(h, "remote");
  const body = (await res.json()) as { authorizationUrl?: string };
  expect(res.status, JSON.stringify(body)).toBe(200);
  const page = await fetch(body.authorizationUrl ?? "", { redirect: "manual" });
  return page.headers.get("location") ?? "";
}

function audited(h: SignInHost, action: string) {
  return h.runtime.db
    .select()
    .from(auditEvents)
    .where(and(eq(auditEvents.action, action), eq(auditEvents.subject, "remote")));
}

/** The real authorization server with Gatehouse registered in advance as a confidential client. */
async function worldWithStaticClient(): Promise<OAuthWorld> {
  world = await startOAuthWorld({
    dir: mkdtempSync(path.join(tmpdir(), "gh-oauth-")),
    as: {
      staticClients: [
        {
          client_id: "gatehouse-static",
          client_secret: SECRET,
          redirect_uris: [`${ORIGIN}/oauth/callback`],
          token_endpoint_auth_method: "client_secret_basic",
          scope: "read write offline_access",
        },
      ],
    },
  });
  return world;
}

const configuredClient = (issuer: string) => ({
  type: "oauth",
  scopes: ["read"],
  clientId: "gatehouse-static",
  clientSecret: "${STATIC_SECRET}",
  issuer,
  allowPrivate: true,
});

describe("a configured client belongs to its issuer", () => {
  it("a configured client's secret never reaches an authorization server other than its issuer", async () => {
    const real = await worldWithStaticClient();
    const liar = await hostile();
    const h = await gatehouse(
      { url: liar.url, auth: configuredClient(real.as.issuer) },
      { STATIC_SECRET: SECRET },
    );
    const refused = await refusedConnect(h);
    expect(refused.code).toBe("sign_in_unavailable");
    expect(refused.message).toContain(liar.origin);
    expect(refused.message).toContain(real.as.issuer);
    expect(refused.message).not.toContain(SECRET);
    // Nothing but discovery reached the liar: no registration, no token request, no credential.
    expect(liar.log.filter((r) => r.authorization !== null || r.method === "POST")).toEqual([]);
    expect(liar.log.filter((r) => r.path === "/authorize")).toEqual([]);
    expect(await h.runtime.db.select().from(oauthPending)).toEqual([]);
  });

  it("at its issuer, the configured client signs in, and the grant names that issuer", async () => {
    const real = await worldWithStaticClient();
    const h = await gatehouse(
      { url: real.url, auth: configuredClient(real.as.issuer) },
      { STATIC_SECRET: SECRET },
    );
    expect(await signIn(h, real, "remote")).toBe("connected");
    expect(real.as.log.filter((e) => e.kind === "registration")).toEqual([]);
    expect(real.as.log.filter((e) => e.kind === "token")).toEqual([
      expect.objectContaining({ clientId: "gatehouse-static", ok: true }),
    ]);
    expect((await viewOf(h, "remote")).auth).toMatchObject({ connected: true, issuer: real.as.issuer });
  });

  it("a configured client is never stamped with a discovered issuer, and refuses any other", () => {
    const provider = new FlowProvider(emptyFlow("s"), {
      redirectUri: `${ORIGIN}/oauth/callback`,
      clientMetadataUrl: null,
      configured: { clientId: "c1", clientSecret: SECRET, issuer: "https://as.example" },
      scope: null,
    });
    expect(provider.clientInformation({ issuer: "https://as.example/" })).toMatchObject({
      client_id: "c1",
      issuer: "https://as.example",
    });
    expect(() => provider.clientInformation({ issuer: "https://evil.example" })).toThrow(
      /https:\/\/evil\.example.*not https:\/\/as\.example/,
    );
  });

  it("revokes a configured client's tokens only at its issuer", async () => {
    const real = await worldWithStaticClient();
    const liar = await hostile();
    const h = await gatehouse(
      { url: real.url, auth: configuredClient(real.as.issuer) },
      { STATIC_SECRET: SECRET },
    );
    expect(await signIn(h, real, "remote")).toBe("connected");
    // A grant whose recorded discovery names another authorization server (stored by an earlier
    // version, or the config's issuer changed since): its revocation endpoint is not the issuer's.
    const store = new OAuthStore(h.runtime.db, h.runtime.secrets);
    const grant = await store.grant("remote");
    const discovery = grant?.secrets.discovery;
    if (!grant || !discovery?.authorizationServerMetadata) throw new Error("no grant");
    await store.saveGrant({
      ...grant,
      secrets: {
        ...grant.secrets,
        discovery: {
          ...discovery,
          authorizationServerUrl: liar.origin,
          authorizationServerMetadata: {
            ...discovery.authorizationServerMetadata,
            issuer: liar.origin,
            revocation_endpoint: `${liar.origin}/revoke`,
          },
        },
      },
    });
    const h2 = await restartOn(h, { url: real.url, auth: configuredClient(real.as.issuer) });
    const res = await request("DELETE", "/api/servers/remote/oauth", { cookie: h2.cookie });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { revocation: string }).revocation).toBe("failed");
    expect(liar.log).toEqual([]);
    const [row] = await audited(h2, "server.oauth.disconnected");
    expect(row?.detail).toMatch(/not revoked.*issuer/);
    expect(row?.detail).not.toContain(SECRET);
  });
});

/** The same Gatehouse (its database) started again with `entry`: a config change, or a grant tampered with. */
async function restartOn(h: SignInHost, entry: Record<string, unknown>): Promise<SignInHost> {
  const dir = h.rt.dir;
  await h.rt.stop({ keepDir: true });
  const rt = await startTestRuntime({
    dir,
    ...(h.rt.databaseUrl ? { databaseUrl: h.rt.databaseUrl } : {}),
    servers: { remote: { enabled: true, allowPrivate: true, ...entry } },
    env: { STATIC_SECRET: SECRET },
  });
  host = { rt, runtime: rt.runtime, cookie: h.cookie, binding: null };
  return host;
}

describe("every answer of the flow is capped as it streams", () => {
  for (const kind of ["resource-metadata", "metadata", "registration"] as const) {
    it(`an endless ${kind} answer is refused past 1 MiB, without being read to its end`, async () => {
      const liar = await hostile({ oversize: [kind], oversizeBytes: 64 * MiB });
      const h = await gatehouse({ url: liar.url, auth: { type: "oauth" } });
      const refused = await refusedConnect(h);
      expect(refused.code).toBe("sign_in_unavailable");
      expect(refused.message).toMatch(/larger than 1 MiB/);
      expect(refused.message).toContain(kind === "registration" ? "registration" : "metadata");
      expect(liar.sent).toBeLessThan(16 * MiB);
    });
  }

  it("an endless token answer fails the sign-in past 1 MiB, naming it", async () => {
    const liar = await hostile({ oversize: ["token"], oversizeBytes: 64 * MiB });
    const h = await gatehouse({ url: liar.url, auth: { type: "oauth" } });
    const location = await hostileLocation(h);
    expect((await arrive(h, location)).outcome).toBe("failed");
    const why = JSON.parse((await audited(h, "server.oauth.refused"))[0]?.detail ?? "{}") as { why?: string };
    expect(why.why).toMatch(/token.*larger than 1 MiB/);
    expect(await storedTokens(h.runtime, "remote")).toBeNull();
    expect(liar.sent).toBeLessThan(16 * MiB);
  });
});

describe("allowPrivate covers the server's own URL only", () => {
  it("a server allowed a private address cannot send Gatehouse to another private host through its metadata", async () => {
    const other = await hostile();
    const liar = await hostile({ endpoints: { registration_endpoint: `${other.origin}/register` } });
    const h = await gatehouse({ url: liar.url, auth: { type: "oauth" } });
    const refused = await refusedConnect(h);
    expect(refused.message).toMatch(/127\.0\.0\.1.*loopback.*auth\.allowPrivate/);
    expect(other.log).toEqual([]);
  });

  it("nor to a link-local metadata address named as its authorization server", async () => {
    const liar = await hostile({ authorizationServers: ["http://169.254.169.254"] });
    const h = await gatehouse({ url: liar.url, auth: { type: "oauth" } });
    const refused = await refusedConnect(h);
    expect(refused.message).toMatch(/169\.254\.169\.254.*link-local.*auth\.allowPrivate/);
  });

  it("auth.allowPrivate lets the other private hosts of the flow be used", async () => {
    const other = await hostile();
    const liar = await hostile({ endpoints: { registration_endpoint: `${other.origin}/register` } });
    const h = await gatehouse({ url: liar.url, auth: { type: "oauth", allowPrivate: true } });
    expect((await pressConnect(h, "remote")).status).toBe(200);
    expect(other.log).toEqual([expect.objectContaining({ method: "POST", path: "/register" })]);
  });
});
