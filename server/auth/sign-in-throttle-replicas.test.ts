/**
 * One sign-in throttle across replicas (PRODUCT.md §14): several `LoginThrottle`s on one
 * database, as several Gatehouse processes would have (on PostgreSQL each its own connection
 * pool on one database; on SQLite, one process to a store, they share the one store), count
 * every attempt once, whichever replica admitted it.
 */
import { afterEach, describe, expect, it } from "vitest";
import { GatehouseError } from "@/lib/errors";
import { createTestUser, request } from "@/test/support/runtime";
import { freshDatabaseUrl, openTestDb, testDialect } from "@/test/support/store";
import { closeDb, type Db, openStore } from "../store/db";
import { LoginThrottle, PER_ADDRESS, PER_NAME, TooManyAttempts } from "./access";
import { expectError, runtimePerTest } from "./auth-fixtures";
import { signIn } from "./signin";
import { refusal, tryOnce } from "./throttle-fixtures";

const start = runtimePerTest();

const opened: Db[] = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((db) => closeDb(db)));
});

/**
 * `n` store handles on one database (`url`, or a new one; on SQLite, `shared` or a new store),
 * as `n` replicas would have.
 */
async function onOneDatabase(n: number, at: { url?: string; shared?: Db } = {}): Promise<Db[]> {
  if (testDialect !== "postgres") {
    const db = at.shared ?? (await openTestDb());
    return Array.from({ length: n }, () => db);
  }
  const url = at.url ?? (await freshDatabaseUrl());
  const dbs = await Promise.all(Array.from({ length: n }, () => openStore({ dialect: "postgres", url })));
  opened.push(...dbs);
  return dbs;
}

/** One throttle per replica, each on its own store handle. */
async function replicas(n: number): Promise<LoginThrottle[]> {
  return (await onOneDatabase(n)).map((db) => new LoginThrottle(db));
}

/** Admitted or refused: anything else (a store error) fails the test. */
async function admitted(attempt: Promise<unknown>): Promise<boolean> {
  try {
    await attempt;
    return true;
  } catch (err) {
    if (err instanceof TooManyAttempts) return false;
    throw err;
  }
}

describe("one count across replicas", () => {
  it("ten failed sign-ins spread over three throttles on one store lock the name as one throttle would", async () => {
    const throttles = await replicas(3);
    const now = Date.now();
    for (let i = 0; i < PER_NAME.max; i++) {
      await tryOnce(throttles[i % 3] as LoginThrottle, { name: i % 2 ? "Alice" : "alice" }, now);
    }
    for (const throttle of throttles) {
      const refused = await refusal(throttle.begin({ name: "ALICE", address: null }, now + 1000));
      expect(refused.retryAfterSeconds).toBe(PER_NAME.windowMs / 1000 - 1);
    }
    // Another name is untouched on every replica.
    for (const throttle of throttles) await tryOnce(throttle, { name: "bob" }, now + 1000, "succeeded");
  });

  it("concurrent admissions across throttles never pass the limit", async () => {
    const throttles = await replicas(3);
    const now = Date.now();
    const outcomes = await Promise.all(
      Array.from({ length: 30 }, (_, i) =>
        admitted((throttles[i % 3] as LoginThrottle).begin({ name: "alice", address: null }, now)),
      ),
    );
    expect(outcomes.filter(Boolean)).toHaveLength(PER_NAME.max);
  });

  it("concurrent admissions from one address across throttles never pass the address's limit", async () => {
    const throttles = await replicas(3);
    const now = Date.now();
    const outcomes = await Promise.all(
      Array.from({ length: PER_ADDRESS.max + 15 }, (_, i) =>
        admitted(
          (throttles[i % 3] as LoginThrottle).begin({ name: `name-${i}`, address: "203.0.113.9" }, now),
        ),
      ),
    );
    expect(outcomes.filter(Boolean)).toHaveLength(PER_ADDRESS.max);
  });

  it("a right password forgives the name on every replica", async () => {
    const [a, b, c] = (await replicas(3)) as [LoginThrottle, LoginThrottle, LoginThrottle];
    const now = Date.now();
    for (let i = 0; i < PER_NAME.max - 1; i++) await tryOnce(a, { name: "alice" }, now);
    await tryOnce(b, { name: "alice" }, now, "succeeded");
    // A whole fresh allowance, wherever it is spent.
    for (let i = 0; i < PER_NAME.max; i++) await tryOnce(c, { name: "alice" }, now);
    expect((await refusal(a.begin({ name: "alice", address: null }, now))).code).toBe("too_many_attempts");
  });

  it("a password reset on one replica unlocks the name on every replica", async () => {
    const [a, b] = (await replicas(2)) as [LoginThrottle, LoginThrottle];
    const now = Date.now();
    for (let i = 0; i < PER_NAME.max; i++) await tryOnce(a, { name: "alice" }, now);
    await refusal(a.begin({ name: "alice", address: null }, now));
    await b.forget("Alice");
    await tryOnce(a, { name: "alice" }, now, "succeeded");
  });
});

describe("the sign-in route on one replica, guesses on another", () => {
  it("another replica's failures lock the name at the route, and the route's right password forgives it there", async () => {
    const rt = await start();
    const alice = await createTestUser(rt.runtime, "alice", ["reviewer"]);
    const [other] = (await onOneDatabase(1, {
      ...(rt.databaseUrl ? { url: rt.databaseUrl } : {}),
      shared: rt.runtime.db,
    })) as [Db];
    const elsewhere = new LoginThrottle(other);
    const guess = (password: string) =>
      signIn(other, elsewhere, { name: "alice", password, secure: false, address: null }).then(
        () => "signed in",
        (err: unknown) => (err instanceof GatehouseError ? err.code : String(err)),
      );
    for (let i = 0; i < PER_NAME.max - 1; i++) expect(await guess(`wrong-${i}`)).toBe("invalid_credentials");
    const right = () =>
      request("POST", "/api/session", { body: { name: "alice", password: alice.password } });
    expect((await right()).status).toBe(200);
    // Forgiven on the other replica too: ten more guesses there, then the route refuses.
    for (let i = 0; i < PER_NAME.max; i++) expect(await guess(`again-${i}`)).toBe("invalid_credentials");
    expect(await guess("one-more")).toBe("too_many_attempts");
    const locked = await right();
    await expectError(locked, 429, "too_many_attempts");
    expect(Number(locked.headers.get("retry-after"))).toBeGreaterThan(0);
  });
});
