/**
 * What the grants tests share: a real, migrated store (SQLite in memory, or a fresh PostgreSQL
 * database in that project), the people of a grant (reviewer alice, owner olga, agent token
 * "build-bot") and the tool it is for as rows, the approved call as a call row, and grants made
 * with the real `createGrant`. The tests end grants with the real `revokeToken` and `setUserRoles`.
 */
import { createHash } from "node:crypto";
import { asc, eq } from "drizzle-orm";
import type { Role } from "@/lib/api-types";
import { memoryDb } from "@/test/support/catalogue";
import type { Db } from "../store/db";
import { agentTokens, auditEvents, calls, tools, users } from "../store/schema";
import { type CoverQuery, createGrant, type GrantRow, type NewGrant } from "./index";

export const TOOL = "notes_add_note";
export const OTHER_TOOL = "notes_delete_note";
export const HASH = "a".repeat(64);
export const AGENT = "build-bot";
/** The approved call's arguments, and a digest standing in for the broker's. */
export const ARGS = { text: "hello" };
export const DIGEST = digestOf(ARGS);
/** A fixed start, so expiry is arithmetic rather than waiting. */
export const T0 = new Date("2026-12-01T09:00:00.000Z");

export function digestOf(args: Record<string, unknown>): string {
  return createHash("sha256").update(JSON.stringify(args)).digest("hex");
}

/** `minutes` after {@link T0}. */
export function at(minutes: number): Date {
  return new Date(T0.getTime() + minutes * 60_000);
}

/**
 * A person with `roles`, as a row: these tests never sign in, and the fixture stays in this room
 * (server/auth imports server/grants, so server/grants must not import it back).
 */
export async function addUser(db: Db, name: string, roles: Role[]): Promise<void> {
  await db.insert(users).values({ name, passwordHash: "not-a-hash", roles: roles.join(",") });
}

/** An agent token of that name, as a row (its secret is never used here). */
export async function addToken(db: Db, name: string): Promise<void> {
  await db
    .insert(agentTokens)
    .values({ name, tokenHash: createHash("sha256").update(name).digest("hex"), createdBy: "test" });
}

/** A catalogue row for `localName` with definition hash `hash`. */
export async function addTool(db: Db, localName: string, hash = HASH): Promise<void> {
  await db.insert(tools).values({
    localName,
    server: "notes",
    remoteName: localName.slice("notes_".length),
    status: "enabled",
    present: true,
    definition: JSON.stringify({ name: localName }),
    definitionHash: hash,
    pinnedHash: hash,
    description: "",
    readOnly: false,
  });
}

/** A store with alice (reviewer), olga (owner), the token "build-bot" and both tools. */
export async function grantWorld(): Promise<Db> {
  const db = await memoryDb();
  await addUser(db, "alice", ["reviewer"]);
  await addUser(db, "olga", ["owner"]);
  await addToken(db, AGENT);
  await addTool(db, TOOL);
  await addTool(db, OTHER_TOOL);
  return db;
}

let callCount = 0;

/** The approved call a grant is made with, stored as the broker would have (running). */
async function approvedCall(db: Db, g: NewGrant, args: Record<string, unknown>): Promise<string> {
  callCount += 1;
  const id = `call-${callCount}`;
  await db.insert(calls).values({
    id,
    tool: g.tool,
    server: "notes",
    remoteName: g.tool,
    arguments: JSON.stringify(args),
    argumentsDigest: g.argumentsDigest,
    definitionHash: g.definitionHash,
    destructive: true,
    requesterKind: g.requesterKind,
    requesterName: g.requesterName,
    status: "running",
    createdAt: T0.toISOString(),
  });
  return id;
}

/**
 * A grant by alice for "build-bot" on {@link TOOL} with {@link ARGS} (scope `arguments`, 60
 * minutes, from {@link T0}) unless `over` says otherwise; its approved call is stored first.
 */
export async function grant(
  db: Db,
  over: Partial<Omit<NewGrant, "callId">> & { args?: Record<string, unknown> } = {},
  now = T0,
): Promise<GrantRow> {
  const { args = ARGS, ...rest } = over;
  const g: NewGrant = {
    requesterKind: "agent",
    requesterName: AGENT,
    tool: TOOL,
    definitionHash: HASH,
    scope: "arguments",
    argumentsDigest: digestOf(args),
    callId: "",
    createdBy: "alice",
    minutes: 60,
    ...rest,
  };
  return await createGrant(db, { ...g, callId: await approvedCall(db, g, args) }, now);
}

/** The cover query of a call by "build-bot" of {@link TOOL} with {@link ARGS}, unless `over` says otherwise. */
export function call(over: Partial<CoverQuery> = {}): CoverQuery {
  return {
    requesterKind: "agent",
    requesterName: AGENT,
    tool: TOOL,
    definitionHash: HASH,
    argumentsDigest: DIGEST,
    ...over,
  };
}

/** The audit rows with `action`, oldest first. */
export async function auditOf(db: Db, action: string) {
  return await db
    .select({
      actor: auditEvents.actor,
      subject: auditEvents.subject,
      callId: auditEvents.callId,
      detail: auditEvents.detail,
    })
    .from(auditEvents)
    .where(eq(auditEvents.action, action))
    .orderBy(asc(auditEvents.id));
}
