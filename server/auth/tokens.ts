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

/** An active agent token, as a request presents it: what it is called and which tool set it has. */
export interface AgentToken {
  id: number;
  name: string;
  /** The token's tool set (PRODUCT.md §16); null: every enabled tool. */
  toolSet: string | null;
}

function toView(row: TokenRow): TokenView {
  return {
    name: row.name,
    toolSet: row.toolSet,
    createdAt: row.createdAt,
    createdBy: row.createdBy,
    lastUsedAt: row.lastUsedAt,
    revokedAt: row.revokedAt,
  };
}

export async function listTokens(db: Db): Promise<TokenView[]> {
  return (await db.select().from(agentTokens).orderBy(asc(agentTokens.name))).map(toView);
}

/** `bad_request` unless `set` is null (every enabled tool) or one of `known`. */
function checkSet(set: string | null, known: readonly string[]): void {
  if (set === null || known.includes(set)) return;
  throw new GatehouseError(
    "bad_request",
    known.length === 0
      ? `There is no tool set "${set}": the configuration defines none (add it under "toolSets").`
      : `There is no tool set "${set}"; the configuration defines ${known.map((k) => `"${k}"`).join(", ")}.`,
  );
}

/**
 * Creates an agent token, in tool set `toolSet` when given (one of `knownSets`, else
 * `bad_request`). The secret is returned once and stored only as its hash.
 */
export async function createToken(
  db: Db,
  params: { name: string; actor: string; toolSet?: string | null; knownSets?: readonly string[] },
): Promise<{ token: TokenView; secret: string }> {
  const toolSet = params.toolSet ?? null;
  checkSet(toolSet, params.knownSets ?? []);
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
      .values({ name: params.name, tokenHash: sha256(secret), createdBy: params.actor, toolSet })
      .returning();
    if (!row) throw new Error("the new token's row was not returned");
    await tx.insert(auditEvents).values({
      actor: params.actor,
      action: "token.create",
      subject: params.name,
      ...(toolSet ? { detail: `tool set "${toolSet}"` } : {}),
    });
    return { token: toView(row), secret };
  });
}

/**
 * Moves token `name` into tool set `toolSet` (null: every enabled tool), audited as
 * `token.tool_set` with the set before and after; the token's next request is judged by it.
 * `not_found` for no such token, `conflict` for a revoked one, `bad_request` for a set not in
 * `knownSets`. Moving a token into the set it has changes and records nothing.
 */
export async function setTokenToolSet(
  db: Db,
  params: { name: string; toolSet: string | null; actor: string; knownSets: readonly string[] },
): Promise<TokenView> {
  checkSet(params.toolSet, params.knownSets);
  return transaction(db, async (tx) => {
    const row = await first(tx.select().from(agentTokens).where(eq(agentTokens.name, params.name)));
    if (!row) throw new GatehouseError("not_found", `no token named "${params.name}"`);
    if (row.revokedAt) throw new GatehouseError("conflict", `The token "${params.name}" is revoked.`);
    if (row.toolSet === params.toolSet) return toView(row);
    const updated = await first(
      tx.update(agentTokens).set({ toolSet: params.toolSet }).where(eq(agentTokens.id, row.id)).returning(),
    );
    const shown = (set: string | null) => (set === null ? "no tool set" : `"${set}"`);
    await tx.insert(auditEvents).values({
      actor: params.actor,
      action: "token.tool_set",
      subject: params.name,
      detail: `${shown(row.toolSet)} → ${shown(params.toolSet)}`,
    });
    return toView(updated ?? row);
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
export async function tokenFromSecret(db: Db, secret: string): Promise<AgentToken | null> {
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
  return { id: row.id, name: row.name, toolSet: row.toolSet };
}
