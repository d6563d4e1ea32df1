import "server-only";
import type {
  OAuthClientInformationContext,
  OAuthClientMetadata,
  OAuthClientProvider,
  OAuthDiscoveryState,
  StoredOAuthClientInformation,
  StoredOAuthTokens,
} from "@modelcontextprotocol/client";
import type { SavedClient } from "./store";

/** Gatehouse's name at the authorization server (the consent page shows it). */
export const CLIENT_NAME = "Gatehouse";

/**
 * What one run of the SDK's `auth()` read and wrote, held in memory; the caller stores what it
 * means (a started sign-in, a grant) once the run is over, so a run that fails leaves nothing.
 */
export interface FlowState {
  /** The `state` sent with the authorization request. */
  state: string;
  codeVerifier: string | null;
  discovery: OAuthDiscoveryState | null;
  /** A client registered (or named by the metadata document) for `redirectUri`; never a configured one. */
  client: SavedClient | null;
  tokens: (StoredOAuthTokens & { obtainedAt: number }) | null;
  /** The RFC 8707 resource indicator the run used. */
  resource: string | null;
  /** Where the browser is to be sent, once the run asked for it. */
  authorizationUrl: URL | null;
}

export function emptyFlow(state: string): FlowState {
  return {
    state,
    codeVerifier: null,
    discovery: null,
    client: null,
    tokens: null,
    resource: null,
    authorizationUrl: null,
  };
}

export interface FlowOptions {
  /** `<public origin>/oauth/callback`. */
  redirectUri: string;
  /** The client ID metadata document's URL, when Gatehouse serves one (its public origin is https). */
  clientMetadataUrl: string | null;
  /**
   * The client of the config (`auth.clientId`, `auth.clientSecret`) and the issuer it is
   * registered with (`auth.issuer`); wins over any other, and is used with that issuer only.
   */
  configured: { clientId: string; clientSecret: string | null; issuer: string } | null;
  /** The scope to ask for, space-separated; null: what the server's metadata names. */
  scope: string | null;
  clock?: () => number;
}

/**
 * The SDK's `OAuthClientProvider` over a {@link FlowState}: discovery, registration, PKCE and the
 * token exchange are the SDK's; this only keeps what it hands over. The client identity, in
 * order: the configured client; the client ID metadata document (the SDK uses it only where the
 * authorization server says it supports them); a client registered dynamically (RFC 7591), kept
 * for later sign-ins to the same server and redirect URI.
 */
export class FlowProvider implements OAuthClientProvider {
  constructor(
    readonly flow: FlowState,
    private readonly opts: FlowOptions,
  ) {}

  get redirectUrl(): string {
    return this.opts.redirectUri;
  }

  get clientMetadataUrl(): string | undefined {
    return this.opts.configured ? undefined : (this.opts.clientMetadataUrl ?? undefined);
  }

  get clientMetadata(): OAuthClientMetadata {
    return clientMetadataFor(this.opts.redirectUri, this.opts.scope);
  }

  state(): string {
    return this.flow.state;
  }

  clientInformation(ctx?: OAuthClientInformationContext): StoredOAuthClientInformation | undefined {
    const configured = this.opts.configured;
    if (configured) {
      // A client registered in advance belongs to one authorization server: asked for it at
      // another (the server's metadata named one), the run stops here, before a registration,
      // a token request or an authorization URL could carry it there.
      if (ctx && !sameIssuer(ctx.issuer, configured.issuer))
        throw new IssuerRefusedError(ctx.issuer, configured.issuer);
      // Stamped with the configured issuer, never the discovered one, as the SDK expects of a
      // stored credential (unstamped, it warns).
      const info: StoredOAuthClientInformation = {
        client_id: configured.clientId,
        issuer: configured.issuer,
      };
      if (configured.clientSecret !== null) info.client_secret = configured.clientSecret;
      return info;
    }
    const saved = this.flow.client;
    if (!saved || saved.redirectUri !== this.opts.redirectUri) return undefined;
    const { redirectUri: _, ...info } = saved;
    return info;
  }

  saveClientInformation(info: StoredOAuthClientInformation): void {
    // A configured client lives in the config: its secret is never copied into the store.
    if (this.opts.configured) return;
    this.flow.client = { ...info, redirectUri: this.opts.redirectUri };
  }

  tokens(): StoredOAuthTokens | undefined {
    if (!this.flow.tokens) return undefined;
    const { obtainedAt: _, ...tokens } = this.flow.tokens;
    return tokens;
  }

  saveTokens(tokens: StoredOAuthTokens): void {
    this.flow.tokens = { ...tokens, obtainedAt: (this.opts.clock ?? Date.now)() };
  }

  redirectToAuthorization(url: URL): void {
    this.flow.authorizationUrl = url;
  }

  saveCodeVerifier(verifier: string): void {
    this.flow.codeVerifier = verifier;
  }

  codeVerifier(): string {
    if (this.flow.codeVerifier === null) throw new Error("no PKCE verifier was kept for this sign-in");
    return this.flow.codeVerifier;
  }

  saveDiscoveryState(state: OAuthDiscoveryState): void {
    this.flow.discovery = state;
  }

  discoveryState(): OAuthDiscoveryState | undefined {
    return this.flow.discovery ?? undefined;
  }

  saveResourceUrl(resource: string): void {
    this.flow.resource = resource;
  }

  resourceUrl(): string | undefined {
    return this.flow.resource ?? undefined;
  }

  invalidateCredentials(scope: "all" | "client" | "tokens" | "verifier" | "discovery"): void {
    if (scope === "all" || scope === "client") this.flow.client = null;
    if (scope === "all" || scope === "tokens") this.flow.tokens = null;
    if (scope === "all" || scope === "verifier") this.flow.codeVerifier = null;
    if (scope === "all" || scope === "discovery") this.flow.discovery = null;
  }
}

/**
 * The server names an authorization server other than the issuer its configured client is
 * registered with: the sign-in is refused, and the client's credentials are sent nowhere.
 */
export class IssuerRefusedError extends Error {
  readonly code = "GATEHOUSE_ISSUER_REFUSED";
  constructor(found: string, configured: string) {
    super(
      `the server names the authorization server ${found}, not ${configured}, the issuer its configured client is registered with (auth.issuer): its client credentials go to no other`,
    );
  }
}

/** Whether two issuer identifiers name the same authorization server (one trailing `/` aside, as the SDK allows). */
export function sameIssuer(a: string | undefined | null, b: string): boolean {
  if (typeof a !== "string") return false;
  return a.replace(/\/$/, "") === b.replace(/\/$/, "");
}

/**
 * The client metadata Gatehouse registers with (RFC 7591) and serves as its client ID metadata
 * document: a public client (PKCE, no secret) using the authorization code and refresh grants.
 */
export function clientMetadataFor(redirectUri: string, scope: string | null): OAuthClientMetadata {
  return {
    client_name: CLIENT_NAME,
    redirect_uris: [redirectUri],
    grant_types: ["authorization_code", "refresh_token"],
    response_types: ["code"],
    token_endpoint_auth_method: "none",
    ...(scope ? { scope } : {}),
  };
}
