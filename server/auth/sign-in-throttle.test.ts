/**
 * Sign-in throttling under pressure: concurrent guesses for one name, a map full of names, and
 * one client spraying many names. Addresses as the edge reports them over HTTP are in
 * sign-in-address.test.ts; this file never starts an edge, as under `next dev`.
 */
import { describe, expect, it, vi } from "vitest";
import { GatehouseError } from "@/lib/errors";
import { createTestUser, request } from "@/test/support/runtime";
import { CLIENT_ADDRESS_HEADER, clientAddress } from "../request";
import { addressBucket, LoginThrottle, PER_ADDRESS, PER_NAME, TooManyAttempts } from "./access";
import { expectError, runtimePerTest } from "./auth-fixtures";
import { signIn } from "./signin";
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

function refusal(fn: () => unknown): TooManyAttempts {
  try {
    fn();
  } catch (err) {
    if (err instanceof TooManyAttempts) return err;
    throw err;
  }
  throw new Error("expected too_many_attempts");
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
    const throttle = new LoginThrottle();
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
    // Every attempt was admitted or refused at once (before the store was read); the admitted
    // ones reach the check after reading the stored hash, and are all still checking.
    await vi.waitFor(() => expect(check.inFlight).toBe(PER_NAME.max));
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

  it("a right password forgives the name's failures but not the address's", () => {
    const throttle = new LoginThrottle();
    const address = "198.51.100.7";
    for (let i = 0; i < 9; i++) throttle.begin({ name: "alice", address }, 0).failed(0);
    throttle.begin({ name: "alice", address }, 0).succeeded();
    expect(throttle.size).toEqual({ names: 0, addresses: 1 });
    // The name starts afresh: ten more tries are admitted before it locks.
    for (let i = 0; i < 10; i++) throttle.begin({ name: "alice", address: null }, 1).failed(1);
    expect(refusal(() => throttle.begin({ name: "alice", address: null }, 2)).code).toBe("too_many_attempts");
  });

  it("a check that throws counts as a failure, and does not hold the name past its window", async () => {
    const rt = await start();
    const throttle = new LoginThrottle({ perName: { max: 1 } });
    const broken = (() => Promise.reject(new Error("store gone"))) as typeof verifyCredentials;
    const params = { name: "alice", password: "x", secure: false, address: null };
    await expect(signIn(rt.runtime.db, throttle, params, broken)).rejects.toThrow("store gone");
    await expect(signIn(rt.runtime.db, throttle, params, broken)).rejects.toMatchObject({
      code: "too_many_attempts",
    });
    // Settled, not left checking forever: once the window has passed, the name is tried again.
    throttle.begin({ name: "alice", address: null }, Date.now() + PER_NAME.windowMs).succeeded();
  });
});

describe("bounded memory never unlocks a name", () => {
  it("a locked name stays locked after 10,000 other names fail", () => {
    const throttle = new LoginThrottle();
    for (let i = 0; i < PER_NAME.max; i++) throttle.begin({ name: "victim", address: null }, 0).failed(0);
    for (let i = 0; i < PER_NAME.maxKeys + 500; i++) {
      throttle.begin({ name: `other-${i}`, address: null }, 1).failed(1);
    }
    expect(throttle.size.names).toBeLessThanOrEqual(PER_NAME.maxKeys);
    const refused = refusal(() => throttle.begin({ name: "victim", address: null }, 2));
    expect(refused.retryAfterSeconds).toBe(PER_NAME.windowMs / 1000);
  });

  it("the least recently failed unlocked name is forgotten first", () => {
    const throttle = new LoginThrottle({ perName: { maxKeys: 3 } });
    const fail = (name: string, now: number) => throttle.begin({ name, address: null }, now).failed(now);
    fail("a", 0);
    fail("b", 1);
    fail("c", 2);
    fail("a", 3); // now b is the least recently failed
    fail("d", 4);
    expect(throttle.size.names).toBe(3);
    // a was kept: eight more failures make its ten.
    for (let i = 0; i < 8; i++) fail("a", 5);
    expect(refusal(() => throttle.begin({ name: "a", address: null }, 6)).code).toBe("too_many_attempts");
    // b was forgotten: it has a whole fresh allowance (c, unlocked, makes room for it now).
    for (let i = 0; i < PER_NAME.max; i++) fail("b", 7);
    expect(throttle.size.names).toBe(3);
  });

  it("when every tracked name is locked, a new name is refused until a window ends", () => {
    const windowMs = 60_000;
    const throttle = new LoginThrottle({ perName: { maxKeys: 3, windowMs } });
    for (const name of ["a", "b", "c"]) {
      for (let i = 0; i < PER_NAME.max; i++) throttle.begin({ name, address: null }, 0).failed(0);
    }
    const refused = refusal(() => throttle.begin({ name: "newcomer", address: null }, 1000));
    expect(refused.retryAfterSeconds).toBe(59);
    // Nothing was forgotten to make room.
    for (const name of ["a", "b", "c"]) {
      expect(refusal(() => throttle.begin({ name, address: null }, 1000)).code).toBe("too_many_attempts");
    }
    // Once the windows end, there is room again.
    throttle.begin({ name: "newcomer", address: null }, windowMs).succeeded();
  });

  it("names being checked are not forgotten to make room either", () => {
    const throttle = new LoginThrottle({ perName: { maxKeys: 2 } });
    const pending = [
      throttle.begin({ name: "a", address: null }, 0),
      throttle.begin({ name: "b", address: null }, 0),
    ];
    expect(refusal(() => throttle.begin({ name: "c", address: null }, 0)).code).toBe("too_many_attempts");
    for (const p of pending) p.failed(1);
    throttle.begin({ name: "c", address: null }, 2).failed(2);
    expect(throttle.size.names).toBe(2);
  });
});

describe("a per-address bucket beside the per-name one", () => {
  it("one address spraying many names is throttled by address; other addresses and the names are not", () => {
    const throttle = new LoginThrottle();
    const sprayer = "203.0.113.9";
    for (let i = 0; i < PER_ADDRESS.max; i++)
      throttle.begin({ name: `name-${i}`, address: sprayer }, 0).failed(0);
    const refused = refusal(() => throttle.begin({ name: "name-fresh", address: sprayer }, 0));
    expect(refused.retryAfterSeconds).toBe(PER_ADDRESS.windowMs / 1000);
    // The refused attempt was counted nowhere: the name is untouched, and others reach it.
    expect(throttle.size.names).toBe(PER_ADDRESS.max);
    throttle.begin({ name: "name-fresh", address: "198.51.100.1" }, 0).succeeded();
    throttle.begin({ name: "name-0", address: "198.51.100.1" }, 0).succeeded();
  });

  it("IPv6 addresses of one /64 share a bucket; IPv4-mapped addresses count as IPv4", () => {
    expect(addressBucket("2001:db8:1:2:aaaa::1")).toBe("2001:db8:1:2::/64");
    expect(addressBucket("2001:db8:1:2:bbbb:cccc:dddd:eeee")).toBe("2001:db8:1:2::/64");
    expect(addressBucket("2001:0db8::1")).toBe("2001:db8:0:0::/64");
    expect(addressBucket("::1")).toBe("0:0:0:0::/64");
    expect(addressBucket("fe80::1%eth0")).toBe("fe80:0:0:0::/64");
    expect(addressBucket("::ffff:192.0.2.4")).toBe("192.0.2.4");
    expect(addressBucket("192.0.2.4")).toBe("192.0.2.4");

    const throttle = new LoginThrottle();
    for (let i = 0; i < PER_ADDRESS.max; i++) {
      throttle.begin({ name: `name-${i}`, address: `2001:db8:1:2::${i.toString(16)}` }, 0).failed(0);
    }
    expect(refusal(() => throttle.begin({ name: "another", address: "2001:db8:1:2:ffff::1" }, 0)).code).toBe(
      "too_many_attempts",
    );
    throttle.begin({ name: "another", address: "2001:db8:1:3::1" }, 0).succeeded();
  });

  it("an address that finds no room is not counted by address, but its name still is", () => {
    const throttle = new LoginThrottle({ perAddress: { max: 1, maxKeys: 2 } });
    throttle.begin({ name: "a", address: "192.0.2.1" }, 0).failed(0);
    throttle.begin({ name: "b", address: "192.0.2.2" }, 0).failed(0);
    // Both tracked addresses are locked and kept; a third one still signs in by name.
    for (let i = 0; i < PER_NAME.max; i++) throttle.begin({ name: "c", address: "192.0.2.3" }, 0).failed(0);
    expect(throttle.size.addresses).toBe(2);
    expect(refusal(() => throttle.begin({ name: "c", address: "192.0.2.4" }, 0)).code).toBe(
      "too_many_attempts",
    );
    expect(refusal(() => throttle.begin({ name: "d", address: "192.0.2.1" }, 0)).code).toBe(
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
    expect(rt.runtime.throttle.size).toEqual({ names: 1, addresses: 0 });
  });
});
