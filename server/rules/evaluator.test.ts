import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { RuleConfig } from "../config/types";
import { type EvaluatorOptions, RuleSet, WHEN_DEADLINE_MS } from "./index";
import { callOf, rule } from "./rule-fixtures";

/**
 * Hostile conditions (PRODUCT.md §11, "over its cost limit"): CEL has no cost limit of its own,
 * so conditions run in worker threads with a deadline and a heap limit. Order of events is
 * asserted, never durations.
 */

const sets: RuleSet[] = [];
afterEach(async () => {
  for (const set of sets.splice(0)) await set.close();
});

function ruleSet(rules: RuleConfig[], opts?: EvaluatorOptions): RuleSet {
  const set = new RuleSet(rules, opts);
  sets.push(set);
  return set;
}

/** Thousands of items: the nested comprehension below would take days. */
const items = Array.from({ length: 3000 }, (_, i) => `item-${i}`);
const CUBIC = "args.items.all(x, args.items.all(y, args.items.all(z, x + y + z != 'zzz')))";
/** Builds millions of strings: fills any heap long before it finishes. */
const HUGE = "args.items.map(x, args.items.map(y, x + y)).size() > 0";

const rules = [
  rule({ name: "hostile", tools: ["slow_*"], when: CUBIC, decision: "deny" }),
  rule({ name: "greedy", tools: ["big_*"], when: HUGE, decision: "review" }),
  rule({ name: "plain", tools: ["fast_*"], when: "args.n > 1", decision: "allow" }),
];
const slow = callOf("slow_scan", { items });
const big = callOf("big_build", { items });
const fast = callOf("fast_read", { n: 2 });

describe("conditions with a bound", () => {
  it("a hostile comprehension comes back as an error naming the bound, and fails closed", async () => {
    const set = ruleSet(rules);
    const verdict = await set.decide(slow);
    expect(verdict.match?.rule.name).toBe("hostile");
    expect(verdict.match?.when).toEqual({
      kind: "error",
      message: `it ran longer than ${WHEN_DEADLINE_MS} ms`,
    });
    expect(verdict.match?.explanation).toContain("failing closed");
  });

  it("while a hostile condition runs, other decisions and the main thread keep answering", async () => {
    // A generous bound, so that the order below cannot depend on how busy the machine is.
    const set = ruleSet(rules, { deadlineMs: 1000 });
    // Two at once start both workers, so the plain decision below does not wait for a start.
    await Promise.all([set.decide(fast), set.decide(fast)]);

    const order: string[] = [];
    const hostile = set.decide(slow).then((v) => {
      order.push("hostile");
      return v;
    });
    const immediate = new Promise<void>((resolve) =>
      setImmediate(() => {
        order.push("immediate");
        resolve();
      }),
    );
    const timer = new Promise<void>((resolve) =>
      setTimeout(() => {
        order.push("timer");
        resolve();
      }, 1),
    );
    const plain = set.decide(fast).then((v) => {
      order.push("plain");
      return v;
    });
    const [hostileVerdict, , , plainVerdict] = await Promise.all([hostile, immediate, timer, plain]);
    expect(order.at(-1)).toBe("hostile");
    expect(order).toHaveLength(4);
    expect(plainVerdict.match?.rule.name).toBe("plain");
    expect(hostileVerdict.match?.when).toEqual({ kind: "error", message: "it ran longer than 1000 ms" });
  });

  it("after an overrun the next evaluation works, on a fresh worker", async () => {
    const set = ruleSet(rules, { workers: 1 });
    expect((await set.decide(slow)).match?.when.kind).toBe("error");
    const next = await set.decide(fast);
    expect(next.match?.rule.name).toBe("plain");
    expect(next.match?.when).toEqual({ kind: "true" });
  });

  it("evaluations queued behind a hostile one are neither lost nor charged for its time", async () => {
    const set = ruleSet(rules, { workers: 1 });
    const hostile = set.decide(slow);
    const queued = [set.decide(fast), set.decide(fast), set.decide(fast)];
    expect((await hostile).match?.when.kind).toBe("error");
    for (const verdict of await Promise.all(queued)) {
      expect(verdict.match?.rule.name).toBe("plain");
      expect(verdict.match?.when).toEqual({ kind: "true" });
    }
  });

  it("a condition that fills its heap kills only its worker: an error, then the next one works", async () => {
    // A long bound, so that the heap limit is what stops it.
    const set = ruleSet(rules, { deadlineMs: 60_000, workers: 1 });
    const verdict = await set.decide(big);
    expect(verdict.match?.rule.name).toBe("greedy");
    expect(verdict.match?.when).toEqual({
      kind: "error",
      message: "it ran out of memory (the evaluator's heap is limited to 64 MB)",
    });
    expect((await set.decide(fast)).match?.when).toEqual({ kind: "true" });
  }, 30_000);

  it("close fails the evaluation in flight instead of leaving it hanging", async () => {
    const set = ruleSet(rules, { deadlineMs: 60_000 });
    const hostile = set.decide(slow);
    // Wait until the worker has started and taken the job: a plain decision on the other worker answers.
    await Promise.all([set.decide(fast), set.decide(fast)]);
    await set.close();
    expect((await hostile).match?.when).toEqual({ kind: "error", message: "the rule evaluator is closed" });
  });
});

describe("waiting for the evaluator", () => {
  const guard = [rule({ name: "guard", tools: ["q_*"], when: "args.n > 1", decision: "deny" })];
  /** A call by `agent`; decided synchronously up to the evaluator's queue, before any worker is up. */
  const call = (agent: string) => callOf("q_run", { n: 2 }, agent);

  it("an evaluation beyond the queue's bound fails closed at once, and those already waiting are answered", async () => {
    const set = ruleSet(guard);
    // 10 requesters × 100: the whole queue, each within its own share.
    const waiting = Array.from({ length: 1000 }, (_, i) => set.decide(call(`bot-${i % 10}`)));
    const over = await set.decide(call("late-bot"));
    expect(over.match?.rule.name).toBe("guard");
    expect(over.match?.when).toEqual({ kind: "error", message: "the rule evaluator is busy" });
    expect(over.match?.explanation).toContain("failing closed");
    for (const verdict of await Promise.all(waiting)) expect(verdict.match?.when).toEqual({ kind: "true" });
  });

  for (const flooder of ["flood-bot", ""]) {
    it(`one requester flooding past its share (${flooder || "people"}) does not make another's evaluation fail`, async () => {
      const set = ruleSet(guard);
      const flood = Array.from({ length: 1000 }, () => set.decide(call(flooder)));
      const other = set.decide(call("other-bot"));
      expect((await other).match?.when).toEqual({ kind: "true" });
      const outcomes = (await Promise.all(flood)).map((v) => v.match?.when);
      const answered = outcomes.filter((w) => w?.kind === "true").length;
      // The flooder's first ones wait and are answered; the rest are refused at once, in order.
      expect(answered).toBeGreaterThan(0);
      expect(answered).toBeLessThan(1000);
      expect(outcomes.slice(answered)).toEqual(
        Array(1000 - answered).fill({ kind: "error", message: "the rule evaluator is busy" }),
      );
    });
  }

  it("a worker that cannot start fails its evaluation closed, every time, without hanging", async () => {
    // No node_modules to load CEL from: the worker's start throws.
    const dir = mkdtempSync(path.join(os.tmpdir(), "gatehouse-no-cel-"));
    try {
      const set = ruleSet(
        [
          rule({ name: "a", when: "true", decision: "allow" }),
          rule({ name: "d", when: "true", decision: "deny" }),
        ],
        { moduleBase: path.join(dir, "package.json") },
      );
      // Two at once start both workers; then one more after both failed.
      const verdicts = [...(await Promise.all([set.decide(fast), set.decide(fast)])), await set.decide(fast)];
      for (const verdict of verdicts) {
        expect(verdict.skipped).toEqual([
          {
            rule: "a",
            why: "its condition could not be evaluated (the rule evaluator could not start), so this allow rule does not apply",
          },
        ]);
        expect(verdict.match?.rule.name).toBe("d");
        expect(verdict.match?.when).toEqual({ kind: "error", message: "the rule evaluator could not start" });
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
