import "server-only";
import type { OAuthClientInformationMixed } from "@modelcontextprotocol/client";
import { GatehouseError } from "@/lib/errors";
import type { ServerConfig } from "../config";
import { forgetSecrets, type Logger, registerSecrets } from "../log";
import type { AuthChallenge } from "../mcp/sign-in";
import { type SecretBox, SecretBoxError } from "../secrets";
import { type AuditParams, writeAudit } from "../store/audit";
import { type Db, transaction } from "../store/db";
import { type AddressPolicy, OAuthFetch } from "./fetch";
import { FlowProvider, type FlowState, sameIssuer } from "./provider";
import { type Grant, type GrantSecrets, OAuthStore } from "./store";
import { secretValues } from "./text";

/**
 * What the sign-in modules share about every OAuth server: its config, its guarded fetch, the
 * challenges its 401 and 403 answers carried, the grants (read and opened once at the start,
 * {@link SignInState.load}, then kept in memory as they are written, their secrets registered with
 * the log's redaction), why it waits for a sign-in, and the few rules every step
 * applies the same way (which client to authenticate as, how a grant the authorization server no
 * longer honours is put aside). The steps themselves (starting a sign-in, its callback, renewal,
 * Disconnect) live in their own modules and read and write through this.
 */

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
  /**
   * A grant was written to the store or deleted there (a sign-in, a renewal, a refusal, a
   * Disconnect), once committed: the other replicas are to read it again ({@link SignInState.reload}).
   * Default: nothing (one process alone).
   */
  onGrantWritten?(server: string): void;
  /** Tests pass an address policy under which one loopback address counts as public. */
  refuse?: AddressPolicy;
  clock?: () => number;
  /** Default {@link REFRESH_MARGIN_MS}. */
  refreshMarginMs?: number;
}

export class SignInState {
  readonly store: OAuthStore;
  private readonly byName: Map<string, ServerConfig>;
  private readonly fetches = new Map<string, OAuthFetch>();
  /** Servers whose 401 named their resource metadata, with that challenge. */
  readonly challenges = new Map<string, AuthChallenge>();
  /** Servers whose 403 asked for scope the grant lacks, with that challenge. */
  readonly stepUps = new Map<string, AuthChallenge>();
  /** Why a server without a grant waits (after a Disconnect, say); in memory only. */
  readonly notes = new Map<string, string>();
  /**
   * The opened grant of every configured server (null: none), read by {@link load} and kept
   * current by every write: a supervisor asks how to dial without waiting for the store, and a
   * request does not open the sealed row each time.
   */
  readonly cache = new Map<string, Grant | null>();
  /** The grant change under way (see {@link changing}); never rejects. */
  private changes: Promise<unknown> = Promise.resolve();
  /** The secrets registered with the log's redaction per server, newest generation last. */
  private readonly registered = new Map<string, string[][]>();

  constructor(readonly deps: SignInsDeps) {
    this.store = new OAuthStore(deps.db, deps.secrets);
    this.byName = new Map(deps.servers.map((s) => [s.name, s]));
  }

  now(): number {
    return (this.deps.clock ?? Date.now)();
  }

  /** The configured server `server`, or undefined. */
  find(server: string): ServerConfig | undefined {
    return this.byName.get(server);
  }

  config(server: string): ServerConfig {
    const c = this.byName.get(server);
    if (!c) throw new GatehouseError("not_found", `no server named "${server}" is configured`);
    return c;
  }

  fetchFor(c: ServerConfig) {
    let f = this.fetches.get(c.name);
    if (!f) {
      f = new OAuthFetch(c, this.deps.refuse);
      this.fetches.set(c.name, f);
    }
    return f.fetch;
  }

  /**
   * Reads and opens the grant of every configured server into the cache; one that cannot be
   * opened counts as absent (said once in the log). Once, before anything asks for a grant.
   */
  async load(): Promise<void> {
    for (const c of this.deps.servers) {
      let grant: Grant | null = null;
      try {
        grant = await this.store.grant(c.name);
      } catch (err) {
        if (!(err instanceof SecretBoxError)) throw err;
        this.notes.set(
          c.name,
          `the stored sign-in cannot be opened (${err.message}): an owner must sign in again`,
        );
        this.deps.log.warn(`server ${c.name}: ${err.message}; its sign-in is treated as absent`);
      }
      if (grant) this.remember(c.name, grant.secrets);
      this.cache.set(c.name, grant);
    }
  }

  /** The grant of `server`, opened (from the cache {@link load} filled); null when none, or when it cannot be opened. */
  grant(server: string): Grant | null {
    return this.cache.get(server) ?? null;
  }

  /** Writes `grant`, and `audit`'s row with it in one transaction; then {@link keep}s it and tells the other replicas. */
  async save(grant: Grant, audit?: AuditParams): Promise<void> {
    await transaction(this.deps.db, async (tx) => {
      await this.store.saveGrant(grant, tx);
      if (audit) await writeAudit(tx, audit);
    });
    this.keep(grant);
    this.deps.onGrantWritten?.(grant.server);
  }

  /**
   * Reads `server`'s grant from the store again (another replica may have written it) and keeps
   * it when it differs from the cached one; a grant that cannot be opened leaves the cache as it
   * is. Says what changed: `"sign-in"` (a new sign-in, a Disconnect, a refusal: the server is to
   * be dialled again), `"tokens"` (a renewal: the next request carries the new access token), or
   * `"none"`, when the cached grant stays, the very object (a renewal under way compares by it).
   */
  reload(server: string): Promise<"none" | "tokens" | "sign-in"> {
    return this.changing(async () => {
      let stored: Grant | null;
      try {
        stored = await this.store.grant(server);
      } catch (err) {
        if (!(err instanceof SecretBoxError)) throw err;
        this.deps.log.warn(`server ${server}: ${err.message}; the grant another replica stored is not used`);
        return "none";
      }
      const cached = this.grant(server);
      const signInOf = (g: Grant | null) =>
        JSON.stringify([g?.connectedAt, g?.resource, g?.problem, g?.secrets.tokens !== undefined]);
      const tokensOf = (g: Grant | null) =>
        JSON.stringify([g?.secrets.tokens?.access_token, g?.secrets.tokens?.refresh_token, g?.scope]);
      if (signInOf(stored) === signInOf(cached)) {
        if (tokensOf(stored) === tokensOf(cached) || !stored) return "none";
        this.keep(stored);
        return "tokens";
      }
      if (stored) this.keep(stored);
      else this.cache.set(server, null);
      if (stored?.secrets.tokens && !stored.problem) {
        this.stepUps.delete(server);
        this.notes.delete(server);
      }
      return "sign-in";
    });
  }

  /** A grant just written (committed): its secrets registered with the log's redaction, and cached. */
  keep(grant: Grant): void {
    this.remember(grant.server, grant.secrets);
    this.cache.set(grant.server, grant);
  }

  /**
   * Runs `fn`, a look at the current grant and the write it decides, once every grant change
   * started before it has ended: the store is awaited between the two, and another change (a
   * renewal's answer, a new sign-in, a Disconnect) must not land in between. `fn` must not call
   * `changing` itself.
   */
  changing<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.changes.then(fn);
    this.changes = run.catch(() => undefined);
    return run;
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
  isOAuth(c: ServerConfig): boolean {
    if (c.transport === "stdio") return false;
    return c.auth?.type === "oauth" || this.challenges.has(c.name) || this.grant(c.name) !== null;
  }

  waitingReason(c: ServerConfig): string {
    return this.challenges.has(c.name) && c.auth?.type !== "oauth"
      ? "the server asks for an OAuth sign-in (HTTP 401 naming its resource metadata): an owner can press Connect"
      : "nobody has signed in to this server yet: an owner can press Connect";
  }

  /** Why `c` waits for a sign-in now: the grant's problem, a note (a Disconnect), or nobody signed in. */
  waiting(c: ServerConfig): string {
    return this.grant(c.name)?.problem ?? this.notes.get(c.name) ?? this.waitingReason(c);
  }

  /**
   * Forgets the tokens of `grant`, which the authorization server no longer honours, keeping its
   * client registration unless `dropClient`, and records `reason` (audited); resolves with it,
   * for the error thrown. Nothing is written when `grant` is no longer the server's current one.
   */
  refuseGrant(c: ServerConfig, grant: Grant, reason: string, dropClient = false): Promise<string> {
    return this.changing(async () => {
      if (this.grant(c.name) !== grant) return this.waiting(c);
      const { tokens: _, client, ...rest } = grant.secrets;
      const secrets = dropClient || !client ? rest : { ...rest, client };
      await this.save(
        { ...grant, secrets, accessExpiresAt: null, problem: reason },
        { actor: "gatehouse", action: "server.oauth.expired", subject: c.name, detail: reason },
      );
      this.deps.log.warn(`server ${c.name}: ${reason}`);
      return reason;
    });
  }

  /**
   * Why the configured client of `c` may not be used with the authorization server `secrets`
   * were obtained from (it is not the configured issuer); null when it may, or when `c` has no
   * configured client.
   */
  foreignIssuer(c: ServerConfig, secrets: GrantSecrets): string | null {
    const configured = c.auth?.clientId ? c.auth.issuer : null;
    if (!configured) return null;
    const found =
      secrets.discovery?.authorizationServerMetadata?.issuer ??
      secrets.discovery?.authorizationServerUrl ??
      null;
    if (sameIssuer(found, configured)) return null;
    return `the sign-in's authorization server ${found ?? "(unknown)"} is not ${configured}, the configured client's issuer (auth.issuer), and the client's credentials go to no other`;
  }

  /** The client to authenticate as: the configured one, else the one registered and kept. */
  clientOf(c: ServerConfig, secrets: GrantSecrets): OAuthClientInformationMixed | null {
    const auth = c.auth;
    if (auth?.clientId) {
      return { client_id: auth.clientId, ...(auth.clientSecret ? { client_secret: auth.clientSecret } : {}) };
    }
    if (!secrets.client) return null;
    const { redirectUri: _, issuer: __, ...client } = secrets.client;
    return client;
  }

  /** The SDK's client provider over one run's `flow`, with `c`'s client identity. */
  provider(c: ServerConfig, flow: FlowState, redirectUri: string, scope: string | null): FlowProvider {
    const origin = this.deps.publicOrigin?.replace(/\/$/, "");
    const auth = c.auth;
    return new FlowProvider(flow, {
      redirectUri,
      clientMetadataUrl: origin?.startsWith("https://") ? `${origin}${CLIENT_METADATA_PATH}` : null,
      configured:
        auth?.clientId && auth.issuer
          ? { clientId: auth.clientId, clientSecret: auth.clientSecret, issuer: auth.issuer }
          : null,
      scope,
      ...(this.deps.clock ? { clock: this.deps.clock } : {}),
    });
  }

  async close(): Promise<void> {
    await Promise.all([...this.fetches.values()].map((f) => f.close()));
    this.fetches.clear();
  }
}
