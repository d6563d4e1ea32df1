import "server-only";
import { asc, eq, sql } from "drizzle-orm";
import type { TokenView } from "@/lib/api-types";
import { GatehouseError } from "@/lib/errors";
import { endGrants } from "../grants";
import type { Db } from "../store/db";
import { prepared } from "../store/prepared";
import { agentTokens, auditEvents } from "../store/schema";
import { newSecret, sha256 } from "./crypto";

type TokenRow = typeof agentTokens.$inferSelect;

function toView(row: TokenRow): TokenView {
  return {
    name: row.name,
    createdAt: row.createdAt,
    createdBy: row.createdBy,
    lastUsedAt: row.lastUsedAt,
    revokedAt: row.revokedAt,
  };
}

export function listTokens(db: Db): TokenView[] {
  return db.select().from(agentTokens).orderBy(asc(agentTokens.name)).all().map(toView);
}

/** Creates an agent token. The secret is returned once and stored only as its hash. */
export function createToken(
  db: Db,
  params: { name: string; actor: string },
): { token: TokenView; secret: string } {
  const secret = newSecret("gh_");
  return db.transaction((tx) => {
    if (tx.select({ id: agentTokens.id }).from(agentTokens).where(eq(agentTokens.name, params.name)).get()) {
      throw new GatehouseError("already_exists", `A token named "${params.name}" already exists.`);
    }
    const row = tx
      .insert(agentTokens)
      .values({ name: params.name, tokenHash: sha256(secret), createdBy: params.actor })
      .returning()
      .get();
    tx.insert(auditEvents)
      .values({ actor: params.actor, action: "token.create", subject: params.name })
      .run();
    return { token: toView(row), secret };
  });
}

/**
 * Revokes a token by name; revoking twice is harmless. The grants made for the agent end in the
 * same transaction ("the agent's token was revoked", PRODUCT.md §11), so no grant outlives its
 * token and a revocation that fails ends none.
 */
export function revokeToken(db: Db, params: { name: string; actor: string }, now = new Date()): TokenView {
  return db.transaction((tx) => {
    const row = tx.select().from(agentTokens).where(eq(agentTokens.name, params.name)).get();
    if (!row) throw new GatehouseError("not_found", `no token named "${params.name}"`);
    if (row.revokedAt) return toView(row);
    const updated = tx
      .update(agentTokens)
      .set({ revokedAt: now.toISOString() })
      .where(eq(agentTokens.id, row.id))
      .returning()
      .get();
    // Same connection: better-sqlite3 nests this as a savepoint of the revocation's transaction.
    endGrants(
      db,
      { requester: { kind: "agent", name: params.name } },
      "the agent's token was revoked",
      params.actor,
      now,
    );
    tx.insert(auditEvents)
      .values({ actor: params.actor, action: "token.revoke", subject: params.name })
      .run();
    return toView(updated ?? row);
  });
}

/** Refresh `last_used_at` at most this often, so agent calls do not each cost a write. */
const LAST_USED_RESOLUTION_MS = 60_000;

/** The active token with this secret, or null (unknown or revoked). */
export function tokenFromSecret(db: Db, secret: string): { id: number; name: string } | null {
  const query = prepared(db, "tokens.byHash", () =>
    db
      .select()
      .from(agentTokens)
      .where(eq(agentTokens.tokenHash, sql.placeholder("hash")))
      .prepare(),
  );
  const row = query.get({ hash: sha256(secret) });
  if (!row || row.revokedAt) return null;
  const now = Date.now();
  if (!row.lastUsedAt || now - Date.parse(row.lastUsedAt) > LAST_USED_RESOLUTION_MS) {
    db.update(agentTokens)
      .set({ lastUsedAt: new Date(now).toISOString() })
      .where(eq(agentTokens.id, row.id))
      .run();
  }
  return { id: row.id, name: row.name };
}
