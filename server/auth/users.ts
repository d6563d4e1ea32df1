import "server-only";
import { asc, count, eq } from "drizzle-orm";
import { roles as allRoles, type Role, type UserView } from "@/lib/api-types";
import { GatehouseError } from "@/lib/errors";
import type { Db } from "../store/db";
import { auditEvents, setupCodes, users } from "../store/schema";
import { hashPassword, newSecret, sha256, verifyPassword } from "./crypto";

type UserRow = typeof users.$inferSelect;

export function parseRoles(text: string): Role[] {
  return allRoles.filter((r) => text.split(",").includes(r));
}

export function toUserView(row: UserRow): UserView {
  return { id: row.id, name: row.name, roles: parseRoles(row.roles), createdAt: row.createdAt };
}

export function countUsers(db: Db): number {
  return db.select({ n: count() }).from(users).get()?.n ?? 0;
}

export function listUsers(db: Db): UserView[] {
  return db.select().from(users).orderBy(asc(users.name)).all().map(toUserView);
}

export interface CreateUserParams {
  name: string;
  password: string;
  roles: Role[];
  /** Who did it, for the audit log ("cli", "setup" or a user name). */
  actor: string;
}

/** Creates a user; `already_exists` when the name is taken. */
export async function createUser(db: Db, params: CreateUserParams): Promise<UserView> {
  const passwordHash = await hashPassword(params.password);
  const roleText = allRoles.filter((r) => params.roles.includes(r)).join(",");
  return db.transaction((tx) => {
    if (tx.select({ id: users.id }).from(users).where(eq(users.name, params.name)).get()) {
      throw new GatehouseError("already_exists", `a user named "${params.name}" already exists`);
    }
    const row = tx
      .insert(users)
      .values({ name: params.name, passwordHash, roles: roleText })
      .returning()
      .get();
    tx.insert(auditEvents)
      .values({ actor: params.actor, action: "user.create", subject: params.name, detail: roleText })
      .run();
    return toUserView(row);
  });
}

/** Checks a name and password; null when either is wrong (the caller does not learn which). */
export async function verifyCredentials(db: Db, name: string, password: string): Promise<UserView | null> {
  const row = db.select().from(users).where(eq(users.name, name)).get();
  if (!row) {
    // Spend the same time as a real check so response timing does not reveal which names exist.
    await verifyPassword(password, DUMMY_HASH);
    return null;
  }
  return (await verifyPassword(password, row.passwordHash)) ? toUserView(row) : null;
}

const DUMMY_HASH = "scrypt$16384$8$1$AAAAAAAAAAAAAAAAAAAAAA$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";

/**
 * Issues a new one-time setup code while no user exists, replacing any earlier one; returns
 * null once an owner exists. The code is stored hashed; the caller prints it once.
 */
export function issueSetupCode(db: Db): string | null {
  if (countUsers(db) > 0) return null;
  const code = newSecret();
  db.transaction((tx) => {
    tx.delete(setupCodes).run();
    tx.insert(setupCodes)
      .values({ codeHash: sha256(code) })
      .run();
  });
  return code;
}

/** Creates the first owner with a valid setup code; the code is spent in the same transaction. */
export async function completeSetup(
  db: Db,
  params: { code: string; name: string; password: string },
): Promise<UserView> {
  const passwordHash = await hashPassword(params.password);
  return db.transaction((tx) => {
    if ((tx.select({ n: count() }).from(users).get()?.n ?? 0) > 0) {
      throw new GatehouseError("setup_done", "setup is already done: sign in instead");
    }
    const spent = tx
      .delete(setupCodes)
      .where(eq(setupCodes.codeHash, sha256(params.code)))
      .returning()
      .all();
    if (spent.length === 0) {
      throw new GatehouseError(
        "invalid_setup_code",
        "this setup link is not valid: use the newest link printed on Gatehouse's console",
      );
    }
    tx.delete(setupCodes).run();
    const row = tx
      .insert(users)
      .values({ name: params.name, passwordHash, roles: "owner" })
      .returning()
      .get();
    tx.insert(auditEvents)
      .values({ actor: "setup", action: "user.create", subject: params.name, detail: "owner" })
      .run();
    return toUserView(row);
  });
}
