/**
 * A password check takes a while (scrypt), and an owner may act meanwhile: a reset or a removal
 * that commits while a sign-in or an own-password change is being checked wins over it.
 */
import { eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { GatehouseError } from "@/lib/errors";
import { createTestUser } from "@/test/support/runtime";
import { first } from "../store/db";
import { sessions, users } from "../store/schema";
import { LoginThrottle } from "./access";
import { runtimePerTest } from "./auth-fixtures";
import { signIn } from "./signin";
import { changeOwnPassword, removeUser, updatePerson } from "./user-admin";
import { verifyCredentials } from "./users";

const start = runtimePerTest();
const RESET_TO = "the owner's reset passphrase";

/** A password check that lets `meanwhile` commit after it compared the hash, before its caller goes on. */
function checkThen(meanwhile: () => Promise<unknown> | unknown): typeof verifyCredentials {
  return async (db, name, password) => {
    const user = await verifyCredentials(db, name, password);
    await meanwhile();
    return user;
  };
}

async function codeOf(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (err) {
    if (err instanceof GatehouseError) return err.code;
    throw err;
  }
  throw new Error("expected a refusal");
}

describe("a password checked while an owner acts", () => {
  it("a sign-in checked against the old password gets no session once a reset has committed", async () => {
    const rt = await start();
    const { db } = rt.runtime;
    const bob = await createTestUser(rt.runtime, "bob", ["reviewer"]);
    const reset = checkThen(() => updatePerson(db, null, { name: "bob", password: RESET_TO, actor: "olga" }));
    const params = { name: "bob", password: bob.password, secure: false, address: null };
    const before = (await db.select().from(sessions)).length;
    expect(await codeOf(signIn(db, new LoginThrottle(db), params, reset))).toBe("invalid_credentials");
    // The reset ended bob's session; the racing sign-in opened none.
    expect((await db.select().from(sessions)).length).toBe(before - 1);
  });

  it("a sign-in racing a removal answers invalid_credentials, not 500", async () => {
    const rt = await start();
    const { db } = rt.runtime;
    const bob = await createTestUser(rt.runtime, "bob", ["reviewer"]);
    await createTestUser(rt.runtime, "olga", ["owner"]);
    const remove = checkThen(() =>
      removeUser(db, { name: "bob", actor: "olga", withdrawPending: async () => 0 }),
    );
    const params = { name: "bob", password: bob.password, secure: false, address: null };
    expect(await codeOf(signIn(db, new LoginThrottle(db), params, remove))).toBe("invalid_credentials");
  });

  it("an own-password change racing an owner's reset does not undo the reset", async () => {
    const rt = await start();
    const { db } = rt.runtime;
    const bob = await createTestUser(rt.runtime, "bob", ["reviewer"]);
    const reset = checkThen(() => updatePerson(db, null, { name: "bob", password: RESET_TO, actor: "olga" }));
    const change = changeOwnPassword(
      db,
      new LoginThrottle(db),
      {
        name: "bob",
        current: bob.password,
        password: "the attacker's new one",
        keepSession: null,
        address: null,
      },
      reset,
    );
    expect(await codeOf(change)).toBe("unauthenticated");
    const row = await first(db.select().from(users).where(eq(users.name, "bob")));
    expect(await verifyCredentials(db, "bob", RESET_TO)).not.toBeNull();
    expect(row).toBeDefined();
  });
});
