import "server-only";
import { asc, eq, sql } from "drizzle-orm";
import type { TokenView } from "@/lib/api-types";
import { GatehouseError } from "@/lib/errors";
import { endGrants } from "../grants";
import { type Db, first, transaction } from "../store/db";
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

export async function listTokens(db: Db): Promise<TokenView[]> {
  return (await db.select().from(agentTokens).orderBy(asc(agentTokens.name))).map(toView);
}

/** Creates an agent token. The secret is returned once and stored only as its hash. */
export async function createToken(
  db: Db,
  params: { name: string; actor: string },
): Promise<{ token: TokenView; secret: string }> {
  const secret = newSecret("gh_");
  return transaction(db, async (tx) => {
    if (
      await first(
        tx.select({ id: agentTokens.id }).from(agentTokens).where(eq(agentTokens.name, params.name)),
      )
    ) {
      throw new GatehouseError("already_exists", `A token named "${params.name}" already exists.`);
    }
    const [row] = await tx
      .insert(agentTokens)
      .values({ name: params.name, tokenHash: sha256(secret), createdBy: params.actor })
      .returning();
    if (!row) throw new Error("the new token's row was not returned");
    await tx
      .insert(auditEvents)
      .values({ actor: params.actor, action: "token.create", subject: params.name });
    return { token: toView(row), secret };
  });
}

/**
 * Revokes a token by name; revoking twice is harmless. The grants made for the agent end in the
 * same transaction ("the agent's token was revoked", PRODUCT.md §11), so no grant outlives its
 * token and a revocation that fails ends none.
 */
export async function revokeToken(
  db: Db,
  params: { name: string; actor: string },
  now = new Date(),
): Promise<TokenView> {
  return transaction(db, async (tx) => {
    const row = await first(tx.select().from(agentTokens).where(eq(agentTokens.name, params.name)));
    if (!row) throw new GatehouseError("not_found", `no token named "${params.name}"`);
    if (row.revokedAt) return toView(row);
    const updated = await first(
      tx
        .update(agentTokens)
        .set({ revokedAt: now.toISOString() })
        .where(eq(agentTokens.id, row.id))
        .returning(),
    );
    // Nested in the revocation's transaction (a savepoint): both stand or fall together.
    await endGrants(
      tx,
      { requester: { kind: "agent", name: params.name } },
      "the agent's token was revoked",
      params.actor,
      now,
    );
    await tx
      .insert(auditEvents)
      .values({ actor: params.actor, action: "token.revoke", subject: params.name });
    return toView(updated ?? row);
  });
}

/** Refresh `last_used_at` at most this often, so agent calls do not each cost a write. */
const LAST_USED_RESOLUTION_MS = 60_000;

/** The active token with this secret, or null (unknown or revoked). */
export async function tokenFromSecret(db: Db, secret: string): Promise<{ id: number; name: string } | null> {
  const query = prepared(db, "tokens.byHash", () =>
    db
      .select()
      .from(agentTokens)
      .where(eq(agentTokens.tokenHash, sql.placeholder("hash")))
      .prepare(),
  );
  const [row] = await query.execute({ hash: sha256(secret) });
  if (!row || row.revokedAt) return null;
  const now = Date.now();
  if (!row.lastUsedAt || now - Date.parse(row.lastUsedAt) > LAST_USED_RESOLUTION_MS) {
    await db
      .update(agentTokens)
      .set({ lastUsedAt: new Date(now).toISOString() })
      .where(eq(agentTokens.id, row.id));
  }
  return { id: row.id, name: row.name };
}
