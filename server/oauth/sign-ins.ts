import "server-only";
import { randomBytes } from "node:crypto";
import {
  AuthorizationServerMismatchError,
  type AuthProvider,
  auth,
  computeScopeUnion,
  IssuerMismatchError,
  type OAuthClientInformationMixed,
  OAuthError,
  OAuthErrorCode,
  refreshAuthorization,
} from "@modelcontextprotocol/client";
import type { ServerAuthView, SignInOutcome } from "@/lib/api-types";
import { GatehouseError } from "@/lib/errors";
import type { ServerConfig } from "../config";
import { forgetSecrets, type Logger, redact, registerSecrets } from "../log";
import { messageOf, moreScope, oneLine } from "../mcp/failures";
import { type AuthChallenge, SignInRequiredError } from "../mcp/sign-in";
import { type SecretBox, SecretBoxError } from "../secrets";
import { writeAudit } from "../store/audit";
import type { Db } from "../store/db";
import { type AddressPolicy, OAuthFetch } from "./fetch";
import { emptyFlow, FlowProvider, type FlowState } from "./provider";
import { type Revocation, revokeTokens } from "./revoke";
import { type Grant, type GrantSecrets, OAuthStore, type SavedClient, sha256Hex } from "./store";

/** How long a started sign-in waits for the browser to come back. */
export const SIGN_IN_TTL_MS = 10 * 60 * 1000;
/** An access token this close to its expiry is renewed before it is sent. */
export const REFRESH_MARGIN_MS = 60 * 1000;
/** The path the authorization server sends the browser back to. */
export const CALLBACK_PATH = "/oauth/callback";
/** Where Gatehouse serves its client ID metadata document (when its public origin is https). */
export const CLIENT_METADATA_PATH = "/oauth/client-metadata.json";

export interface SignInsDeps {
  db: Db;
  secrets: SecretBox;
  servers: readonly ServerConfig[];
  /** `GATEHOUSE_PUBLIC_ORIGIN`: the callback's origin; otherwise the origin Connect was pressed on. */
  publicOrigin: string | undefined;
  log: Logger;
  /** A grant was stored or forgotten: the server is to be dialled again. */
  onGrantChanged(server: string): void;
  /** Tests pass an address policy under which one loopback address counts as public. */
  refuse?: AddressPolicy;
  clock?: () => number;
  /** Default {@link REFRESH_MARGIN_MS}. */
  refreshMarginMs?: number;
}

/** Who pressed Connect, from which browser and page. */
export interface SignInStart {
  server: string;
  /** The owner's name (audited as the one who connected). */
  actor: string;
  /** The origin of the page Connect was pressed on (already checked against the allow-list). */
  origin: string;
  /** The binding this browser holds from an earlier Connect, kept so both sign-ins come back to it. */
  binding?: string;
}

/** What ended a sign-in at the callback; `server` null when the callback names none Gatehouse knows. */
export interface SignInResult {
  server: string | null;
  outcome: SignInOutcome;
}

/**
 * OAuth sign-ins to remote MCP servers (PRODUCT.md §12): an owner's Connect (authorization code
 * with PKCE S256, `state` and the RFC 8707 resource, discovery by RFC 9728 then RFC 8414 or
 * OpenID configuration, all of it the SDK's `auth()`), the callback (one use, bound to the
 * browser that started it, `iss` checked by RFC 9207), the stored grant (sealed), the bearer
 * tokens a supervisor dials with (renewed before expiry and on a 401), and Disconnect (RFC 7009
 * revocation where offered). Every request goes through the server's outbound guard.
 */
export class OAuthSignIns {
  private readonly store: OAuthStore;
  private readonly byName: Map<string, ServerConfig>;
  private readonly fetches = new Map<string, OAuthFetch>();
  /** Servers whose 401 named their resource metadata, with that challenge. */
  private readonly challenges = new Map<string, AuthChallenge>();
  /** Servers whose 403 asked for scope the grant lacks, with that challenge. */
  private readonly stepUps = new Map<string, AuthChallenge>();
  /** Why a server without a grant waits (after a Disconnect, say); in memory only. */
  private readonly notes = new Map<string, string>();
  /** Opened grants, so a request does not open the sealed row each time. */
  private readonly cache = new Map<string, Grant | null>();
  /** The secrets registered with the log's redaction per server, newest generation last. */
  private readonly registered = new Map<string, string[][]>();
  /** The renewal under way per server, and the grant it renews: requests of that grant share it. */
  private readonly renewals = new Map<string, { grant: Grant | null; done: Promise<void> }>();

  constructor(private readonly deps: SignInsDeps) {
    this.store = new OAuthStore(deps.db, deps.secrets);
    this.byName = new Map(deps.servers.map((s) => [s.name, s]));
  }

  private now(): number {
    return (this.deps.clock ?? Date.now)();
  }

  private config(server: string): ServerConfig {
    const c = this.byName.get(server);
    if (!c) throw new GatehouseError("not_found", `no server named "${server}" is configured`);
    return c;
  }

  private fetchFor(c: ServerConfig) {
    let f = this.fetches.get(c.name);
    if (!f) {
      f = new OAuthFetch(c, this.deps.refuse);
      this.fetches.set(c.name, f);
    }
    return f.fetch;
  }

  /** The grant of `server`, opened (cached); null when none, or when it cannot be opened (said once in the log). */
  private grant(server: string): Grant | null {
    if (this.cache.has(server)) return this.cache.get(server) ?? null;
    let grant: Grant | null = null;
    try {
      grant = this.store.grant(server);
    } catch (err) {
      if (!(err instanceof SecretBoxError)) throw err;
      this.notes.set(
        server,
        `the stored sign-in cannot be opened (${err.message}): an owner must sign in again`,
      );
      this.deps.log.warn(`server ${server}: ${err.message}; its sign-in is treated as absent`);
    }
    if (grant) this.remember(server, grant.secrets);
    this.cache.set(server, grant);
    return grant;
  }

  private save(grant: Grant): void {
    this.store.saveGrant(grant);
    this.remember(grant.server, grant.secrets);
    this.cache.set(grant.server, grant);
  }

  /**
   * Registers a grant's secrets with the log's redaction, and forgets those of generations older
   * than the one before (an access token is renewed every hour or so: registered for good, they
   * would grow the redaction without end). The previous generation stays hidden: its access token
   * may still be valid, and in flight.
   */
  private remember(server: string, secrets: GrantSecrets): void {
    const values = secretValues(secrets);
    registerSecrets(values);
    const generations = [...(this.registered.get(server) ?? []), values].slice(-2);
    const kept = new Set(generations.flat());
    const older = (this.registered.get(server) ?? []).flat().filter((v) => !kept.has(v));
    if (older.length > 0) forgetSecrets(older);
    this.registered.set(server, generations);
  }

  /** Whether `c` signs in with OAuth: configured so, asked for by its 401, or signed in before. */
  private isOAuth(c: ServerConfig): boolean {
    if (c.transport === "stdio") return false;
    return c.auth?.type === "oauth" || this.challenges.has(c.name) || this.grant(c.name) !== null;
  }

  // ------------------------------------------------------------------------------------------
  // What supervisors ask (SignInSource)

  credentialsFor(c: ServerConfig): { provider: AuthProvider } | { needsSignIn: string } | null {
    if (!this.isOAuth(c)) return null;
    const grant = this.grant(c.name);
    if (!grant?.secrets.tokens) return { needsSignIn: this.waiting(c) };
    if (grant.resource !== c.url) {
      return { needsSignIn: URL_CHANGED };
    }
    if (grant.problem) return { needsSignIn: grant.problem };
    return { provider: this.bearer(c) };
  }

  challenged(server: string, challenge: AuthChallenge): void {
    const first = !this.challenges.has(server);
    this.challenges.set(server, challenge);
    if (first) this.deps.log.info(`server ${server} asks for an OAuth sign-in`);
  }

  needsScope(server: string, challenge: AuthChallenge): void {
    // A server without OAuth has no grant to widen: its refusal is the supervisor's to report.
    const c = this.byName.get(server);
    if (!c || !this.isOAuth(c)) return;
    this.stepUps.set(server, challenge);
    this.deps.log.info(`server ${server}: ${moreScope(challenge.scope)}`);
  }

  private waitingReason(c: ServerConfig): string {
    return this.challenges.has(c.name) && c.auth?.type !== "oauth"
      ? "the server asks for an OAuth sign-in (HTTP 401 naming its resource metadata): an owner can press Connect"
      : "nobody has signed in to this server yet: an owner can press Connect";
  }

  /** Why `c` waits for a sign-in now: the grant's problem, a note (a Disconnect), or nobody signed in. */
  private waiting(c: ServerConfig): string {
    return this.grant(c.name)?.problem ?? this.notes.get(c.name) ?? this.waitingReason(c);
  }

  /**
   * The bearer source of a signed-in server: renewed before expiry, and once on a 401. It belongs
   * to the sign-in it was made for (told by when it was connected): once that sign-in has ended
   * (Disconnect, a new sign-in), a 401 on its connection renews nothing and refuses nothing.
   */
  private bearer(c: ServerConfig): AuthProvider {
    const signIn = this.grant(c.name)?.connectedAt ?? null;
    const current = () => {
      const grant = this.grant(c.name);
      return grant?.secrets.tokens && !grant.problem && grant.connectedAt === signIn ? grant : null;
    };
    return {
      token: async () => {
        const grant = current();
        const tokens = grant?.secrets.tokens;
        if (!grant || !tokens) throw new SignInRequiredError(this.waiting(c));
        const expiresAt = grant.accessExpiresAt ? Date.parse(grant.accessExpiresAt) : null;
        const margin = this.deps.refreshMarginMs ?? REFRESH_MARGIN_MS;
        if (expiresAt !== null && expiresAt - margin <= this.now()) {
          if (!tokens.refresh_token) {
            if (expiresAt > this.now()) return tokens.access_token;
            throw new SignInRequiredError(
              this.refuseGrant(
                c,
                grant,
                "the access token expired and the authorization server gave no refresh token: an owner must sign in again",
              ),
            );
          }
          await this.renew(c);
          const renewed = current()?.secrets.tokens?.access_token;
          if (!renewed) throw new SignInRequiredError(this.waiting(c));
          return renewed;
        }
        return tokens.access_token;
      },
      onUnauthorized: async () => {
        if (!current()) throw new SignInRequiredError(this.waiting(c));
        await this.renew(c);
      },
    };
  }

  /**
   * Renews the access token with the refresh token: one renewal per grant at a time (a rotated
   * refresh token works once). A renewal of a grant that has since been replaced is no one
   * else's to wait for.
   */
  private renew(c: ServerConfig): Promise<void> {
    const grant = this.grant(c.name);
    const running = this.renewals.get(c.name);
    if (running && running.grant === grant) return running.done;
    const done = this.renewOnce(c, grant).finally(() => {
      if (this.renewals.get(c.name)?.done === done) this.renewals.delete(c.name);
    });
    this.renewals.set(c.name, { grant, done });
    return done;
  }

  /**
   * One renewal. Its answer is kept only for the grant it started from: a grant saved or
   * forgotten meanwhile (a Disconnect, a new sign-in) wins, and a late answer, tokens or refusal,
   * is dropped rather than bringing back or spoiling what is there now.
   */
  private async renewOnce(c: ServerConfig, grant: Grant | null): Promise<void> {
    const tokens = grant?.secrets.tokens;
    const discovery = grant?.secrets.discovery;
    if (!grant || !tokens) throw new SignInRequiredError(this.waiting(c));
    if (!tokens.refresh_token || !discovery) {
      throw new SignInRequiredError(
        this.refuseGrant(
          c,
          grant,
          "the server refused the access token and there is no refresh token: an owner must sign in again",
        ),
      );
    }
    const client = this.clientOf(c, grant.secrets);
    if (!client) {
      throw new SignInRequiredError(
        this.refuseGrant(c, grant, "the registered client was lost: an owner must sign in again"),
      );
    }
    let renewed: Awaited<ReturnType<typeof refreshAuthorization>>;
    try {
      renewed = await refreshAuthorization(discovery.authorizationServerUrl, {
        metadata: discovery.authorizationServerMetadata,
        clientInformation: client,
        refreshToken: tokens.refresh_token,
        ...(grant.secrets.resource ? { resource: new URL(grant.secrets.resource) } : {}),
        fetchFn: this.fetchFor(c),
      });
    } catch (err) {
      // Superseded while it ran: its refusal, like its tokens, was about a grant that is gone.
      if (this.grant(c.name) !== grant) return;
      if (err instanceof OAuthError && REFUSED_GRANT.has(err.code)) {
        // A client the authorization server no longer knows is registered anew at the next Connect.
        const clientGone = err.code !== OAuthErrorCode.InvalidGrant;
        throw new SignInRequiredError(
          this.refuseGrant(
            c,
            grant,
            `the authorization server refused to renew the sign-in (${err.code}): an owner must sign in again`,
            clientGone,
          ),
        );
      }
      // Unreached, a 5xx, a refused address: worth another try, at the supervisor's pace.
      this.deps.log.warn(`server ${c.name}: renewing the access token failed: ${shortWhy(err)}`);
      throw err;
    }
    if (this.grant(c.name) !== grant) {
      this.deps.log.info(`server ${c.name}: a renewal ended after its sign-in did; its tokens are dropped`);
      return;
    }
    const now = this.now();
    const next: Grant = {
      ...grant,
      secrets: { ...grant.secrets, tokens: { ...renewed, issuer: tokens.issuer, obtainedAt: now } },
      scope: renewed.scope ?? grant.scope,
      accessExpiresAt: expiryOf(renewed.expires_in, now),
      refreshedAt: new Date(now).toISOString(),
    };
    this.save(next);
    this.deps.log.info(`server ${c.name}: access token renewed`, { expiresAt: next.accessExpiresAt });
  }

  /**
   * Forgets the tokens of `grant`, which the authorization server no longer honours, keeping its
   * client registration unless `dropClient`, and records `reason` (audited); returns it, for the
   * error thrown. Nothing is written when `grant` is no longer the server's current one.
   */
  private refuseGrant(c: ServerConfig, grant: Grant, reason: string, dropClient = false): string {
    if (this.grant(c.name) !== grant) return this.waiting(c);
    const { tokens: _, client, ...rest } = grant.secrets;
    const secrets = dropClient || !client ? rest : { ...rest, client };
    this.deps.db.transaction(() => {
      this.save({ ...grant, secrets, accessExpiresAt: null, problem: reason });
      writeAudit(this.deps.db, {
        actor: "gatehouse",
        action: "server.oauth.expired",
        subject: c.name,
        detail: reason,
      });
    });
    this.deps.log.warn(`server ${c.name}: ${reason}`);
    return reason;
  }

  /** The client to authenticate as: the configured one, else the one registered and kept. */
  private clientOf(c: ServerConfig, secrets: GrantSecrets): OAuthClientInformationMixed | null {
    const auth = c.auth;
    if (auth?.clientId) {
      return { client_id: auth.clientId, ...(auth.clientSecret ? { client_secret: auth.clientSecret } : {}) };
    }
    if (!secrets.client) return null;
    const { redirectUri: _, issuer: __, ...client } = secrets.client;
    return client;
  }

  // ------------------------------------------------------------------------------------------
  // What owners do

  /**
   * Starts an owner's sign-in: discovery, registration when needed, the authorization URL. Returns
   * it with the value of the cookie that binds the sign-in to this browser (set by the route).
   * The scope asked for is the union of the entry's scopes, the ones granted before and the ones
   * the server's latest `insufficient_scope` named, so a step-up keeps what was granted.
   */
  async begin(start: SignInStart): Promise<{ authorizationUrl: string; binding: string }> {
    const c = this.config(start.server);
    if (c.transport === "stdio" || !this.isOAuth(c)) {
      throw new GatehouseError(
        "not_oauth",
        `server ${c.name} does not sign in with OAuth: set "auth": {"type": "oauth"} on it in gatehouse.json`,
      );
    }
    const serverUrl = c.url ?? "";
    const origin = (this.deps.publicOrigin ?? start.origin).replace(/\/$/, "");
    const redirectUri = `${origin}${CALLBACK_PATH}`;
    const grant = this.grant(c.name);
    const stepUp = this.stepUps.get(c.name);
    const scope =
      computeScopeUnion(
        c.auth && c.auth.scopes.length > 0 ? c.auth.scopes.join(" ") : undefined,
        grant?.scope ?? undefined,
        stepUp?.scope ?? undefined,
      ) ?? null;
    const state = randomBytes(32).toString("base64url");
    const flow = emptyFlow(state);
    flow.client = this.reusableClient(c.name, grant, stepUp !== undefined);
    const provider = this.provider(c, flow, redirectUri, scope);
    const challenge = this.challenges.get(c.name) ?? stepUp;
    try {
      const result = await auth(provider, {
        serverUrl,
        ...(scope ? { scope } : {}),
        ...(challenge?.resourceMetadataUrl
          ? { resourceMetadataUrl: new URL(challenge.resourceMetadataUrl) }
          : {}),
        fetchFn: this.fetchFor(c),
        forceReauthorization: true,
      });
      if (result !== "REDIRECT" || !flow.authorizationUrl || !flow.codeVerifier) {
        throw new Error("the authorization server gave no authorization URL");
      }
      checkAuthorizationUrl(flow.authorizationUrl);
    } catch (err) {
      throw this.unavailable(c, err);
    }
    const binding = start.binding ?? randomBytes(32).toString("base64url");
    this.store.savePending(
      sha256Hex(state),
      {
        server: c.name,
        bindingHash: sha256Hex(binding),
        startedBy: start.actor,
        expiresAt: new Date(this.now() + SIGN_IN_TTL_MS).toISOString(),
        secrets: {
          codeVerifier: flow.codeVerifier,
          discovery: flow.discovery,
          client: flow.client,
          redirectUri,
          scope,
          resource: serverUrl,
        },
      },
      this.now(),
    );
    const issuer =
      flow.discovery?.authorizationServerMetadata?.issuer ?? flow.discovery?.authorizationServerUrl;
    writeAudit(this.deps.db, {
      actor: start.actor,
      action: "server.oauth.started",
      subject: c.name,
      detail: JSON.stringify({ issuer: issuer ?? null, scope }),
    });
    return { authorizationUrl: flow.authorizationUrl.href, binding };
  }

  /**
   * The registration a Connect may use again, or null to register anew: not for a step-up
   * (authorization servers hold a registered client to the scope it registered with), not once its
   * secret has expired (RFC 7591 `client_secret_expires_at`), and not while an earlier sign-in of
   * this server never came back (its authorization server may have refused the client on its own
   * page, where Gatehouse cannot see it: a client it forgot would otherwise be sent for good).
   */
  private reusableClient(server: string, grant: Grant | null, stepUp: boolean): SavedClient | null {
    const client = grant?.secrets.client;
    if (!client || stepUp || this.store.hasPending(server)) return null;
    const expiresAt = client.client_secret_expires_at;
    if (typeof expiresAt === "number" && expiresAt > 0 && expiresAt * 1000 <= this.now()) return null;
    return client;
  }

  /** A sign-in that could not start, in the owner's words (the guard's refusal said as it is). */
  private unavailable(c: ServerConfig, err: unknown): GatehouseError {
    const why = shortWhy(err);
    this.deps.log.warn(`server ${c.name}: the sign-in could not start: ${why}`);
    return new GatehouseError("sign_in_unavailable", `the sign-in to ${c.name} could not start: ${why}`);
  }

  private provider(
    c: ServerConfig,
    flow: FlowState,
    redirectUri: string,
    scope: string | null,
  ): FlowProvider {
    const origin = this.deps.publicOrigin?.replace(/\/$/, "");
    const auth = c.auth;
    return new FlowProvider(flow, {
      redirectUri,
      clientMetadataUrl: origin?.startsWith("https://") ? `${origin}${CLIENT_METADATA_PATH}` : null,
      configured: auth?.clientId ? { clientId: auth.clientId, clientSecret: auth.clientSecret } : null,
      scope,
      ...(this.deps.clock ? { clock: this.deps.clock } : {}),
    });
  }

  /**
   * The authorization server sent the browser back: `params` is the callback's query, `binding`
   * the sign-in cookie's value. The started sign-in is used up whatever the outcome; a grant is
   * stored only when the code was exchanged with the authorization server that was asked.
   */
  async finish(params: URLSearchParams, binding: string | null): Promise<SignInResult> {
    const state = params.get("state");
    const pending = state ? this.store.takePending(sha256Hex(state)) : null;
    if (!pending) {
      this.deps.log.warn(
        "a sign-in came back with a state Gatehouse does not hold (used already, cleaned up after 10 minutes, or never issued here); nothing was stored",
      );
      return { server: null, outcome: "expired" };
    }
    const server = pending.server;
    const c = this.byName.get(server);
    const refuse = (outcome: SignInOutcome, why: string): SignInResult => {
      writeAudit(this.deps.db, {
        actor: pending.startedBy,
        action: "server.oauth.refused",
        subject: server,
        detail: JSON.stringify({ outcome, why }),
      });
      this.deps.log.warn(`server ${server}: a sign-in was refused: ${why}`);
      return { server: c ? server : null, outcome };
    };
    if (!c) return refuse("failed", "the server is no longer configured");
    if (Date.parse(pending.expiresAt) <= this.now())
      return refuse("expired", "the sign-in took longer than 10 minutes");
    if (binding === null || sha256Hex(binding) !== pending.bindingHash) {
      return refuse("wrong_user", "the sign-in came back to a browser that did not start it");
    }
    const error = params.get("error");
    if (error !== null) {
      const code = /^[a-z_]{1,64}$/.test(error) ? error : "an unreadable error";
      return refuse(
        error === "access_denied" ? "denied" : "failed",
        `the authorization server answered ${code}`,
      );
    }
    const code = params.get("code");
    if (!code) return refuse("failed", "the authorization server sent no code");
    const secrets = pending.secrets;
    const flow: FlowState = {
      ...emptyFlow(state ?? ""),
      codeVerifier: secrets.codeVerifier,
      discovery: secrets.discovery,
      client: secrets.client,
    };
    const provider = this.provider(c, flow, secrets.redirectUri, secrets.scope);
    try {
      await auth(provider, {
        serverUrl: secrets.resource,
        authorizationCode: code,
        ...(params.has("iss") ? { iss: params.get("iss") ?? "" } : {}),
        ...(secrets.scope ? { scope: secrets.scope } : {}),
        fetchFn: this.fetchFor(c),
      });
    } catch (err) {
      if (err instanceof IssuerMismatchError || err instanceof AuthorizationServerMismatchError) {
        return refuse(
          "issuer_mismatch",
          "the authorization response came from another issuer than the one asked (RFC 9207)",
        );
      }
      const why = shortWhy(err);
      if (isRefusedAddress(err)) return refuse("refused_address", why);
      return refuse("failed", `exchanging the code failed: ${why}`);
    }
    const tokens = flow.tokens;
    if (!tokens) return refuse("failed", "the authorization server gave no tokens");
    const now = this.now();
    const issuer = tokens.issuer ?? flow.discovery?.authorizationServerMetadata?.issuer ?? null;
    const grant: Grant = {
      server,
      resource: secrets.resource,
      secrets: {
        ...(flow.client ? { client: flow.client } : {}),
        tokens,
        ...(flow.discovery ? { discovery: flow.discovery } : {}),
        ...(flow.resource ? { resource: flow.resource } : {}),
      },
      issuer,
      scope: tokens.scope ?? secrets.scope,
      accessExpiresAt: expiryOf(tokens.expires_in, now),
      connectedBy: pending.startedBy,
      connectedAt: new Date(now).toISOString(),
      refreshedAt: null,
      problem: null,
    };
    this.deps.db.transaction(() => {
      this.save(grant);
      writeAudit(this.deps.db, {
        actor: pending.startedBy,
        action: "server.oauth.connected",
        subject: server,
        detail: JSON.stringify({ issuer, scope: grant.scope }),
      });
    });
    this.stepUps.delete(server);
    this.notes.delete(server);
    this.deps.log.info(
      `server ${server}: signed in at ${issuer ?? "its authorization server"} by ${pending.startedBy}`,
    );
    this.deps.onGrantChanged(server);
    return { server, outcome: "connected" };
  }

  /**
   * Forgets `server`'s grant, revoking its tokens first where the authorization server offers
   * revocation (RFC 7009); the grant is forgotten whatever the revocation's outcome. Audited.
   */
  async disconnect(server: string, actor: string): Promise<Revocation> {
    const c = this.config(server);
    const grant = this.grant(server);
    if (!grant?.secrets.tokens) throw new GatehouseError("not_signed_in", `nobody is signed in to ${server}`);
    const { revocation, problem } = await revokeTokens({
      endpoint: revocationEndpoint(grant.secrets),
      tokens: grant.secrets.tokens,
      client: this.clientOf(c, grant.secrets),
      fetch: this.fetchFor(c),
    });
    // The client registration is kept, for the next Connect: forgotten, every reconnect would
    // leave one more registered client behind at the authorization server.
    const { tokens: _, ...kept } = grant.secrets;
    this.deps.db.transaction(() => {
      if (kept.client) {
        this.save({
          ...grant,
          secrets: kept,
          scope: null,
          accessExpiresAt: null,
          connectedBy: null,
          connectedAt: null,
          refreshedAt: null,
          problem: null,
        });
      } else {
        this.store.deleteGrant(server);
      }
      this.store.dropPending(server);
      writeAudit(this.deps.db, {
        actor,
        action: "server.oauth.disconnected",
        subject: server,
        detail: JSON.stringify({ revocation, ...(problem ? { problem: oneLine(redact(problem)) } : {}) }),
      });
    });
    if (!kept.client) this.cache.set(server, null);
    this.stepUps.delete(server);
    this.notes.set(server, `disconnected by ${actor}: an owner can press Connect to sign in again`);
    if (problem)
      this.deps.log.warn(`server ${server}: revoking its tokens failed: ${oneLine(redact(problem))}`);
    this.deps.log.info(`server ${server}: disconnected by ${actor} (${revocation})`);
    this.deps.onGrantChanged(server);
    return revocation;
  }

  // ------------------------------------------------------------------------------------------
  // What owners see

  /** The sign-in part of `c`'s view; null for a server without OAuth. */
  view(c: ServerConfig): ServerAuthView | null {
    if (!this.isOAuth(c)) return null;
    const grant = this.grant(c.name);
    const moved = grant?.secrets.tokens !== undefined && grant.resource !== c.url;
    const connected = grant?.secrets.tokens !== undefined && grant.problem === null && !moved;
    const stepUp = this.stepUps.get(c.name);
    const origin = this.deps.publicOrigin?.replace(/\/$/, "");
    const client = c.auth?.clientId
      ? c.auth.clientId
      : origin?.startsWith("https://")
        ? `${origin}${CLIENT_METADATA_PATH} (or registered dynamically where that is not supported)`
        : grant?.secrets.client
          ? "registered dynamically"
          : "registered dynamically at the first sign-in";
    let reason: string | null = null;
    if (moved) reason = URL_CHANGED;
    else if (!connected) reason = grant?.problem ?? this.notes.get(c.name) ?? this.waitingReason(c);
    else if (stepUp) reason = moreScope(stepUp.scope);
    return {
      kind: "oauth",
      source: c.auth?.type === "oauth" ? "config" : "challenge",
      connected,
      issuer: grant?.issuer ?? null,
      scopes: connected ? splitScope(grant?.scope) : (c.auth?.scopes ?? []),
      connectedBy: connected ? (grant?.connectedBy ?? null) : null,
      connectedAt: connected ? (grant?.connectedAt ?? null) : null,
      expiresAt: connected ? (grant?.accessExpiresAt ?? null) : null,
      client,
      reason,
    };
  }

  async close(): Promise<void> {
    await Promise.all([...this.fetches.values()].map((f) => f.close()));
    this.fetches.clear();
  }
}

/**
 * The browser is sent only to an https authorization endpoint, or plain http on loopback (a
 * development server on this machine, as the SDK allows for token endpoints): the URL comes from
 * metadata the server's side wrote, and a `javascript:` or plain-http remote one is no sign-in page.
 */
export function checkAuthorizationUrl(url: URL): void {
  const host = url.hostname.replace(/^\[|\]$/g, "");
  const loopback = host === "localhost" || host === "::1" || /^127\.\d+\.\d+\.\d+$/.test(host);
  if (url.protocol === "https:" || (url.protocol === "http:" && loopback)) return;
  throw new Error(
    `the authorization endpoint ${url.protocol === "http:" ? "is plain http on a remote host" : `uses ${url.protocol}`}; only https is followed`,
  );
}

const URL_CHANGED = "the server's URL changed since the sign-in: an owner must sign in again";

/** Error codes with which an authorization server says a grant or client is no longer good. */
const REFUSED_GRANT = new Set<string>([
  OAuthErrorCode.InvalidGrant,
  OAuthErrorCode.InvalidClient,
  OAuthErrorCode.UnauthorizedClient,
]);

/**
 * An error in the owner's words, as the log, the audit and an API error carry it: an
 * authorization server's error text is its own (its `error_description`, a whole error body), so
 * it is cut to one short line, with Gatehouse's secrets redacted.
 */
function shortWhy(err: unknown): string {
  return oneLine(redact(messageOf(err)));
}

function splitScope(scope: string | null | undefined): string[] {
  return (scope ?? "").split(" ").filter((s) => s.length > 0);
}

function expiryOf(expiresIn: number | undefined, now: number): string | null {
  return typeof expiresIn === "number" && Number.isFinite(expiresIn) && expiresIn > 0
    ? new Date(now + expiresIn * 1000).toISOString()
    : null;
}

/** The values of a grant that must never reach a log line. */
function secretValues(secrets: GrantSecrets): string[] {
  const out: string[] = [];
  if (secrets.tokens?.access_token) out.push(secrets.tokens.access_token);
  if (secrets.tokens?.refresh_token) out.push(secrets.tokens.refresh_token);
  if (secrets.tokens?.id_token) out.push(secrets.tokens.id_token);
  if (secrets.client?.client_secret) out.push(secrets.client.client_secret);
  // RFC 7592's management token, when the registration answer carried one (the SDK keeps it).
  const management = (secrets.client as { registration_access_token?: unknown } | undefined)
    ?.registration_access_token;
  if (typeof management === "string") out.push(management);
  return out;
}

/** RFC 8414's `revocation_endpoint` of the metadata found at sign-in (a string, else none). */
function revocationEndpoint(secrets: GrantSecrets): string | undefined {
  const metadata = secrets.discovery?.authorizationServerMetadata as
    | { revocation_endpoint?: unknown }
    | undefined;
  return typeof metadata?.revocation_endpoint === "string" ? metadata.revocation_endpoint : undefined;
}

function isRefusedAddress(err: unknown): boolean {
  for (let e: unknown = err, i = 0; e instanceof Error && i < 8; e = e.cause, i++) {
    const code = (e as { code?: unknown }).code;
    if (code === "GATEHOUSE_REFUSED_ADDRESS" || code === "GATEHOUSE_REDIRECT_REFUSED") return true;
  }
  return false;
}
