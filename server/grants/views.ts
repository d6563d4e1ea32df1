import "server-only";
import { and, desc, eq, not, type SQL, sql } from "drizzle-orm";
import { alias } from "drizzle-orm/sqlite-core";
import type { GrantScope, GrantView } from "@/lib/api-types";
import { type Db, first } from "../store/db";
import { agentTokens, calls, grants, tools } from "../store/schema";
import type { GrantRow } from "./cover";
import { type GrantColumns, limitsHold, requesterStands, reviewerStands } from "./live";

/**
 * What besides its own row decides whether a grant is live, and how its view reads: read from
 * the store by {@link listGrants} and {@link readGrantView}.
 */
export interface GrantStanding {
  /** agent: a token of that name, not revoked; user: a user of that name. */
  requesterStands: boolean;
  /** When the requester stopped standing, if known (the token's `revokedAt`). */
  requesterEndedAt: string | null;
  /** The grant's reviewer still holds the reviewer role. */
  reviewerStands: boolean;
  /** The tool's current definition hash; null when it has no row. */
  toolDefinitionHash: string | null;
  /** Whether the server listed the tool at the last refresh. */
  toolPresent: boolean;
  /** When the tool's row last changed (a definition change or going away). */
  toolUpdatedAt: string | null;
  /** The approved call's arguments, shown for an `arguments` grant; null when unknown. */
  arguments: Record<string, unknown> | null;
}

/** Everything stands, the tool is unchanged, the arguments unknown: what the row alone can tell. */
function rowOnly(row: GrantRow): GrantStanding {
  return {
    requesterStands: true,
    requesterEndedAt: null,
    reviewerStands: true,
    toolDefinitionHash: row.definitionHash,
    toolPresent: true,
    toolUpdatedAt: null,
    arguments: null,
  };
}

/**
 * Why and when a grant ended, or null while it is live. The first reason that applies, in this
 * order: the recorded ending (revoked, token revoked, role lost, definition changed, ... — set
 * eagerly with its cause), expiry, used up, then what was found lazily. `listGrants` orders
 * ended grants by the same times in SQL ({@link endedAtSql}); keep the two in step.
 */
function endingOf(row: GrantRow, now: string, s: GrantStanding): { reason: string; at: string } | null {
  if (row.endedAt !== null) return { reason: row.endReason ?? "ended", at: row.endedAt };
  if (row.expiresAt <= now) return { reason: "expired", at: row.expiresAt };
  if (row.usesAllowed !== null && row.uses >= row.usesAllowed) {
    return { reason: `used up (${row.uses} of ${row.usesAllowed})`, at: row.lastUsedAt ?? row.createdAt };
  }
  if (!s.requesterStands) {
    const reason =
      row.requesterKind === "agent"
        ? "the agent's token was revoked"
        : `${row.requesterName} is no longer a user`;
    return { reason, at: s.requesterEndedAt ?? now };
  }
  if (!s.reviewerStands) return { reason: `${row.createdBy} no longer has the ${row.madeAs} role`, at: now };
  if (s.toolDefinitionHash !== row.definitionHash) {
    return { reason: "the tool's definition changed", at: s.toolUpdatedAt ?? now };
  }
  if (!s.toolPresent) return { reason: "the tool is gone", at: s.toolUpdatedAt ?? now };
  return null;
}

/**
 * A grant as people see it, its state and end reason computed at `now` (default: the current
 * time). Without `standing` only the row's own facts count (recorded ending, expiry, uses) and
 * `arguments` is null; {@link readGrantView} and {@link listGrants} read the standing too.
 */
export function grantView(row: GrantRow, now = new Date(), standing?: GrantStanding): GrantView {
  const s = standing ?? rowOnly(row);
  const ending = endingOf(row, now.toISOString(), s);
  return {
    id: row.id,
    requester: { kind: row.requesterKind === "user" ? "user" : "agent", name: row.requesterName },
    tool: row.tool,
    scope: row.scope as GrantScope,
    arguments: row.scope === "arguments" ? s.arguments : null,
    callId: row.callId,
    createdBy: row.createdBy,
    createdAt: row.createdAt,
    expiresAt: row.expiresAt,
    usesAllowed: row.usesAllowed,
    uses: row.uses,
    lastUsedAt: row.lastUsedAt,
    state: ending ? "ended" : "live",
    endReason: ending?.reason ?? null,
    endedAt: ending?.at ?? null,
  };
}

const token = alias(agentTokens, "requester_token");
const tool = alias(tools, "grant_tool");
const approved = alias(calls, "approved_call");
const g: GrantColumns = grants;

/** The tool still has the definition the grant is pinned to, and is listed. */
const toolHolds = sql`(${tool.localName} IS NOT NULL AND ${tool.definitionHash} = ${grants.definitionHash} AND ${tool.present} = 1)`;

/** Live as the list shows it: as for covering a call, and the tool unchanged and present. */
function listedLive(now: string): SQL {
  return sql`(${limitsHold(g, now)} AND ${requesterStands(g)} AND ${reviewerStands(g)} AND ${toolHolds})`;
}

/** {@link endingOf}'s times, in SQL, for ordering ended grants newest ended first. */
function endedAtSql(now: string): SQL {
  return sql`(CASE
    WHEN ${grants.endedAt} IS NOT NULL THEN ${grants.endedAt}
    WHEN ${grants.expiresAt} <= ${now} THEN ${grants.expiresAt}
    WHEN ${grants.usesAllowed} IS NOT NULL AND ${grants.uses} >= ${grants.usesAllowed} THEN COALESCE(${grants.lastUsedAt}, ${grants.createdAt})
    WHEN NOT ${requesterStands(g)} THEN COALESCE(${token.revokedAt}, ${now})
    WHEN NOT ${reviewerStands(g)} THEN ${now}
    ELSE COALESCE(${tool.updatedAt}, ${now})
  END)`;
}

function selectWithStanding(db: Db) {
  return db
    .select({
      grant: grants,
      requesterStands: sql<boolean>`${requesterStands(g)}`.mapWith(Boolean),
      reviewerStands: sql<boolean>`${reviewerStands(g)}`.mapWith(Boolean),
      tokenRevokedAt: token.revokedAt,
      toolDefinitionHash: tool.definitionHash,
      toolPresent: tool.present,
      toolUpdatedAt: tool.updatedAt,
      callArguments: approved.arguments,
    })
    .from(grants)
    .leftJoin(token, and(eq(grants.requesterKind, "agent"), eq(token.name, grants.requesterName)))
    .leftJoin(tool, eq(tool.localName, grants.tool))
    .leftJoin(approved, eq(approved.id, grants.callId));
}

type Joined = Awaited<ReturnType<typeof selectWithStanding>>[number];

function parseArguments(text: string | null): Record<string, unknown> | null {
  if (text === null) return null;
  try {
    const value: unknown = JSON.parse(text);
    return value !== null && typeof value === "object" && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : null;
  } catch {
    return null;
  }
}

function viewOf(r: Joined, now: Date): GrantView {
  return grantView(r.grant, now, {
    requesterStands: r.requesterStands,
    requesterEndedAt: r.tokenRevokedAt,
    reviewerStands: r.reviewerStands,
    toolDefinitionHash: r.toolDefinitionHash,
    toolPresent: r.toolPresent ?? false,
    toolUpdatedAt: r.toolUpdatedAt,
    arguments: parseArguments(r.callArguments),
  });
}

/** One grant's view with its standing read from the store; null for an unknown id. */
export async function readGrantView(db: Db, id: string, now = new Date()): Promise<GrantView | null> {
  const row = await first(selectWithStanding(db).where(eq(grants.id, id)));
  return row ? viewOf(row, now) : null;
}

/** Ended grants {@link listGrants} returns by default. */
export const ENDED_GRANTS_LISTED = 50;

/**
 * `GET /api/grants`: the live grants, newest first, then at most `endedLimit` (default
 * {@link ENDED_GRANTS_LISTED}) ended ones, the most recently ended first, each with why it ended.
 * Live grants are few (a working day at most); ended ones are ordered and cut in SQL.
 */
export async function listGrants(
  db: Db,
  opts: { now?: Date; endedLimit?: number } = {},
): Promise<GrantView[]> {
  const now = opts.now ?? new Date();
  const iso = now.toISOString();
  const live = await selectWithStanding(db)
    .where(listedLive(iso))
    .orderBy(desc(grants.createdAt), desc(grants.id));
  const ended = await selectWithStanding(db)
    .where(not(listedLive(iso)))
    .orderBy(desc(endedAtSql(iso)), desc(grants.createdAt))
    .limit(Math.max(0, opts.endedLimit ?? ENDED_GRANTS_LISTED));
  return [...live, ...ended].map((r) => viewOf(r, now));
}
