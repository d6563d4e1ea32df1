import { afterEach, describe, expect, it } from "vitest";
import { RuleSet } from "./index";
import { callOf, rule } from "./rule-fixtures";

/**
 * What a failed condition says goes to audit rows and to reviewers, so it names a category
 * ("a key it reads is missing", ...) and never an argument value, whatever CEL's own message quoted.
 */

const sets: RuleSet[] = [];
afterEach(async () => {
  for (const set of sets.splice(0)) await set.close();
});

const SECRET = "SECRET-abc-7f3e9";
/** A number that is a secret too (an account number, say), as it would be quoted in "index … out of bounds". */
const SECRET_NUMBER = 40_417_733;

const args = {
  token: SECRET,
  pattern: `${SECRET}(`,
  account: SECRET_NUMBER,
  items: ["a"],
  nested: { deep: {} },
};

/** Each condition fails on `args`, and CEL's own message for it quotes a value. */
const cases: { when: string; message: string }[] = [
  { when: "int(args.token) > 1", message: "a value could not be converted" },
  { when: "double(args.token) > 1.0", message: "a value could not be converted" },
  { when: "args[args.token] == 1", message: "a key it reads is missing" },
  { when: "args.items[args.account] == 'a'", message: "a key it reads is missing" },
  { when: "args.token.matches(args.pattern)", message: "a regular expression it uses does not compile" },
  { when: "{args.token: 1, args.token: 2}.size() > 0", message: "it could not be evaluated" },
  { when: "timestamp(args.token) > timestamp(0)", message: "a value could not be converted" },
  { when: "args.token + 1 > 2", message: "a value has the wrong type" },
  { when: "args.account * args.account * args.account > 0", message: "a number went out of range" },
  { when: "args.token", message: "it did not give true or false, but a string" },
  { when: "args.nested.deep.missing == 1", message: 'a key it reads is missing: "missing"' },
  { when: "args['absent'] == 1", message: 'a key it reads is missing: "absent"' },
];

describe("explanations of a condition that could not be evaluated", () => {
  it("never quote an argument value, for deny rules and for allow rules passed over", async () => {
    const rules = cases.flatMap(({ when }, i) => [
      rule({ name: `allow-${i}`, tools: [`t${i}`], when, decision: "allow" }),
      rule({ name: `deny-${i}`, tools: [`t${i}`], when, decision: "deny" }),
    ]);
    const set = new RuleSet(rules);
    sets.push(set);
    for (const [i, { when, message }] of cases.entries()) {
      const verdict = await set.decide(callOf(`t${i}`, args));
      const said = [
        verdict.match?.explanation ?? "",
        verdict.match?.when.kind === "error" ? verdict.match.when.message : "",
        ...verdict.skipped.map((s) => s.why),
      ].join("\n");
      expect(verdict.match?.rule.name, when).toBe(`deny-${i}`);
      expect(verdict.match?.when, when).toEqual({ kind: "error", message });
      expect(
        verdict.skipped.map((s) => s.rule),
        when,
      ).toEqual([`allow-${i}`]);
      expect(said, when).not.toContain("SECRET");
      expect(said, when).not.toContain(String(SECRET_NUMBER));
    }
  });

  it("name a missing key only when the condition spells it, not when an argument does", async () => {
    const set = new RuleSet([
      rule({ name: "d", when: "args[args.token] == 1 && args.sql == 'x'", decision: "deny" }),
    ]);
    sets.push(set);
    // The key CEL misses is the token's value: it is not in the condition, so it is not named.
    const verdict = await set.decide(callOf("t", { token: "sql-but-not-quite", sql: "x" }));
    expect(verdict.match?.when).toEqual({ kind: "error", message: "a key it reads is missing" });
  });
});
