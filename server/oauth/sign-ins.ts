import "server-only";
import type { AuthProvider } from "@modelcontextprotocol/client";
import type { ServerAuthView } from "@/lib/api-types";
import { GatehouseError } from "@/lib/errors";
import type { ServerConfig } from "../config";
import { redact } from "../log";
import { moreScope, oneLine } from "../mcp/failures";
import type { AuthChallenge } from "../mcp/sign-in";
import { writeAudit } from "../store/audit";
import { transaction } from "../store/db";
import { beginSignIn, type SignInStart } from "./begin";
import { finishSignIn, type SignInResult } from "./callback";
import { Renewals } from "./renewal";
import { type Revocation, revokeTokens } from "./revoke";
import { CLIENT_METADATA_PATH, SignInState, type SignInsDeps } from "./sign-in-state";
import type { Grant } from "./store";
import { revocationEndpoint, splitScope, URL_CHANGED } from "./text";

/**
 * OAuth sign-ins to remote MCP servers (PRODUCT.md §12), the one face the rest of Gatehouse sees:
 * what supervisors ask (the bearer source of a signed-in server, the challenges their 401 and 403
 * answers carried), what owners do (Connect, the callback, Disconnect with RFC 7009 revocation
 * where offered) and what they see (the sign-in part of a server's view). The steps live in
 * begin.ts, callback.ts and renewal.ts over the shared state of sign-in-state.ts; every request
 * goes through the server's outbound guard (fetch.ts). Opened with {@link OAuthSignIns.open},
 * which reads the grants first: what supervisors ask is then answered from memory, at once.
 */
export class OAuthSignIns {
  private readonly state: SignInState;
  private readonly renewals: Renewals;

  private constructor(deps: SignInsDeps) {
    this.state = new SignInState(deps);
    this.renewals = new Renewals(this.state);
  }

  /** The sign-ins of `deps.servers`, their grants read from the store and opened. */
  static async open(deps: SignInsDeps): Promise<OAuthSignIns> {
    const signIns = new OAuthSignIns(deps);
    await signIns.state.load();
    return signIns;
  }

  // ------------------------------------------------------------------------------------------
  // What supervisors ask (SignInSource)

  credentialsFor(c: ServerConfig): { provider: AuthProvider } | { needsSignIn: string } | null {
    const s = this.state;
    if (!s.isOAuth(c)) return null;
    const grant = s.grant(c.name);
    if (!grant?.secrets.tokens) return { needsSignIn: s.waiting(c) };
    if (grant.resource !== c.url) {
      return { needsSignIn: URL_CHANGED };
    }
    if (grant.problem) return { needsSignIn: grant.problem };
    return { provider: this.renewals.bearer(c) };
  }

  challenged(server: string, challenge: AuthChallenge): void {
    const first = !this.state.challenges.has(server);
    this.state.challenges.set(server, challenge);
    if (first) this.state.deps.log.info(`server ${server} asks for an OAuth sign-in`);
  }

  needsScope(server: string, challenge: AuthChallenge): void {
    // A server without OAuth has no grant to widen: its refusal is the supervisor's to report.
    const c = this.state.find(server);
    if (!c || !this.state.isOAuth(c)) return;
    this.state.stepUps.set(server, challenge);
    this.state.deps.log.info(`server ${server}: ${moreScope(challenge.scope)}`);
  }

  // ------------------------------------------------------------------------------------------
  // What owners do

  /** See {@link beginSignIn}. */
  begin(start: SignInStart): Promise<{ authorizationUrl: string; binding: string }> {
    return beginSignIn(this.state, start);
  }

  /** See {@link finishSignIn}. */
  finish(params: URLSearchParams, bindings: readonly string[]): Promise<SignInResult> {
    return finishSignIn(this.state, params, bindings);
  }

  /**
   * Forgets `server`'s grant, revoking its tokens first where the authorization server offers
   * revocation (RFC 7009); the grant is forgotten whatever the revocation's outcome. Audited.
   * `accessExpiresAt`: until when the access token stays valid at the authorization server when
   * it was not revoked there (null when unknown, or when it was).
   */
  async disconnect(
    server: string,
    actor: string,
  ): Promise<{ revocation: Revocation; accessExpiresAt: string | null }> {
    const s = this.state;
    const c = s.config(server);
    const grant = s.grant(server);
    if (!grant?.secrets.tokens) throw new GatehouseError("not_signed_in", `nobody is signed in to ${server}`);
    const foreign = s.foreignIssuer(c, grant.secrets);
    const { revocation, problem } = foreign
      ? { revocation: "failed" as const, problem: `the tokens were not revoked: ${foreign}` }
      : await revokeTokens({
          endpoint: revocationEndpoint(grant.secrets),
          tokens: grant.secrets.tokens,
          client: s.clientOf(c, grant.secrets),
          fetch: s.fetchFor(c),
        });
    const validUntil = revocation === "revoked" ? null : grant.accessExpiresAt;
    // The client registration is kept, for the next Connect: forgotten, every reconnect would
    // leave one more registered client behind at the authorization server.
    const { tokens: _, ...kept } = grant.secrets;
    const left: Grant | null = kept.client
      ? {
          ...grant,
          secrets: kept,
          scope: null,
          accessExpiresAt: null,
          connectedBy: null,
          connectedAt: null,
          refreshedAt: null,
          problem: null,
        }
      : null;
    await s.changing(async () => {
      await transaction(s.deps.db, async (tx) => {
        if (left) await s.store.saveGrant(left, tx);
        else await s.store.deleteGrant(server, tx);
        await s.store.dropPending(server, tx);
        await writeAudit(tx, {
          actor,
          action: "server.oauth.disconnected",
          subject: server,
          detail: JSON.stringify({
            revocation,
            ...(validUntil ? { accessValidUntil: validUntil } : {}),
            ...(problem ? { problem: oneLine(redact(problem)) } : {}),
          }),
        });
      });
      if (left) s.keep(left);
      else s.cache.set(server, null);
    });
    s.deps.onGrantWritten?.(server);
    s.stepUps.delete(server);
    s.notes.set(server, `disconnected by ${actor}: an owner can press Connect to sign in again`);
    if (problem) s.deps.log.warn(`server ${server}: revoking its tokens failed: ${oneLine(redact(problem))}`);
    if (revocation === "refresh_only") {
      s.deps.log.info(
        `server ${server}: the refresh token was revoked; the authorization server cannot revoke the access token, which stays valid there until ${validUntil ?? "it expires"}`,
      );
    }
    s.deps.log.info(`server ${server}: disconnected by ${actor} (${revocation})`);
    s.deps.onGrantChanged(server);
    return { revocation, accessExpiresAt: validUntil };
  }

  // ------------------------------------------------------------------------------------------
  // What owners see

  /** The sign-in part of `c`'s view; null for a server without OAuth. */
  view(c: ServerConfig): ServerAuthView | null {
    const s = this.state;
    if (!s.isOAuth(c)) return null;
    const grant = s.grant(c.name);
    const moved = grant?.secrets.tokens !== undefined && grant.resource !== c.url;
    const connected = grant?.secrets.tokens !== undefined && grant.problem === null && !moved;
    const stepUp = s.stepUps.get(c.name);
    const origin = s.deps.publicOrigin?.replace(/\/$/, "");
    const client = c.auth?.clientId
      ? c.auth.clientId
      : origin?.startsWith("https://")
        ? `${origin}${CLIENT_METADATA_PATH} (or registered dynamically where that is not supported)`
        : grant?.secrets.client
          ? "registered dynamically"
          : "registered dynamically at the first sign-in";
    let reason: string | null = null;
    if (moved) reason = URL_CHANGED;
    else if (!connected) reason = grant?.problem ?? s.notes.get(c.name) ?? s.waitingReason(c);
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

  /**
   * Another replica wrote `server`'s grant (see `SignInsDeps.onGrantWritten`): it is read again.
   * Resolves true when the sign-in itself changed (a new one, a Disconnect, a refusal), so the
   * server is to be dialled again; a renewal elsewhere only changes the tokens the next request
   * carries. Harmless for a write of this replica's own (nothing differs).
   */
  async reread(server: string): Promise<boolean> {
    const c = this.state.find(server);
    if (!c || c.transport === "stdio") return false;
    return (await this.state.reload(server)) === "sign-in";
  }

  close(): Promise<void> {
    return this.state.close();
  }
}
