import "server-only";
import {
  type AuthProvider,
  OAuthError,
  OAuthErrorCode,
  refreshAuthorization,
} from "@modelcontextprotocol/client";
import type { ServerConfig } from "../config";
import { SignInRequiredError } from "../mcp/sign-in";
import { takeRenewalLock } from "./renewal-lock";
import { REFRESH_MARGIN_MS, type SignInState } from "./sign-in-state";
import type { Grant } from "./store";
import { expiryOf, REFUSED_GRANT, shortWhy } from "./text";

/**
 * Whether an access token expiring at `expiresAt` (ms), obtained at `obtainedAt` (ms; undefined
 * when not known), is to be renewed at `now`: at the smaller of `marginMs` (default
 * {@link REFRESH_MARGIN_MS}) and a third of its lifetime before it expires. A token that lives
 * less than the margin would otherwise be renewed on every request, from the moment it is given.
 */
export function renewalDue(
  expiresAt: number,
  obtainedAt: number | undefined,
  now: number,
  marginMs = REFRESH_MARGIN_MS,
): boolean {
  const lifetime = typeof obtainedAt === "number" ? expiresAt - obtainedAt : Number.POSITIVE_INFINITY;
  const margin = Math.min(marginMs, Math.max(0, lifetime) / 3);
  return expiresAt - margin <= now;
}

/**
 * The bearer tokens a supervisor dials a signed-in server with: the access token, renewed with
 * the refresh token before it expires and once on a 401, one renewal per grant at a time. A
 * renewal the authorization server refuses (`invalid_grant`, `invalid_client`,
 * `unauthorized_client`) forgets the tokens, keeps the reason on the grant and puts the server in
 * `needs_auth`; one with no usable answer (unreached, a 5xx, a refused address) is an ordinary
 * failure, retried with the supervisor's backoff.
 */
export class Renewals {
  /** The renewal under way per server, and the grant it renews: requests of that grant share it. */
  private readonly running = new Map<string, { grant: Grant | null; done: Promise<void> }>();

  constructor(private readonly state: SignInState) {}

  /**
   * The bearer source of a signed-in server: renewed before expiry, and once on a 401. It belongs
   * to the sign-in it was made for (told by when it was connected): once that sign-in has ended
   * (Disconnect, a new sign-in), a 401 on its connection renews nothing and refuses nothing.
   */
  bearer(c: ServerConfig): AuthProvider {
    const s = this.state;
    const signIn = s.grant(c.name)?.connectedAt ?? null;
    const current = () => {
      const grant = s.grant(c.name);
      return grant?.secrets.tokens && !grant.problem && grant.connectedAt === signIn ? grant : null;
    };
    return {
      token: async () => {
        const grant = current();
        const tokens = grant?.secrets.tokens;
        if (!grant || !tokens) throw new SignInRequiredError(s.waiting(c));
        const expiresAt = grant.accessExpiresAt ? Date.parse(grant.accessExpiresAt) : null;
        const margin = s.deps.refreshMarginMs ?? REFRESH_MARGIN_MS;
        if (expiresAt !== null && renewalDue(expiresAt, tokens.obtainedAt, s.now(), margin)) {
          if (!tokens.refresh_token) {
            if (expiresAt > s.now()) return tokens.access_token;
            throw new SignInRequiredError(
              await s.refuseGrant(
                c,
                grant,
                "the access token expired and the authorization server gave no refresh token: an owner must sign in again",
              ),
            );
          }
          await this.renew(c);
          const renewed = current()?.secrets.tokens?.access_token;
          if (!renewed) throw new SignInRequiredError(s.waiting(c));
          return renewed;
        }
        return tokens.access_token;
      },
      onUnauthorized: async () => {
        if (!current()) throw new SignInRequiredError(s.waiting(c));
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
    const grant = this.state.grant(c.name);
    const running = this.running.get(c.name);
    if (running && running.grant === grant) return running.done;
    const done = this.renewOnce(c, grant).finally(() => {
      if (this.running.get(c.name)?.done === done) this.running.delete(c.name);
    });
    this.running.set(c.name, { grant, done });
    return done;
  }

  /**
   * One renewal, under the lock that lets one replica at a time renew the grant (see
   * {@link takeRenewalLock}), from the grant as the store holds it then (see {@link latest}).
   */
  private async renewOnce(c: ServerConfig, started: Grant | null): Promise<void> {
    const s = this.state;
    if (!started?.secrets.tokens) throw new SignInRequiredError(s.waiting(c));
    const lock = await takeRenewalLock(s.deps.db, c.name);
    try {
      const grant = await this.latest(c, started);
      if (grant) await this.refresh(c, grant);
    } finally {
      await lock.release();
    }
  }

  /**
   * The grant to renew, read again from the store: another replica may have renewed it since
   * `started` was read (spending its refresh token: a rotated one works once) or ended it. Null
   * when there is nothing to renew: the sign-in `started` belongs to is over, or another replica
   * stored tokens that are not due yet (the request that asked goes on with them, and one they
   * are refused for renews from them).
   */
  private async latest(c: ServerConfig, started: Grant): Promise<Grant | null> {
    const s = this.state;
    await s.reload(c.name);
    const now = s.grant(c.name);
    if (now === started) return started;
    const tokens = now?.secrets.tokens;
    if (!now || !tokens || now.problem || now.connectedAt !== started.connectedAt) return null;
    if (tokens.access_token === started.secrets.tokens?.access_token) return now;
    const expiresAt = now.accessExpiresAt ? Date.parse(now.accessExpiresAt) : null;
    const margin = s.deps.refreshMarginMs ?? REFRESH_MARGIN_MS;
    const due = expiresAt !== null && renewalDue(expiresAt, tokens.obtainedAt, s.now(), margin);
    return due ? now : null;
  }

  /**
   * Renews `grant` with its refresh token. The answer is kept only for the grant it started
   * from: a grant saved or forgotten meanwhile (a Disconnect, a new sign-in) wins, and a late
   * answer, tokens or refusal, is dropped rather than bringing back or spoiling what is there now.
   */
  private async refresh(c: ServerConfig, grant: Grant): Promise<void> {
    const s = this.state;
    const tokens = grant.secrets.tokens;
    const discovery = grant.secrets.discovery;
    if (!tokens) throw new SignInRequiredError(s.waiting(c));
    if (!tokens.refresh_token || !discovery) {
      throw new SignInRequiredError(
        await s.refuseGrant(
          c,
          grant,
          "the server refused the access token and there is no refresh token: an owner must sign in again",
        ),
      );
    }
    const foreign = s.foreignIssuer(c, grant.secrets);
    if (foreign)
      throw new SignInRequiredError(await s.refuseGrant(c, grant, `${foreign}: an owner must sign in again`));
    const client = s.clientOf(c, grant.secrets);
    if (!client) {
      throw new SignInRequiredError(
        await s.refuseGrant(c, grant, "the registered client was lost: an owner must sign in again"),
      );
    }
    let renewed: Awaited<ReturnType<typeof refreshAuthorization>>;
    try {
      renewed = await refreshAuthorization(discovery.authorizationServerUrl, {
        metadata: discovery.authorizationServerMetadata,
        clientInformation: client,
        refreshToken: tokens.refresh_token,
        ...(grant.secrets.resource ? { resource: new URL(grant.secrets.resource) } : {}),
        fetchFn: s.fetchFor(c),
      });
    } catch (err) {
      // Superseded while it ran: its refusal, like its tokens, was about a grant that is gone.
      if (s.grant(c.name) !== grant) return;
      if (err instanceof OAuthError && REFUSED_GRANT.has(err.code)) {
        // A client the authorization server no longer knows is registered anew at the next Connect.
        const clientGone = err.code !== OAuthErrorCode.InvalidGrant;
        throw new SignInRequiredError(
          await s.refuseGrant(
            c,
            grant,
            `the authorization server refused to renew the sign-in (${err.code}): an owner must sign in again`,
            clientGone,
          ),
        );
      }
      // Unreached, a 5xx, a refused address: worth another try, at the supervisor's pace.
      s.deps.log.warn(`server ${c.name}: renewing the access token failed: ${shortWhy(err)}`);
      throw err;
    }
    await s.changing(async () => {
      if (s.grant(c.name) !== grant) {
        s.deps.log.info(`server ${c.name}: a renewal ended after its sign-in did; its tokens are dropped`);
        return;
      }
      const now = s.now();
      const next: Grant = {
        ...grant,
        secrets: { ...grant.secrets, tokens: { ...renewed, issuer: tokens.issuer, obtainedAt: now } },
        scope: renewed.scope ?? grant.scope,
        accessExpiresAt: expiryOf(renewed.expires_in, now),
        refreshedAt: new Date(now).toISOString(),
      };
      await s.save(next);
      s.deps.log.info(`server ${c.name}: access token renewed`, { expiresAt: next.accessExpiresAt });
    });
  }
}
