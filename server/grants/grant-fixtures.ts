/**
 * What the grants tests share: a real in-memory store with migrations, the people of a grant
 * (reviewer alice, owner olga, agent token "build-bot") and the tool it is for as rows, the
 * approved call as a call row, and grants made with the real `createGrant`. The tests end grants
 * with the real `revokeToken` and `setUserRoles`.
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
export function addUser(db: Db, name: string, roles: Role[]): void {
  db.insert(users)
    .values({ name, passwordHash: "not-a-hash", roles: roles.join(",") })
    .run();
}

/** An agent token of that name, as a row (its secret is never used here). */
export function addToken(db: Db, name: string): void {
  db.insert(agentTokens)
    .values({ name, tokenHash: createHash("sha256").update(name).digest("hex"), createdBy: "test" })
    .run();
}

/** A catalogue row for `localName` with definition hash `hash`. */
export function addTool(db: Db, localName: string, hash = HASH): void {
  db.insert(tools)
    .values({
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
    })
    .run();
}

/** A store with alice (reviewer), olga (owner), the token "build-bot" and both tools. */
export function grantWorld(): Db {
  const db = memoryDb();
  addUser(db, "alice", ["reviewer"]);
  addUser(db, "olga", ["owner"]);
  addToken(db, AGENT);
  addTool(db, TOOL);
  addTool(db, OTHER_TOOL);
  return db;
}

let callCount = 0;

/** The approved call a grant is made with, stored as the broker would have (running). */
function approvedCall(db: Db, g: NewGrant, args: Record<string, unknown>): string {
  callCount += 1;
  const id = `call-${callCount}`;
  db.insert(calls)
    .values({
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
    })
    .run();
  return id;
}

/**
 * A grant by alice for "build-bot" on {@link TOOL} with {@link ARGS} (scope `arguments`, 60
 * minutes, from {@link T0}) unless `over` says otherwise; its approved call is stored first.
 */
export function grant(
  db: Db,
  over: Partial<Omit<NewGrant, "callId">> & { args?: Record<string, unknown> } = {},
  now = T0,
): GrantRow {
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
  return createGrant(db, { ...g, callId: approvedCall(db, g, args) }, now);
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
export function auditOf(db: Db, action: string) {
  return db
    .select({
      actor: auditEvents.actor,
      subject: auditEvents.subject,
      callId: auditEvents.callId,
      detail: auditEvents.detail,
    })
    .from(auditEvents)
    .where(eq(auditEvents.action, action))
    .orderBy(asc(auditEvents.id))
    .all();
}
