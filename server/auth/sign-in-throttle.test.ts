/**
 * Sign-in throttling under pressure: concurrent guesses for one name, a table full of names, and
 * one client spraying many names. Addresses as the edge reports them over HTTP are in
 * sign-in-address.test.ts; several replicas on one store in sign-in-throttle-replicas.test.ts;
 * this file never starts an edge, as under `next dev`.
 */
import { describe, expect, it, vi } from "vitest";
import { GatehouseError } from "@/lib/errors";
import { createTestUser, request } from "@/test/support/runtime";
import { openTestDb } from "@/test/support/store";
import { CLIENT_ADDRESS_HEADER, clientAddress } from "../request";
import { addressBucket, LoginThrottle, PER_ADDRESS, PER_NAME } from "./access";
import { expectError, runtimePerTest } from "./auth-fixtures";
import { signIn } from "./signin";
import { refusal, tryOnce } from "./throttle-fixtures";
import { verifyCredentials } from "./users";

const start = runtimePerTest();

/** A check that waits for the test to answer it, counting the attempts that reached it. */
function gatedCheck() {
  const waiting: (() => void)[] = [];
  const check = {
    calls: 0,
    inFlight: 0,
    maxInFlight: 0,
    verify: (async (...args: Parameters<typeof verifyCredentials>) => {
      check.calls += 1;
      check.inFlight += 1;
      check.maxInFlight = Math.max(check.maxInFlight, check.inFlight);
      await new Promise<void>((resolve) => waiting.push(resolve));
      check.inFlight -= 1;
      return verifyCredentials(...args);
    }) as typeof verifyCredentials,
    /** Lets every check that has started go on. */
    release() {
      for (const go of waiting.splice(0)) go();
    },
  };
  return check;
}

describe("throttling holds under concurrency", () => {
  it("200 concurrent wrong sign-ins for one name: only 10 reach the password check, the rest get 429 with Retry-After", async () => {
    const rt = await start();
    await createTestUser(rt.runtime, "alice", ["reviewer"]);
    const answers = await Promise.all(
      Array.from({ length: 200 }, (_, i) =>
        request("POST", "/api/session", { body: { name: "alice", password: `guess-${i}` } }),
      ),
    );
    // Each attempt that reached the check was answered 401; a refused one never got there.
    const checked = answers.filter((r) => r.status === 401);
    const refused = answers.filter((r) => r.status === 429);
    expect(checked).toHaveLength(PER_NAME.max);
    expect(refused).toHaveLength(200 - PER_NAME.max);
    for (const r of refused.slice(0, 3)) {
      await expectError(r, 429, "too_many_attempts");
      const retry = Number(r.headers.get("retry-after"));
      expect(Number.isInteger(retry)).toBe(true);
      expect(retry).toBeGreaterThan(0);
      expect(retry).toBeLessThanOrEqual(PER_NAME.windowMs / 1000);
    }
  });

  it("no more than the limit of password checks is ever in flight or done for one name", async () => {
    const rt = await start();
    const alice = await createTestUser(rt.runtime, "alice", ["reviewer"]);
    const throttle = new LoginThrottle(rt.runtime.db);
    const check = gatedCheck();
    const params = (password: string) => ({
      name: "Alice",
      password,
      secure: false,
      address: "198.51.100.7",
    });
    const tries = Array.from({ length: 200 }, (_, i) =>
      signIn(rt.runtime.db, throttle, params(`guess-${i}`), check.verify).then(
        () => "signed in",
        (err: unknown) => (err instanceof GatehouseError ? err.code : String(err)),
      ),
    );
    // Every attempt was admitted or refused before its check; the admitted ones reach the check
    // after reading the stored hash, and are all still checking.
    // Admission asks the store: 200 of them may take a few seconds on a busy machine.
    await vi.waitFor(() => expect(check.inFlight).toBe(PER_NAME.max), { timeout: 20_000 });
    expect(check.calls).toBe(PER_NAME.max);
    expect(check.inFlight).toBe(PER_NAME.max);
    check.release();
    const outcomes = await Promise.all(tries);
    expect(outcomes.filter((o) => o === "invalid_credentials")).toHaveLength(PER_NAME.max);
    expect(outcomes.filter((o) => o === "too_many_attempts")).toHaveLength(200 - PER_NAME.max);
    expect(check.maxInFlight).toBe(PER_NAME.max);
    // Even the right password waits out the window now, without reaching the check.
    await expect(signIn(rt.runtime.db, throttle, params(alice.password), check.verify)).rejects.toMatchObject(
      {
        code: "too_many_attempts",
      },
    );
    expect(check.calls).toBe(PER_NAME.max);
  });

  it("a right password forgives the name's failures but not the address's", async () => {
    const throttle = new LoginThrottle(await openTestDb(), { perAddress: { max: 10 } });
    const address = "198.51.100.7";
    for (let i = 0; i < 9; i++) await tryOnce(throttle, { name: "alice", address }, 0);
    await tryOnce(throttle, { name: "alice", address }, 0, "succeeded");
    expect(await throttle.size()).toEqual({ names: 0, addresses: 1 });
    // The name starts afresh: ten more tries are admitted before it locks.
    for (let i = 0; i < 10; i++) await tryOnce(throttle, { name: "alice" }, 1);
    expect((await refusal(throttle.begin({ name: "alice", address: null }, 2))).code).toBe(
      "too_many_attempts",
    );
    // The address keeps its nine failures (the right password's own attempt is handed back).
    await tryOnce(throttle, { name: "bob", address }, 3);
    expect((await refusal(throttle.begin({ name: "carol", address }, 4))).code).toBe("too_many_attempts");
  });

  it("a check that throws counts as a failure, and does not hold the name past its window", async () => {
    const rt = await start();
    const throttle = new LoginThrottle(rt.runtime.db, { perName: { max: 1 } });
    const broken = (() => Promise.reject(new Error("store gone"))) as typeof verifyCredentials;
    const params = { name: "alice", password: "x", secure: false, address: null };
    await expect(signIn(rt.runtime.db, throttle, params, broken)).rejects.toThrow("store gone");
    await expect(signIn(rt.runtime.db, throttle, params, broken)).rejects.toMatchObject({
      code: "too_many_attempts",
    });
    // Settled, not left checking forever: once the window has passed, the name is tried again.
    await tryOnce(throttle, { name: "alice" }, Date.now() + PER_NAME.windowMs, "succeeded");
  });
});

describe("a bounded table never unlocks a name, nor locks everyone out", () => {
  it("a locked name stays locked after more other names fail than the table holds", async () => {
    const throttle = new LoginThrottle(await openTestDb(), { perName: { maxKeys: 20 } });
    for (let i = 0; i < PER_NAME.max; i++) await tryOnce(throttle, { name: "victim" }, 0);
    for (let i = 0; i < 40; i++) await tryOnce(throttle, { name: `other-${i}` }, 1);
    expect((await throttle.size()).names).toBeLessThanOrEqual(20);
    const refused = await refusal(throttle.begin({ name: "victim", address: null }, 2));
    expect(refused.retryAfterSeconds).toBe(PER_NAME.windowMs / 1000);
  });

  it("a full table forgets the unlocked name whose window opened first", async () => {
    const throttle = new LoginThrottle(await openTestDb(), { perName: { maxKeys: 3 } });
    await tryOnce(throttle, { name: "a" }, 0);
    await tryOnce(throttle, { name: "b" }, 1);
    await tryOnce(throttle, { name: "c" }, 2);
    await tryOnce(throttle, { name: "d" }, 3); // a's window opened first: a is forgotten
    expect((await throttle.size()).names).toBe(3);
    // b was kept: nine more failures make its ten.
    for (let i = 0; i < 9; i++) await tryOnce(throttle, { name: "b" }, 4);
    expect((await refusal(throttle.begin({ name: "b", address: null }, 5))).code).toBe("too_many_attempts");
    // a was forgotten: it has a whole fresh allowance (c, unlocked, makes room for it now).
    for (let i = 0; i < PER_NAME.max; i++) await tryOnce(throttle, { name: "a" }, 6);
    expect((await throttle.size()).names).toBe(3);
  });

  it("when every tracked name is locked, a new name is still counted and nothing locked is forgotten", async () => {
    const windowMs = 60_000;
    const throttle = new LoginThrottle(await openTestDb(), { perName: { maxKeys: 3, windowMs } });
    for (const name of ["a", "b", "c"]) {
      for (let i = 0; i < PER_NAME.max; i++) await tryOnce(throttle, { name }, 0);
    }
    // Refusing the newcomer would lock out everyone not tracked yet; it is counted beyond the bound.
    for (let i = 0; i < PER_NAME.max; i++) await tryOnce(throttle, { name: "newcomer" }, 1000);
    expect((await refusal(throttle.begin({ name: "newcomer", address: null }, 1000))).code).toBe(
      "too_many_attempts",
    );
    for (const name of ["a", "b", "c"]) {
      const refused = await refusal(throttle.begin({ name, address: null }, 1000));
      expect(refused.retryAfterSeconds).toBe(59);
    }
    expect((await throttle.size()).names).toBe(4);
  });

  it("expired windows are swept from the table instead of growing without bound", async () => {
    const limits = { perName: { windowMs: 1000 }, perAddress: { max: 1000 } };
    const throttle = new LoginThrottle(await openTestDb(), limits);
    for (let i = 0; i < 100; i++) await tryOnce(throttle, { name: `user-${i}`, address: "192.0.2.1" }, 0);
    expect(await throttle.size()).toEqual({ names: 100, addresses: 1 });
    // Past both windows (the address's is 15 minutes): every row has ended, and goes.
    await tryOnce(throttle, { name: "late" }, PER_ADDRESS.windowMs + 1);
    expect(await throttle.size()).toEqual({ names: 1, addresses: 0 });
  });
});

describe("a per-address bucket beside the per-name one", () => {
  it("one address spraying many names is throttled by address; other addresses and the names are not", async () => {
    const throttle = new LoginThrottle(await openTestDb());
    const sprayer = "203.0.113.9";
    for (let i = 0; i < PER_ADDRESS.max; i++)
      await tryOnce(throttle, { name: `name-${i}`, address: sprayer }, 0);
    const refused = await refusal(throttle.begin({ name: "name-fresh", address: sprayer }, 0));
    expect(refused.retryAfterSeconds).toBe(PER_ADDRESS.windowMs / 1000);
    // The refused attempt was counted nowhere: the name is untouched, and others reach it.
    expect((await throttle.size()).names).toBe(PER_ADDRESS.max);
    await tryOnce(throttle, { name: "name-fresh", address: "198.51.100.1" }, 0, "succeeded");
    await tryOnce(throttle, { name: "name-0", address: "198.51.100.1" }, 0, "succeeded");
  });

  it("a name that refuses hands the address's attempt back", async () => {
    const throttle = new LoginThrottle(await openTestDb(), { perAddress: { max: 11 } });
    for (let i = 0; i < PER_NAME.max; i++)
      await tryOnce(throttle, { name: "victim", address: "192.0.2.7" }, 0);
    for (let i = 0; i < 5; i++) await refusal(throttle.begin({ name: "victim", address: "192.0.2.7" }, 0));
    // Ten counted on the address, not fifteen: it still has its eleventh.
    await tryOnce(throttle, { name: "someone", address: "192.0.2.7" }, 0);
    expect((await refusal(throttle.begin({ name: "else", address: "192.0.2.7" }, 0))).code).toBe(
      "too_many_attempts",
    );
  });

  it("IPv6 addresses of one /64 share a bucket; IPv4-mapped addresses count as IPv4", async () => {
    expect(addressBucket("2001:db8:1:2:aaaa::1")).toBe("2001:db8:1:2::/64");
    expect(addressBucket("2001:db8:1:2:bbbb:cccc:dddd:eeee")).toBe("2001:db8:1:2::/64");
    expect(addressBucket("2001:0db8::1")).toBe("2001:db8:0:0::/64");
    expect(addressBucket("::1")).toBe("0:0:0:0::/64");
    expect(addressBucket("fe80::1%eth0")).toBe("fe80:0:0:0::/64");
    expect(addressBucket("::ffff:192.0.2.4")).toBe("192.0.2.4");
    expect(addressBucket("192.0.2.4")).toBe("192.0.2.4");

    const throttle = new LoginThrottle(await openTestDb());
    for (let i = 0; i < PER_ADDRESS.max; i++) {
      await tryOnce(throttle, { name: `name-${i}`, address: `2001:db8:1:2::${i.toString(16)}` }, 0);
    }
    expect(
      (await refusal(throttle.begin({ name: "another", address: "2001:db8:1:2:ffff::1" }, 0))).code,
    ).toBe("too_many_attempts");
    await tryOnce(throttle, { name: "another", address: "2001:db8:1:3::1" }, 0, "succeeded");
  });

  it("an address that finds no room is not counted by address, but its name still is", async () => {
    const throttle = new LoginThrottle(await openTestDb(), { perAddress: { max: 1, maxKeys: 2 } });
    await tryOnce(throttle, { name: "a", address: "192.0.2.1" }, 0);
    await tryOnce(throttle, { name: "b", address: "192.0.2.2" }, 0);
    // Both tracked addresses are locked and kept; a third one still signs in by name.
    for (let i = 0; i < PER_NAME.max; i++) await tryOnce(throttle, { name: "c", address: "192.0.2.3" }, 0);
    expect((await throttle.size()).addresses).toBe(2);
    expect((await refusal(throttle.begin({ name: "c", address: "192.0.2.4" }, 0))).code).toBe(
      "too_many_attempts",
    );
    expect((await refusal(throttle.begin({ name: "d", address: "192.0.2.1" }, 0))).code).toBe(
      "too_many_attempts",
    );
  });

  it("without an edge that stamps it, a client's own address header is not believed", async () => {
    const rt = await start();
    const headers = new Headers({ [CLIENT_ADDRESS_HEADER]: "203.0.113.9" });
    expect(clientAddress(headers)).toBeNull();
    // Sign-in then throttles by name only.
    const res = await request("POST", "/api/session", {
      body: { name: "nobody", password: "x" },
      headers: { [CLIENT_ADDRESS_HEADER]: "203.0.113.9" },
    });
    await expectError(res, 401, "invalid_credentials");
    expect(await rt.runtime.throttle.size()).toEqual({ names: 1, addresses: 0 });
  });
});
