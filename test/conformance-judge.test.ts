import { describe, expect, it } from "vitest";
import type { Check, Exclusion } from "../scripts/conformance-judge.mjs";
import { judge, judgeRun, parseExpected, tally } from "../scripts/conformance-judge.mjs";

/**
 * The rules scripts/conformance.mjs judges the conformance suite by (scripts/conformance-judge.mjs):
 * a rule that lets a scenario through would otherwise regress without any run failing.
 */

const ok = (id: string): Check => ({ id, status: "SUCCESS" });
const bad = (id: string): Check => ({ id, status: "FAILURE", errorMessage: `${id} broke` });
const whole = (reason: string): Exclusion => ({ reason, checks: new Map() });
const byCheck = (entries: [string, string][]): Exclusion => ({ reason: null, checks: new Map(entries) });
const NOT_SCORED = "pending, on hold in the suite";

describe("a scenario that checked nothing", () => {
  it("fails when no exclusion names it, scored or not: no checks, only INFO, only SKIPPED", () => {
    for (const notScored of [null, NOT_SCORED]) {
      expect(judge("tools-list", [], undefined, notScored).outcome).toBe("unexpected");
      const info = judge(
        "server-sse-polling",
        [{ id: "outgoing-request", status: "INFO" }],
        undefined,
        notScored,
      );
      expect(info.outcome).toBe("unexpected");
      expect(info.failing[0]).toMatch(/nothing was checked/);
      const skipped = judge(
        "tasks-status-notifications",
        [{ id: "tasks-status-notifications", status: "SKIPPED", errorMessage: "Skipped: pending" }],
        undefined,
        notScored,
      );
      expect(skipped.outcome).toBe("unexpected");
      // The suite's own reason for skipping is shown.
      expect(skipped.failing).toContain("tasks-status-notifications: Skipped: pending");
    }
  });

  it("is expected, with the exclusion's reason, when an exclusion names the whole scenario", () => {
    const row = judge(
      "server-sse-polling",
      [{ id: "outgoing-request", status: "INFO" }],
      whole("answers as JSON"),
      NOT_SCORED,
    );
    expect(row).toMatchObject({ outcome: "expected", reason: "answers as JSON", scored: false });
    expect(row.note).toMatch(/nothing was checked/);
  });

  it("is not excused by an exclusion of one of its checks, which is stale besides", () => {
    const row = judge("tools-list", [], byCheck([["tools-list", "why"]]), null);
    expect(row.outcome).toBe("unexpected");
    expect(row.failing.join("\n")).toMatch(/tools-list: excluded, but passes now/);
  });

  it("makes its exclusion stale once it checks something and passes", () => {
    const row = judge(
      "server-sse-polling",
      [{ id: "outgoing-request", status: "INFO" }, ok("server-sse-priming-event")],
      whole("answers as JSON"),
      NOT_SCORED,
    );
    expect(row.outcome).toBe("stale");
  });

  it("passes once a check succeeded, even beside INFO and SKIPPED ones", () => {
    const checks: Check[] = [{ id: "a", status: "INFO" }, { id: "b", status: "SKIPPED" }, ok("c")];
    expect(judge("ping", checks, undefined, null).outcome).toBe("passed");
  });
});

describe("a scenario the requirement set does not score", () => {
  it("that fails without an exclusion fails the run like a scored one", () => {
    const row = judge("server-session-lifecycle", [ok("a"), bad("b")], undefined, NOT_SCORED);
    expect(row).toMatchObject({ outcome: "unexpected", scored: false, notScored: NOT_SCORED });
    expect(row.failing).toEqual(["b: b broke"]);
  });

  it("that fails under an exclusion is expected, and its exclusion goes stale once it passes", () => {
    expect(judge("tasks-lifecycle", [bad("a")], whole("no such tool"), NOT_SCORED).outcome).toBe("expected");
    expect(judge("tasks-lifecycle", [ok("a")], whole("no such tool"), NOT_SCORED).outcome).toBe("stale");
  });

  it("that passes is passed, and counted apart from the scored ones", () => {
    const rows = [
      judge("server-session-lifecycle", [ok("a")], undefined, NOT_SCORED),
      judge("ping", [ok("a")], undefined, null),
      judge("tools-call-sampling", [bad("a")], whole("never forwarded"), null),
      judge("json-schema-2020-12", [bad("a")], undefined, NOT_SCORED),
    ];
    expect(rows.map((r) => r.outcome)).toEqual(["passed", "passed", "expected", "unexpected"]);
    const counts = tally(rows);
    expect(counts).toMatchObject({ passed: 2, expectedFailures: 1, unexpectedFailures: 1, stale: 0 });
    expect(counts.scored).toEqual({ passed: 1, expectedFailures: 1, unexpectedFailures: 0, stale: 0 });
    expect(counts.notScored).toEqual({ passed: 1, expectedFailures: 0, unexpectedFailures: 1, stale: 0 });
  });
});

describe("failing scenarios and checks", () => {
  it("a scenario with a FAILURE or a WARNING and no exclusion is unexpected", () => {
    expect(judge("ping", [ok("a"), bad("b")], undefined, null).outcome).toBe("unexpected");
    expect(judge("ping", [ok("a"), { id: "b", status: "WARNING" }], undefined, null).outcome).toBe(
      "unexpected",
    );
  });

  it("a scenario without a result is unexpected", () => {
    const row = judge("ping", undefined, undefined, null);
    expect(row.outcome).toBe("unexpected");
    expect(row.failing).toEqual(["no result (did the suite run it?)"]);
  });

  it("an excluded check is expected, another failing check of the scenario still fails it", () => {
    const exclusion = byCheck([["b", "fixture tool missing"]]);
    expect(judge("server-stateless", [ok("a"), bad("b")], exclusion, null)).toMatchObject({
      outcome: "expected",
      reason: "b: fixture tool missing",
    });
    expect(judge("server-stateless", [bad("a"), bad("b")], exclusion, null).outcome).toBe("unexpected");
  });

  it("an excluded check that passes now is stale", () => {
    const row = judge("server-stateless", [ok("a"), ok("b")], byCheck([["b", "why"]]), null);
    expect(row.outcome).toBe("stale");
    expect(row.failing).toEqual(["b: excluded, but passes now (or is not reported)"]);
  });
});

describe("one run of a requirement set", () => {
  const requirements = {
    server: ["ping", "tools-list"],
    notScored: new Map([["server-sse-polling", NOT_SCORED]]),
  };
  const results = new Map<string, Check[]>([
    ["ping", [ok("ping")]],
    ["tools-list", [ok("tools-list")]],
    ["server-sse-polling", [{ id: "outgoing-request", status: "INFO" }]],
  ]);
  const run = (exclusions: Map<string, Exclusion>, planned = 3) =>
    judgeRun({ revision: "2025-11-25", requirements, results, exclusions, planned, suiteLog: "suite.txt" });

  it("judges every scenario the set names or that reported", () => {
    const rows = run(new Map([["server-sse-polling", whole("answers as JSON")]]));
    expect(rows.map((r) => [r.scenario, r.outcome])).toEqual([
      ["ping", "passed"],
      ["tools-list", "passed"],
      ["server-sse-polling", "expected"],
    ]);
  });

  it("an exclusion of a scenario the revision does not run is stale", () => {
    const rows = run(
      new Map([
        ["server-sse-polling", whole("answers as JSON")],
        ["gone", whole("old")],
      ]),
    );
    expect(rows.at(-1)).toMatchObject({
      scenario: "gone",
      outcome: "stale",
      failing: ["2025-11-25 does not run it"],
    });
  });

  it("the suite reporting fewer scenarios than it planned fails the run", () => {
    const rows = run(new Map([["server-sse-polling", whole("answers as JSON")]]), 4);
    expect(rows.at(-1)).toMatchObject({ scenario: "(suite)", outcome: "unexpected" });
    expect(tally(rows).unexpectedFailures).toBe(1);
  });
});

describe("the exclusion list", () => {
  const revisions = ["2025-11-25", "2026-07-28"];

  it("reads whole-scenario and per-check lines for one revision or several, without comments", () => {
    const parsed = parseExpected(
      [
        "# a comment",
        "2025-11-25,2026-07-28 completion-complete: not forwarded # and a trailing one",
        "2026-07-28 server-stateless:sep-2575-missing-capability-http-400: no such tool",
        "",
      ].join("\n"),
      revisions,
      "list.txt",
    );
    expect(parsed.get("2025-11-25")?.get("completion-complete")?.reason).toBe("not forwarded");
    expect(parsed.get("2026-07-28")?.get("completion-complete")?.reason).toBe("not forwarded");
    const stateless = parsed.get("2026-07-28")?.get("server-stateless");
    expect(stateless?.reason).toBeNull();
    expect([...(stateless?.checks ?? [])]).toEqual([
      ["sep-2575-missing-capability-http-400", "no such tool"],
    ]);
  });

  it("refuses a line of another form, an unknown revision, and a scenario listed twice", () => {
    expect(() => parseExpected("2025-11-25 ping", revisions, "list.txt")).toThrow(/is not "<revision>/);
    expect(() => parseExpected("2024-11-05 ping: why", revisions, "list.txt")).toThrow(/is not one of/);
    expect(() => parseExpected("2025-11-25 ping: a\n2025-11-25 ping:c: b", revisions, "list.txt")).toThrow(
      /listed twice/,
    );
  });
});
