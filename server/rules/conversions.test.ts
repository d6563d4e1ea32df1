import { afterEach, describe, expect, it } from "vitest";
import type { RuleConfig } from "../config/types";
import { RuleSet } from "./index";
import { callOf, rule } from "./rule-fixtures";

/**
 * `int`, `uint` and `double` of a string, strictly (server/config/rule-when.ts, WHEN_ENV_SOURCE):
 * a string that is not a number is an error, so a rule that converts an argument fails closed
 * instead of comparing NaN (false whatever the comparison) or reading "" as 0.
 */

const sets: RuleSet[] = [];
afterEach(async () => {
  for (const set of sets.splice(0)) await set.close();
});

function ruleSet(rules: RuleConfig[]): RuleSet {
  const set = new RuleSet(rules);
  sets.push(set);
  return set;
}

/** Amounts an agent might send that are not numbers CEL can read. */
const NOT_NUMBERS = [
  "1,500.00",
  "5000 EUR",
  "",
  "abc",
  "0x10",
  " 1200 ",
  "NaN",
  "Infinity",
  "1e400",
  "1_500",
];
const LARGE = "double(args.amount) > 1000.0";

describe("strict string conversions", () => {
  it("a deny rule on double(args.amount) > 1000.0 denies amounts that are not numbers (failing closed)", async () => {
    const set = ruleSet([
      rule({ name: "large-payments", tools: ["pay_*"], when: LARGE, decision: "deny" }),
      rule({ name: "rest", tools: ["pay_*"], decision: "allow" }),
    ]);
    for (const amount of NOT_NUMBERS) {
      const verdict = await set.decide(callOf("pay_send", { amount }));
      expect(verdict.match?.rule.name, amount).toBe("large-payments");
      expect(verdict.match?.when, amount).toEqual({
        kind: "error",
        message: "a value could not be converted",
      });
      expect(verdict.match?.explanation, amount).toContain("failing closed");
    }
  });

  it("an allow rule on double(args.amount) does not allow amounts that are not numbers", async () => {
    const set = ruleSet([
      rule({
        name: "small-payments",
        tools: ["pay_*"],
        when: "double(args.amount) <= 1000.0",
        decision: "allow",
      }),
    ]);
    for (const amount of NOT_NUMBERS) {
      const verdict = await set.decide(callOf("pay_send", { amount }));
      expect(verdict.match, amount).toBeNull();
      expect(verdict.skipped, amount).toEqual([
        {
          rule: "small-payments",
          why: "its condition could not be evaluated (a value could not be converted), so this allow rule does not apply",
        },
      ]);
    }
  });

  it("double() still reads decimals with a sign, a fraction and an exponent", async () => {
    const set = ruleSet([rule({ name: "large", when: LARGE, decision: "deny" })]);
    const decided = async (amount: string) => (await set.decide(callOf("pay_send", { amount }))).match?.when;
    for (const amount of ["1500.00", "1500", "+1500", "1.5e3", "2E+3", ".5e4", "1001."]) {
      expect(await decided(amount), amount).toEqual({ kind: "true" });
    }
    for (const amount of ["999.99", "-1500", "1e3", "0", "-0.0"]) {
      expect(await decided(amount), amount).toBeUndefined();
    }
  });

  it("int() of a string takes an optional sign and decimal digits within 64 bits, nothing else", async () => {
    const set = ruleSet([rule({ name: "many", when: "int(args.n) > 10", decision: "deny" })]);
    const when = async (n: string) => (await set.decide(callOf("t", { n }))).match?.when;
    expect(await when("12")).toEqual({ kind: "true" });
    expect(await when("+12")).toEqual({ kind: "true" });
    expect(await when("-12")).toBeUndefined();
    expect(await when("9223372036854775807")).toEqual({ kind: "true" });
    for (const n of ["", "0x10", " 12", "12 ", "1.5", "1e3", "12abc", "9223372036854775808", "-"]) {
      expect(await when(n), n).toEqual({ kind: "error", message: "a value could not be converted" });
    }
  });

  it("uint() of a string takes decimal digits within 64 bits, without a sign", async () => {
    const set = ruleSet([rule({ name: "many", when: "uint(args.n) > 10u", decision: "deny" })]);
    const when = async (n: string) => (await set.decide(callOf("t", { n }))).match?.when;
    expect(await when("12")).toEqual({ kind: "true" });
    expect(await when("18446744073709551615")).toEqual({ kind: "true" });
    for (const n of ["", "+12", "-0", "0x10", "1.5", "18446744073709551616"]) {
      expect(await when(n), n).toEqual({ kind: "error", message: "a value could not be converted" });
    }
  });

  it("matches() also works receiver-less, as cel-spec defines it", async () => {
    const set = ruleSet([
      rule({ name: "no-drop", when: "matches(args.sql, r'(?i)\\bdrop\\b')", decision: "deny" }),
    ]);
    expect((await set.decide(callOf("db_exec", { sql: "DROP TABLE t" }))).match?.when).toEqual({
      kind: "true",
    });
    expect((await set.decide(callOf("db_exec", { sql: "airdrops" }))).match).toBeNull();
  });
});
