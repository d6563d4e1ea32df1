import "server-only";
import { and, eq, inArray, isNull, ne, type SQL } from "drizzle-orm";
import type { ChangeView, GrantView } from "@/lib/api-types";
import { GatehouseError } from "@/lib/errors";
import { writeAudit } from "../store/audit";
import { type Db, transaction } from "../store/db";
import { grants, tools } from "../store/schema";
import type { GrantRow } from "./cover";
import { limitsHold } from "./live";
import { readGrantView } from "./views";

/** `grant g_… for agent "build-bot"`: how audit rows name a grant. */
function named(row: Pick<GrantRow, "id" | "requesterKind" | "requesterName">): string {
  return `grant ${row.id} for ${row.requesterKind} "${row.requesterName}"`;
}

/**
 * Anyone's "stop this grant now" (`DELETE /api/grants/:id`): records the ending ("revoked by
 * <actor>") and a `grant.revoked` audit row in one transaction, and returns the grant's view.
 * A grant that has already ended, for whatever reason, is returned as it is, with no second
 * audit row; an ending only its standing showed (a definition that differs, a token revoked) is
 * written down then, so the grant cannot come back if that condition reverses. `grant_not_found`
 * for an unknown id.
 */
export async function revokeGrant(db: Db, id: string, actor: string, now = new Date()): Promise<GrantView> {
  return await transaction(db, async (tx) => {
    const before = await readGrantView(tx, id, now);
    if (!before) throw new GatehouseError("grant_not_found", `no grant "${id}"`);
    if (before.state === "ended") {
      const [settled] = await tx
        .update(grants)
        .set({ endedAt: before.endedAt ?? now.toISOString(), endReason: before.endReason })
        .where(and(eq(grants.id, id), isNull(grants.endedAt)))
        .returning();
      // Written down now, so it is in the log who made it final.
      if (settled) {
        await writeAudit(tx, {
          actor,
          action: "grant.ended",
          subject: settled.tool,
          callId: settled.callId,
          detail: `${named(settled)}: ${settled.endReason ?? "ended"} (made final by ${actor})`,
        });
      }
      return before;
    }
    const [row] = await tx
      .update(grants)
      .set({ endedAt: now.toISOString(), endReason: `revoked by ${actor}` })
      .where(and(eq(grants.id, id), limitsHold(grants, now.toISOString())))
      .returning();
    if (row) {
      await writeAudit(tx, {
        actor,
        action: "grant.revoked",
        subject: row.tool,
        callId: row.callId,
        detail: `${named(row)}: revoked by ${actor}`,
      });
    }
    return (await readGrantView(tx, id, now)) ?? before;
  });
}

/** Which live grants {@link endGrants} ends. */
export type GrantEndingScope =
  /** The tool's grants; with `definitionHashNot`, only those pinned to another definition. */
  | { tool: string; definitionHashNot?: string }
  /** Everything granted to this requester. */
  | { requester: { kind: "agent" | "user"; name: string } }
  /** Everything this person granted under `madeAs` (a role they no longer hold). */
  | { createdBy: string; madeAs: "reviewer" | "owner" };

function scopeWhere(where: GrantEndingScope): SQL | undefined {
  if ("tool" in where) {
    return and(
      eq(grants.tool, where.tool),
      where.definitionHashNot === undefined ? undefined : ne(grants.definitionHash, where.definitionHashNot),
    );
  }
  if ("requester" in where) {
    return and(
      eq(grants.requesterKind, where.requester.kind),
      eq(grants.requesterName, where.requester.name),
    );
  }
  return and(eq(grants.createdBy, where.createdBy), eq(grants.madeAs, where.madeAs));
}

/**
 * Ends, eagerly, the grants in `where` whose own limits still hold (not ended, expired or used
 * up: those keep the reason they already have), recording `reason` and one `grant.ended` audit
 * row each (by `actor`), in one transaction — the caller's, when given its `tx`, so the
 * ending stands or falls with its cause (a token's revocation, a role taken away, a refresh).
 * Returns how many it ended.
 */
export async function endGrants(
  db: Db,
  where: GrantEndingScope,
  reason: string,
  actor: string,
  now = new Date(),
): Promise<number> {
  const at = now.toISOString();
  return await transaction(db, async (tx) => {
    const ended = await tx
      .update(grants)
      .set({ endedAt: at, endReason: reason })
      .where(and(scopeWhere(where), limitsHold(grants, at)))
      .returning();
    for (const row of ended) {
      await writeAudit(tx, {
        actor,
        action: "grant.ended",
        subject: row.tool,
        callId: row.callId,
        detail: `${named(row)}: ${reason}`,
      });
    }
    return ended.length;
  });
}

/** The parts of a change-feed row (server/catalogue's `RecordedChange`) that end grants. */
export type GrantEndingChange = Pick<ChangeView, "kind" | "localName" | "server" | "at">;

/**
 * Ends the grants a catalogue refresh made void, on the refresh's transaction (the `tx` given
 * to its `alsoWrite`, which sees the tool rows already updated): a `changed` tool's grants pinned to
 * any definition but its new one ("the tool's definition changed" — the feed row carries only
 * short hashes, so the new one is read from the tools table), and all grants of a tool that is
 * `gone` or, having had a row, `excluded` ("the tool is gone"). The actor is `server:<name>`,
 * as for the refresh's own audit rows; the ending time is the refresh's. Returns how many ended.
 */
export async function endGrantsForChanges(db: Db, changes: readonly GrantEndingChange[]): Promise<number> {
  const relevant = changes.filter(
    (c): c is GrantEndingChange & { localName: string } =>
      c.localName !== null && (c.kind === "changed" || c.kind === "gone" || c.kind === "excluded"),
  );
  if (relevant.length === 0) return 0;
  const found = await db
    .select({ name: tools.localName, hash: tools.definitionHash })
    .from(tools)
    .where(
      inArray(
        tools.localName,
        relevant.map((c) => c.localName),
      ),
    );
  const hashes = new Map(found.map((r) => [r.name, r.hash]));
  let count = 0;
  for (const c of relevant) {
    const actor = `server:${c.server}`;
    const at = new Date(c.at);
    const hash = hashes.get(c.localName);
    if (c.kind === "changed" && hash !== undefined) {
      count += await endGrants(
        db,
        { tool: c.localName, definitionHashNot: hash },
        "the tool's definition changed",
        actor,
        at,
      );
    } else {
      count += await endGrants(db, { tool: c.localName }, "the tool is gone", actor, at);
    }
  }
  return count;
}
