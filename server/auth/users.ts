import "server-only";
import { asc, count, eq, isNotNull } from "drizzle-orm";
import { roles as allRoles, type Role, type UserView, userEmail } from "@/lib/api-types";
import { GatehouseError } from "@/lib/errors";
import { endGrants } from "../grants";
import { type Db, first, transaction } from "../store/db";
import { prepared } from "../store/prepared";
import { auditEvents, setupCodes, users } from "../store/schema";
import { hashPassword, newSecret, sha256, verifyPassword } from "./crypto";

type UserRow = typeof users.$inferSelect;

export function parseRoles(text: string): Role[] {
  return allRoles.filter((r) => text.split(",").includes(r));
}

/** Roles as stored: the known ones, in the product's order, comma-separated. */
function storedRoles(list: readonly Role[]): string {
  return allRoles.filter((r) => list.includes(r)).join(",");
}

export function toUserView(row: UserRow): UserView {
  return {
    id: row.id,
    name: row.name,
    roles: parseRoles(row.roles),
    email: row.email,
    createdAt: row.createdAt,
  };
}

/**
 * An address as stored: checked with the API's `userEmail` schema (so the CLI, the API and
 * direct callers agree), trimmed, the domain lower-cased (domains are case-insensitive; the
 * local part is kept as given, since a server may treat it as case-sensitive). "" and
 * undefined mean "no address" (null). Throws `bad_request` naming the field.
 */
export function normalizeEmail(input: string | null | undefined): string | null {
  if (input == null) return null;
  const parsed = userEmail.safeParse(input);
  if (!parsed.success) {
    throw new GatehouseError("bad_request", `email: ${parsed.error.issues[0]?.message ?? "not valid"}`);
  }
  if (parsed.data === "") return null;
  const at = parsed.data.lastIndexOf("@");
  return `${parsed.data.slice(0, at)}@${parsed.data.slice(at + 1).toLowerCase()}`;
}

export async function countUsers(db: Db): Promise<number> {
  return (await first(db.select({ n: count() }).from(users)))?.n ?? 0;
}

export async function listUsers(db: Db): Promise<UserView[]> {
  return (await db.select().from(users).orderBy(asc(users.name))).map(toUserView);
}

export interface CreateUserParams {
  name: string;
  password: string;
  roles: Role[];
  /** Where notifications go; optional, "" means none (see {@link normalizeEmail}). */
  email?: string | null;
  /** Who did it, for the audit log ("cli", "setup" or a user name). */
  actor: string;
}

/** Creates a user; `already_exists` when the name is taken, `bad_request` for a bad address. */
export async function createUser(db: Db, params: CreateUserParams): Promise<UserView> {
  const email = normalizeEmail(params.email);
  const passwordHash = await hashPassword(params.password);
  const roleText = allRoles.filter((r) => params.roles.includes(r)).join(",");
  return transaction(db, async (tx) => {
    if (await first(tx.select({ id: users.id }).from(users).where(eq(users.name, params.name)))) {
      throw new GatehouseError("already_exists", `A user named "${params.name}" already exists.`);
    }
    const [row] = await tx
      .insert(users)
      .values({ name: params.name, passwordHash, roles: roleText, email })
      .returning();
    if (!row) throw new Error("the new user's row was not returned");
    await tx
      .insert(auditEvents)
      .values({ actor: params.actor, action: "user.create", subject: params.name, detail: roleText });
    return toUserView(row);
  });
}

export interface SetUserEmailParams {
  name: string;
  /** The new address; "" or null clears it. */
  email: string | null;
  /** Who did it, for the audit log. */
  actor: string;
}

/**
 * Sets or clears a person's address, with a `user.email` audit row (detail: the new address,
 * or "cleared") in the same transaction. Setting the address it already has changes nothing
 * and writes no row. `not_found` for an unknown name, `bad_request` for a bad address.
 */
export async function setUserEmail(db: Db, params: SetUserEmailParams): Promise<UserView> {
  const email = normalizeEmail(params.email);
  return transaction(db, async (tx) => {
    const row = await first(tx.select().from(users).where(eq(users.name, params.name)));
    if (!row) throw new GatehouseError("not_found", `no user named "${params.name}"`);
    if (row.email === email) return toUserView(row);
    const updated =
      (await first(tx.update(users).set({ email }).where(eq(users.id, row.id)).returning())) ?? row;
    await tx.insert(auditEvents).values({
      actor: params.actor,
      action: "user.email",
      subject: params.name,
      detail: email ?? "cleared",
    });
    return toUserView(updated);
  });
}

export interface SetUserRolesParams {
  name: string;
  /** The roles the person holds from now on (at least one; duplicates and order do not matter). */
  roles: Role[];
  /** Who did it, for the audit log. */
  actor: string;
}

/**
 * Sets a person's roles, with a `user.roles` audit row (detail: "owner,reviewer → owner") in the
 * same transaction; the same roles again change nothing and write no row. Taking the reviewer
 * role away ends, in that transaction too, every live grant the person made ("<name> no longer
 * has the reviewer role", PRODUCT.md §11). Sessions need nothing: they read the user's row, and
 * so the roles, on every request.
 *
 * `now` (default: the current time) is when those grants end.
 *
 * `not_found` for an unknown name; `bad_request` for no roles; `conflict` when it would take the
 * owner role from the last owner (nobody could manage the instance any more).
 */
export async function setUserRoles(db: Db, params: SetUserRolesParams, now = new Date()): Promise<UserView> {
  const next = storedRoles(params.roles);
  if (next === "") throw new GatehouseError("bad_request", "roles: give at least one role");
  // One transaction for the last-owner check and the update (SQLite: under one write lock;
  // PostgreSQL: SERIALIZABLE), so another process (the CLI) cannot take the other owner's role
  // in between.
  return transaction(db, async (tx) => {
    const row = await first(tx.select().from(users).where(eq(users.name, params.name)));
    if (!row) throw new GatehouseError("not_found", `no user named "${params.name}"`);
    const before = parseRoles(row.roles);
    const after = parseRoles(next);
    if (storedRoles(before) === next) return toUserView(row);
    if (before.includes("owner") && !after.includes("owner")) {
      const owners = (await tx.select({ name: users.name, roles: users.roles }).from(users)).filter((u) =>
        parseRoles(u.roles).includes("owner"),
      );
      if (owners.every((u) => u.name === params.name)) {
        throw new GatehouseError(
          "conflict",
          `${params.name} is the last owner: give someone else the owner role first`,
        );
      }
    }
    const updated =
      (await first(tx.update(users).set({ roles: next }).where(eq(users.id, row.id)).returning())) ?? row;
    for (const role of ["reviewer", "owner"] as const) {
      if (!before.includes(role) || after.includes(role)) continue;
      // What they granted under the role they lost ends, in this transaction (a nested one).
      await endGrants(
        tx,
        { createdBy: params.name, madeAs: role },
        `${params.name} no longer has the ${role} role`,
        params.actor,
        now,
      );
    }
    await tx.insert(auditEvents).values({
      actor: params.actor,
      action: "user.roles",
      subject: params.name,
      detail: `${storedRoles(before)} → ${next}`,
    });
    return toUserView(updated);
  });
}

export interface UpdateUserParams {
  name: string;
  /** A new address ("" or null clears it); absent: unchanged. */
  email?: string | null;
  /** New roles; absent: unchanged. */
  roles?: Role[];
  actor: string;
}

/**
 * The address and roles of `PATCH /api/users/:name` (through `updatePerson` in user-admin.ts,
 * which adds the password): {@link setUserEmail} and {@link setUserRoles} for what is given, in
 * one transaction (a refused role change leaves the address as it was). With neither, returns
 * the person as they are.
 */
export async function updateUser(db: Db, params: UpdateUserParams): Promise<UserView> {
  return transaction(db, async (tx) => {
    const { name, actor } = params;
    let view: UserView | null = null;
    if (params.email !== undefined) view = await setUserEmail(tx, { name, email: params.email, actor });
    if (params.roles !== undefined) view = await setUserRoles(tx, { name, roles: params.roles, actor });
    if (view) return view;
    const row = await first(tx.select().from(users).where(eq(users.name, name)));
    if (!row) throw new GatehouseError("not_found", `no user named "${name}"`);
    return toUserView(row);
  });
}

/** Someone the notifier may mail. */
export interface ReviewerAddress {
  name: string;
  email: string;
}

/**
 * The people to mail about a pending call: users holding the `reviewer` role (owners without
 * it are not included) who have an address, in name order. `except` leaves one user out by
 * name — the requester, so nobody is asked to review their own call; pass it only when the
 * requester is a person, since agent tokens have their own names. Prepared (per store or
 * transaction object), so the notifier can call it inside the transaction that makes a call
 * pending: pass that transaction's `tx`.
 */
export async function reviewerEmails(db: Db, opts: { except?: string } = {}): Promise<ReviewerAddress[]> {
  const query = prepared(db, "users.withEmail", () =>
    db
      .select({ name: users.name, email: users.email, roles: users.roles })
      .from(users)
      .where(isNotNull(users.email))
      .orderBy(asc(users.name))
      .prepare(),
  );
  const out: ReviewerAddress[] = [];
  for (const row of await query.execute()) {
    if (row.email === null || row.name === opts.except) continue;
    if (parseRoles(row.roles).includes("reviewer")) out.push({ name: row.name, email: row.email });
  }
  return out;
}

/** Whether `name` is a person who may review now: they exist and hold the reviewer or owner role. */
export async function mayReviewNow(db: Db, name: string): Promise<boolean> {
  const row = await first(db.select({ roles: users.roles }).from(users).where(eq(users.name, name)));
  if (!row) return false;
  const roles = parseRoles(row.roles);
  return roles.includes("reviewer") || roles.includes("owner");
}

/**
 * The stored password hash of `name`, or null when there is no such user. Read before a password
 * check and compared after it, so a session is not started (nor a password changed) on the
 * strength of a password an owner reset, or a person removed, while the check ran.
 */
export async function passwordHashOf(db: Db, name: string): Promise<string | null> {
  return (
    (await first(db.select({ hash: users.passwordHash }).from(users).where(eq(users.name, name))))?.hash ??
    null
  );
}

/** Checks a name and password; null when either is wrong (the caller does not learn which). */
export async function verifyCredentials(db: Db, name: string, password: string): Promise<UserView | null> {
  const row = await first(db.select().from(users).where(eq(users.name, name)));
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
export async function issueSetupCode(db: Db): Promise<string | null> {
  if ((await countUsers(db)) > 0) return null;
  const code = newSecret();
  await transaction(db, async (tx) => {
    await tx.delete(setupCodes);
    await tx.insert(setupCodes).values({ codeHash: sha256(code) });
  });
  return code;
}

/** Creates the first owner with a valid setup code; the code is spent in the same transaction. */
export async function completeSetup(
  db: Db,
  params: { code: string; name: string; password: string },
): Promise<UserView> {
  const passwordHash = await hashPassword(params.password);
  return transaction(db, async (tx) => {
    if (((await first(tx.select({ n: count() }).from(users)))?.n ?? 0) > 0) {
      throw new GatehouseError("setup_done", "Setup is already done: sign in instead.");
    }
    const spent = await tx
      .delete(setupCodes)
      .where(eq(setupCodes.codeHash, sha256(params.code)))
      .returning();
    if (spent.length === 0) {
      throw new GatehouseError(
        "invalid_setup_code",
        "This setup link is not valid: use the newest link printed on Gatehouse's console.",
      );
    }
    await tx.delete(setupCodes);
    const [row] = await tx
      .insert(users)
      .values({ name: params.name, passwordHash, roles: "owner" })
      .returning();
    if (!row) throw new Error("the new owner's row was not returned");
    await tx
      .insert(auditEvents)
      .values({ actor: "setup", action: "user.create", subject: params.name, detail: "owner" });
    return toUserView(row);
  });
}
