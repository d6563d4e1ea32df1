import "server-only";
import { createHash } from "node:crypto";
import type {
  OAuthDiscoveryState,
  StoredOAuthClientInformation,
  StoredOAuthTokens,
} from "@modelcontextprotocol/client";
import { eq, lt } from "drizzle-orm";
import type { SecretBox } from "../secrets";
import { type Db, first, transaction } from "../store/db";
import { oauthPending, serverOauth } from "../store/schema";

/** A client Gatehouse is registered as, with the redirect URI it was registered (or configured) for. */
export type SavedClient = StoredOAuthClientInformation & { redirectUri: string };

/** What a grant row keeps sealed: never in clear in the store, never shown, never logged. */
export interface GrantSecrets {
  /** The client registered dynamically or named by a metadata document; a configured one is never stored. */
  client?: SavedClient;
  /** The tokens, and when they were obtained (ms), for the access token's expiry. */
  tokens?: StoredOAuthTokens & { obtainedAt: number };
  /** The RFC 9728 and RFC 8414 documents found at sign-in: the endpoints refresh and revocation use. */
  discovery?: OAuthDiscoveryState;
  /** The RFC 8707 resource indicator the tokens were asked for (sent again with each refresh). */
  resource?: string;
}

/** A grant row with its secrets opened. */
export interface Grant {
  server: string;
  resource: string;
  secrets: GrantSecrets;
  issuer: string | null;
  scope: string | null;
  accessExpiresAt: string | null;
  connectedBy: string | null;
  connectedAt: string | null;
  refreshedAt: string | null;
  problem: string | null;
}

/** What a started sign-in keeps sealed until the authorization server sends the browser back. */
export interface PendingSecrets {
  codeVerifier: string;
  discovery: OAuthDiscoveryState | null;
  client: SavedClient | null;
  redirectUri: string;
  /** The scope asked for, space-separated; null: none named. */
  scope: string | null;
  /** The resource (the server URL) the sign-in is for. */
  resource: string;
}

export interface Pending {
  server: string;
  bindingHash: string;
  startedBy: string;
  expiresAt: string;
  secrets: PendingSecrets;
}

const grantContext = (server: string) => `oauth:${server}:grant`;
const pendingContext = (server: string) => `oauth:${server}:pending`;

export function sha256Hex(value: string): string {
  return createHash("sha256").update(value).digest("hex");
}

/**
 * The OAuth rows of the store, their secrets sealed with the runtime's `SecretBox`: a row copied
 * to another server's name does not open there (the context names the server). Every method
 * takes an optional `db`: a transaction's `tx`, for writes that belong to one.
 */
export class OAuthStore {
  constructor(
    private readonly db: Db,
    private readonly box: SecretBox,
  ) {}

  /** The grant of `server`, opened; null when there is none. Throws `SecretBoxError` when it cannot be opened. */
  async grant(server: string, db: Db = this.db): Promise<Grant | null> {
    const row = await first(db.select().from(serverOauth).where(eq(serverOauth.server, server)));
    if (!row) return null;
    const secrets = JSON.parse(this.box.open(row.sealed, grantContext(server))) as GrantSecrets;
    return {
      server: row.server,
      resource: row.resource,
      secrets,
      issuer: row.issuer,
      scope: row.scope,
      accessExpiresAt: row.accessExpiresAt,
      connectedBy: row.connectedBy,
      connectedAt: row.connectedAt,
      refreshedAt: row.refreshedAt,
      problem: row.problem,
    };
  }

  /** Writes `grant` whole (sealing its secrets), replacing any row of its server. */
  async saveGrant(grant: Grant, db: Db = this.db): Promise<void> {
    const values = {
      server: grant.server,
      resource: grant.resource,
      sealed: this.box.seal(JSON.stringify(grant.secrets), grantContext(grant.server)),
      issuer: grant.issuer,
      scope: grant.scope,
      accessExpiresAt: grant.accessExpiresAt,
      connectedBy: grant.connectedBy,
      connectedAt: grant.connectedAt,
      refreshedAt: grant.refreshedAt,
      problem: grant.problem,
      updatedAt: new Date().toISOString(),
    };
    await db
      .insert(serverOauth)
      .values(values)
      .onConflictDoUpdate({ target: serverOauth.server, set: values });
  }

  async deleteGrant(server: string, db: Db = this.db): Promise<void> {
    await db.delete(serverOauth).where(eq(serverOauth.server, server));
  }

  /** Stores a started sign-in under the hash of its `state`; expired ones of any server go first. */
  async savePending(stateHash: string, pending: Pending, now = Date.now(), db: Db = this.db): Promise<void> {
    await db.delete(oauthPending).where(lt(oauthPending.expiresAt, new Date(now).toISOString()));
    await db.insert(oauthPending).values({
      stateHash,
      server: pending.server,
      bindingHash: pending.bindingHash,
      startedBy: pending.startedBy,
      sealed: this.box.seal(JSON.stringify(pending.secrets), pendingContext(pending.server)),
      expiresAt: pending.expiresAt,
    });
  }

  /**
   * Takes the started sign-in of `stateHash` out of the store (it is used once, whatever happens
   * next), or null when there is none.
   */
  takePending(stateHash: string, db: Db = this.db): Promise<Pending | null> {
    return transaction(db, async (tx) => {
      const row = await first(tx.select().from(oauthPending).where(eq(oauthPending.stateHash, stateHash)));
      if (!row) return null;
      await tx.delete(oauthPending).where(eq(oauthPending.stateHash, stateHash));
      return {
        server: row.server,
        bindingHash: row.bindingHash,
        startedBy: row.startedBy,
        expiresAt: row.expiresAt,
        secrets: JSON.parse(this.box.open(row.sealed, pendingContext(row.server))) as PendingSecrets,
      };
    });
  }

  /** Whether a sign-in of `server` was started and has not come back (expired ones included). */
  async hasPending(server: string, db: Db = this.db): Promise<boolean> {
    const row = await first(
      db
        .select({ s: oauthPending.server })
        .from(oauthPending)
        .where(eq(oauthPending.server, server))
        .limit(1),
    );
    return row !== undefined;
  }

  /** Forgets every started sign-in of `server` (a Disconnect ends those too). */
  async dropPending(server: string, db: Db = this.db): Promise<void> {
    await db.delete(oauthPending).where(eq(oauthPending.server, server));
  }
}
