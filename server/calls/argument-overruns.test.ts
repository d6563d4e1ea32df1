/**
 * One slow argument must not make a tool unusable for everyone until a restart: overruns of the
 * argument check's deadline count against the requester who sent them, and expire.
 */
import { describe, expect, it } from "vitest";
import { GatehouseError } from "@/lib/errors";
import { OVERRUN_LIMITS, OverrunLedger } from "./argument-overruns";
import { CHECK_DEADLINE_MS, checkArguments } from "./arguments";

const hostile = {
  type: "object",
  properties: { name: { type: "string", pattern: "^(a|a)*$" } },
  required: ["name"],
};
const evilInput = { name: `${"a".repeat(40)}!` };
const notes = { type: "object", properties: { text: { type: "string" } }, required: ["text"] };
const agent = (name: string) => ({ kind: "agent", name });
const MINUTE = 60 * 1000;

function refusal(fn: () => void): GatehouseError {
  try {
    fn();
  } catch (err) {
    if (err instanceof GatehouseError) return err;
    throw err;
  }
  throw new Error("expected a refusal");
}

/** Makes `who` overrun the deadline `OVERRUN_LIMITS.max` times at `now`. */
function overrunFully(who: { kind: string; name: string }, now: number): void {
  for (let i = 0; i < OVERRUN_LIMITS.max; i++) {
    const err = refusal(() => checkArguments("pattern-1", hostile, evilInput, who, { now }));
    expect(err.message).toContain(`took over ${CHECK_DEADLINE_MS} ms`);
  }
}

describe("argument-check overruns are counted per requester", () => {
  it("an agent whose checks keep overrunning is refused for a while; other agents still call the tool", () => {
    const a = agent("slow-a");
    const now = Date.parse("2026-12-01T10:00:00Z");
    overrunFully(a, now);

    const refused = refusal(() =>
      checkArguments("pattern-1", hostile, { name: "a" }, a, { now: now + MINUTE }),
    );
    expect(refused.code).toBe("too_many_attempts");
    expect(refused.message).toBe(
      `checks of this requester's arguments took over ${CHECK_DEADLINE_MS} ms 3 times in 10 minutes: calls whose arguments need a full check are refused for 9 more minutes`,
    );
    // Agent B, and a person, call the same tool as before.
    expect(() => checkArguments("pattern-1", hostile, { name: "a" }, agent("slow-b"), { now })).not.toThrow();
    expect(() =>
      checkArguments("pattern-1", hostile, { name: "a" }, { kind: "user", name: "slow-a" }),
    ).not.toThrow();
    // Checks that cannot be slow (small arguments, a schema fit for the main thread) still run for A.
    expect(() => checkArguments("notes-2", notes, { text: "x" }, agent("slow-b"))).not.toThrow();
    expect(() => checkArguments("notes-2", notes, { text: "x" }, a, { now })).not.toThrow();
    expect(refusal(() => checkArguments("notes-2", notes, { text: 1 }, a, { now })).code).toBe(
      "invalid_arguments",
    );
  });

  it("an agent's overruns expire: it is accepted again once they are older than the window", () => {
    const a = agent("slow-c");
    const now = Date.parse("2026-12-01T10:00:00Z");
    overrunFully(a, now);
    const later = now + OVERRUN_LIMITS.windowMs - 1;
    expect(refusal(() => checkArguments("pattern-1", hostile, { name: "a" }, a, { now: later })).code).toBe(
      "too_many_attempts",
    );
    const after = now + OVERRUN_LIMITS.windowMs;
    expect(() => checkArguments("pattern-1", hostile, { name: "a" }, a, { now: after })).not.toThrow();
  });
});

describe("the overrun ledger", () => {
  const limits = { max: 3, windowMs: 10 * MINUTE, maxKeys: 3 };

  it("refuses a key from its max-th overrun in the window until the oldest of them expires", () => {
    const ledger = new OverrunLedger(limits);
    ledger.record("a", 0);
    ledger.record("a", 2 * MINUTE);
    expect(ledger.refusedFor("a", 2 * MINUTE)).toBe(0);
    ledger.record("a", 5 * MINUTE);
    expect(ledger.refusedFor("a", 5 * MINUTE)).toBe(5 * MINUTE);
    expect(ledger.refusedFor("b", 5 * MINUTE)).toBe(0);
    // The first expires at 10 minutes: two left, accepted again.
    expect(ledger.refusedFor("a", 10 * MINUTE - 1)).toBe(1);
    expect(ledger.refusedFor("a", 10 * MINUTE)).toBe(0);
    // A fourth overrun inside the window of the other two refuses again, until the second expires.
    ledger.record("a", 11 * MINUTE);
    expect(ledger.refusedFor("a", 11 * MINUTE)).toBe(MINUTE);
  });

  it("overruns spread wider than the window never refuse", () => {
    const ledger = new OverrunLedger(limits);
    for (let i = 0; i < 10; i++) {
      ledger.record("a", i * 6 * MINUTE);
      expect(ledger.refusedFor("a", i * 6 * MINUTE)).toBe(0);
    }
  });

  it("stays within its keys, forgetting expired requesters first and refused ones last", () => {
    const ledger = new OverrunLedger(limits);
    ledger.record("old", 0);
    ledger.record("older", 0);
    for (let i = 0; i < 3; i++) ledger.record("refused", 9 * MINUTE);
    // At 11 minutes "old" and "older" have expired: the newcomers take their room.
    ledger.record("new", 11 * MINUTE);
    ledger.record("newer", 11 * MINUTE);
    expect(ledger.refusedFor("refused", 11 * MINUTE)).toBe(8 * MINUTE);
    // Full of live requesters: one that is not refused makes room, never the refused one.
    ledger.record("newest", 11 * MINUTE);
    expect(ledger.refusedFor("refused", 11 * MINUTE)).toBe(8 * MINUTE);
    for (let i = 0; i < 2; i++) ledger.record("newest", 11 * MINUTE);
    expect(ledger.refusedFor("newest", 11 * MINUTE)).toBe(10 * MINUTE);
  });
});
