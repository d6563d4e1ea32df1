import { afterEach, describe, expect, it } from "vitest";
import type { RuleConfig } from "../config/types";
import { RuleSet } from "./index";
import { callOf, rule } from "./rule-fixtures";

/** Which rule decides a call (PRODUCT.md §11): first match, tools, agents, `when`, failing closed. */

const sets: RuleSet[] = [];
afterEach(async () => {
  for (const set of sets.splice(0)) await set.close();
});

function ruleSet(rules: RuleConfig[]): RuleSet {
  const set = new RuleSet(rules);
  sets.push(set);
  return set;
}

describe("which rule decides", () => {
  it("the first rule whose tools, agents and when match wins, later ones are not consulted", async () => {
    const set = ruleSet([
      rule({ name: "other-tools", tools: ["files_*"], decision: "deny" }),
      rule({ name: "no-drop", tools: ["db_*"], when: "args.sql.contains('DROP')", decision: "deny" }),
      rule({ name: "db-reads", tools: ["db_*"], decision: "allow" }),
      rule({ name: "db-review", tools: ["db_*"], decision: "review" }),
    ]);
    const drop = await set.decide(callOf("db_query", { sql: "DROP TABLE x" }));
    expect(drop.match?.rule.name).toBe("no-drop");
    expect(drop.match?.index).toBe(1);
    expect(drop.match?.when).toEqual({ kind: "true" });
    expect(drop.match?.explanation).toBe('rule "no-drop" matched');
    expect(drop.skipped).toEqual([]);

    const select = await set.decide(callOf("db_query", { sql: "SELECT 1" }));
    expect(select.match?.rule.name).toBe("db-reads");
    expect(select.match?.index).toBe(2);
  });

  it("no rule matching leaves the call to the default", async () => {
    const set = ruleSet([rule({ name: "db", tools: ["db_*"], decision: "deny" })]);
    expect(await set.decide(callOf("files_read"))).toEqual({ match: null, skipped: [] });
  });

  it("agents limits a rule to those token names, and never matches a person", async () => {
    const set = ruleSet([
      rule({ name: "billing", tools: ["pay_*"], agents: ["billing-bot"], decision: "review", approvals: 2 }),
      rule({ name: "everyone", tools: ["pay_*"], decision: "deny" }),
    ]);
    const billing = await set.decide(callOf("pay_send", {}, "billing-bot"));
    expect(billing.match?.rule.name).toBe("billing");
    expect(billing.match?.rule.approvals).toBe(2);
    expect((await set.decide(callOf("pay_send", {}, "other-bot"))).match?.rule.name).toBe("everyone");
    expect((await set.decide(callOf("pay_send", {}, ""))).match?.rule.name).toBe("everyone");
  });

  it("a rule without agents applies to people too", async () => {
    const set = ruleSet([rule({ name: "all", tools: ["x"], decision: "deny" })]);
    expect((await set.decide(callOf("x", {}, ""))).match?.rule.name).toBe("all");
  });

  it("when sees args, tool and agent, whole numbers as ints, and the strings extension", async () => {
    const set = ruleSet([
      rule({
        name: "all-vars",
        when: "tool == 'db_query' && agent == 'bot' && args.n + 1 == 6 && args.n > 4 && args.ratio < 1.0 && args.tags.exists(t, t.lowerAscii() == 'prod') && args.opts.deep.flag && args.path.indexOf('/srv') == 0",
      }),
    ]);
    const verdict = await set.decide(
      callOf("db_query", {
        n: 5,
        ratio: 0.5,
        tags: ["PROD"],
        opts: { deep: { flag: true } },
        path: "/srv/x",
      }),
    );
    expect(verdict.match?.rule.name).toBe("all-vars");
    expect(verdict.match?.when).toEqual({ kind: "true" });
  });

  it("matches() uses RE2 syntax, as in the product's example", async () => {
    const set = ruleSet([
      rule({
        name: "no-drop",
        tools: ["db_*"],
        when: "args.sql.matches('(?i)\\\\bdrop\\\\b')",
        decision: "deny",
      }),
    ]);
    expect((await set.decide(callOf("db_exec", { sql: "drop table t" }))).match?.rule.name).toBe("no-drop");
    expect((await set.decide(callOf("db_exec", { sql: "airdrops" }))).match).toBeNull();
  });
});

describe("failing closed", () => {
  it("an allow rule whose when errors is skipped, and the next rule decides", async () => {
    const set = ruleSet([
      rule({ name: "notes-reads", when: "args.path.startsWith('/srv/notes/')", decision: "allow" }),
      rule({ name: "fallback", decision: "review" }),
    ]);
    const verdict = await set.decide(callOf("files_read", { file: "/etc/passwd" }));
    expect(verdict.match?.rule.name).toBe("fallback");
    expect(verdict.skipped).toEqual([
      {
        rule: "notes-reads",
        why: 'its condition could not be evaluated (a key it reads is missing: "path"), so this allow rule does not apply',
      },
    ]);
  });

  it("an allow rule whose when errors, with nothing after it, leaves the call to the default", async () => {
    const set = ruleSet([rule({ name: "reads", when: "args.path.startsWith('/srv/')" })]);
    const verdict = await set.decide(callOf("files_read", { path: 42 }));
    expect(verdict.match).toBeNull();
    expect(verdict.skipped.map((s) => s.rule)).toEqual(["reads"]);
    expect(verdict.skipped[0]?.why).toBe(
      "its condition could not be evaluated (a value has the wrong type), so this allow rule does not apply",
    );
  });

  for (const decision of ["deny", "review"] as const) {
    it(`a ${decision} rule whose when errors matches, and says so`, async () => {
      const set = ruleSet([
        rule({ name: "no-drop", when: "args.sql.contains('DROP')", decision }),
        rule({ name: "after", decision: "allow" }),
      ]);
      const verdict = await set.decide(callOf("db_query", { query: "DROP" }));
      expect(verdict.match?.rule.name).toBe("no-drop");
      expect(verdict.match?.when).toEqual({ kind: "error", message: 'a key it reads is missing: "sql"' });
      expect(verdict.match?.explanation).toBe(
        'rule "no-drop": its condition could not be evaluated (a key it reads is missing: "sql"), so it applies (failing closed)',
      );
    });
  }

  it("a when that gives something other than a bool is an error, not a match", async () => {
    const set = ruleSet([
      rule({ name: "allow-string", when: "args.mode", decision: "allow" }),
      rule({ name: "deny-int", when: "args.n", decision: "deny" }),
    ]);
    const verdict = await set.decide(callOf("t", { mode: "yes", n: 1 }));
    expect(verdict.skipped).toEqual([
      {
        rule: "allow-string",
        why: "its condition could not be evaluated (it did not give true or false, but a string), so this allow rule does not apply",
      },
    ]);
    expect(verdict.match?.rule.name).toBe("deny-int");
    expect(verdict.match?.when).toEqual({
      kind: "error",
      message: "it did not give true or false, but an int",
    });
  });

  it("after close, a when is an error: allow rules do not apply, deny rules do", async () => {
    const set = ruleSet([
      rule({ name: "a", when: "true", decision: "allow" }),
      rule({ name: "d", when: "true", decision: "deny" }),
    ]);
    await set.close();
    const verdict = await set.decide(callOf("t"));
    expect(verdict.skipped.map((s) => s.rule)).toEqual(["a"]);
    expect(verdict.match?.rule.name).toBe("d");
    expect(verdict.match?.when.kind).toBe("error");
  });

  it("rules whose tools or agents do not match never evaluate their when", async () => {
    // Closed: any condition that reached the evaluator would come back as an error.
    const set = ruleSet([
      rule({ name: "other-tool", tools: ["db_*"], when: "true", decision: "deny" }),
      rule({ name: "other-agent", agents: ["someone"], when: "true", decision: "deny" }),
      rule({ name: "plain", decision: "allow" }),
    ]);
    await set.close();
    const verdict = await set.decide(callOf("files_read"));
    expect(verdict).toEqual({ match: expect.objectContaining({ index: 2 }), skipped: [] });
    expect(verdict.match?.when).toEqual({ kind: "true" });
  });
});
