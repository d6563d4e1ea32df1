/**
 * How scripts/conformance.mjs judges the conformance suite's results against
 * conformance/expected-failures.txt: pure functions, so that test/conformance-judge.test.ts can
 * check the rules without running the suite.
 *
 * A scenario's outcome is one of:
 * - `passed`: it checked something (a check reported SUCCESS) and nothing failed;
 * - `expected`: it failed, or checked nothing, and an exclusion says why;
 * - `unexpected`: it failed, checked nothing or reported no result, and no exclusion names it.
 *   Scenarios the requirement set runs without scoring them count like scored ones: a not-scored
 *   scenario that passes today must not regress unseen;
 * - `stale`: an exclusion is no longer true (the scenario or check passes now, or is not run).
 */

/** Statuses that mean the suite checked something; SKIPPED and INFO check nothing. */
const CHECKED = new Set(["SUCCESS", "FAILURE", "WARNING"]);

/**
 * Parses the text of an exclusion list, `<revision>[,<revision>] <scenario>[:<check-id>]: <reason>`
 * lines; `#` starts a comment. Returns, by revision (each of `revisions`, empty ones included),
 * scenario → `{ reason, checks }`: `reason` excuses the whole scenario (null if only checks are
 * excused), `checks` (check id → reason) only those checks. Throws, naming `file`, on a line of
 * another form, an unknown revision, or a scenario or check listed twice.
 */
export function parseExpected(text, revisions, file) {
  const out = new Map(revisions.map((r) => [r, new Map()]));
  for (const raw of text.split("\n")) {
    const line = raw.replace(/#.*$/, "").trim();
    if (!line) continue;
    const m = /^(\S+)\s+([a-z0-9][a-z0-9-]*)(?::([A-Za-z0-9_.-]+))?:\s+(\S.*)$/.exec(line);
    if (!m) throw new Error(`${file}: "${line}" is not "<revision> <scenario>[:<check-id>]: <reason>"`);
    const [, listed = "", scenario = "", check, reason = ""] = m;
    for (const revision of listed.split(",")) {
      const map = out.get(revision);
      if (!map) throw new Error(`${file}: "${revision}" is not one of ${revisions.join(", ")}`);
      const entry = map.get(scenario) ?? { reason: null, checks: new Map() };
      const twice = check
        ? entry.reason !== null || entry.checks.has(check)
        : entry.reason !== null || entry.checks.size > 0;
      if (twice)
        throw new Error(
          `${file}: ${revision} ${scenario}${check ? `:${check}` : ""} is listed twice (or wholly and by check)`,
        );
      if (check) entry.checks.set(check, reason);
      else entry.reason = reason;
      map.set(scenario, entry);
    }
  }
  return out;
}

/**
 * One scenario's row. `checks` is the suite's checks.json for it (undefined: no result);
 * `exclusion` as {@link parseExpected} gives it, or undefined; `notScored` the suite's reason for
 * running it without scoring it, or null. A check fails when it is a FAILURE or a WARNING (a
 * SHOULD the suite saw broken). A scenario whose checks are all SKIPPED or INFO (or that has
 * none) checked nothing: it is `expected` only under a whole-scenario exclusion, else
 * `unexpected`, scored or not.
 */
export function judge(scenario, checks, exclusion, notScored) {
  const failing = (checks ?? []).filter((c) => c.status === "FAILURE" || c.status === "WARNING");
  const nothingChecked = checks !== undefined && !checks.some((c) => CHECKED.has(c.status));
  const shown = (list) => list.map((c) => `${c.id}: ${c.errorMessage ?? c.status}`);
  /** What fails the scenario as a whole, beside its failing checks. */
  const whole =
    checks === undefined
      ? ["no result (did the suite run it?)"]
      : nothingChecked
        ? [
            `nothing was checked: the suite reported ${checks.length === 0 ? "no checks" : "only INFO or SKIPPED"}`,
            ...shown(checks.filter((c) => c.status === "SKIPPED")),
          ]
        : [];
  const row = (outcome, reason, lines) => ({
    scenario,
    outcome,
    scored: !notScored,
    ...(notScored ? { notScored } : {}),
    reason,
    checks: checks?.length ?? 0,
    failing: lines,
    ...(nothingChecked ? { note: "nothing was checked" } : {}),
  });
  if (exclusion?.reason) {
    if (whole.length > 0 || failing.length > 0)
      return row("expected", exclusion.reason, [...whole, ...shown(failing)]);
    return row("stale", exclusion.reason, ["excluded, but it checks something and passes now"]);
  }
  const excused = exclusion?.checks ?? new Map();
  const failingIds = new Set(failing.map((c) => c.id));
  const unexcused = failing.filter((c) => !excused.has(c.id));
  const staleLines = [...excused.keys()]
    .filter((id) => !failingIds.has(id))
    .map((id) => `${id}: excluded, but passes now (or is not reported)`);
  if (whole.length > 0 || unexcused.length > 0)
    return row("unexpected", null, [...whole, ...shown(unexcused), ...staleLines]);
  if (staleLines.length > 0) return row("stale", null, staleLines);
  if (excused.size > 0) {
    const reasons = [...excused].map(([id, why]) => `${id}: ${why}`);
    return row("expected", reasons.join("; "), shown(failing));
  }
  return row("passed", null, []);
}

/**
 * Every row of one run of a requirement set: a row per scenario the set names (`requirements`:
 * `{ server, notScored }`, the scored scenarios and, by name, the suite's reason for each one it
 * runs without scoring) or that reported (`results`: scenario → checks); a `stale` row per
 * exclusion (`exclusions`, scenario → exclusion, for this revision) of a scenario neither names;
 * and an `unexpected` "(suite)" row when the suite reported a number of scenarios other than
 * `planned` (NaN when its output did not say). `revision` and `suiteLog` only word the rows.
 */
export function judgeRun({ revision, requirements, results, exclusions, planned, suiteLog }) {
  const names = [...new Set([...requirements.server, ...requirements.notScored.keys(), ...results.keys()])];
  const rows = names.map((scenario) =>
    judge(
      scenario,
      results.get(scenario),
      exclusions.get(scenario),
      requirements.notScored.get(scenario) ?? null,
    ),
  );
  for (const [name, exclusion] of exclusions) {
    if (names.includes(name)) continue;
    rows.push({
      scenario: name,
      outcome: "stale",
      scored: false,
      reason: exclusion.reason ?? [...exclusion.checks.values()].join("; "),
      checks: 0,
      failing: [`${revision} does not run it`],
    });
  }
  if (planned !== results.size) {
    rows.push({
      scenario: "(suite)",
      outcome: "unexpected",
      scored: true,
      reason: null,
      checks: 0,
      failing: [`the suite planned ${planned} scenarios and reported ${results.size}; see ${suiteLog}`],
    });
  }
  return rows;
}

/**
 * Counts of `rows` by outcome: `passed`, `expectedFailures`, `unexpectedFailures`, `stale`, for
 * all of them, and the same for the scored and the not-scored ones apart.
 */
export function tally(rows) {
  const count = (list) => ({
    passed: list.filter((r) => r.outcome === "passed").length,
    expectedFailures: list.filter((r) => r.outcome === "expected").length,
    unexpectedFailures: list.filter((r) => r.outcome === "unexpected").length,
    stale: list.filter((r) => r.outcome === "stale").length,
  });
  return {
    ...count(rows),
    scored: count(rows.filter((r) => r.scored)),
    notScored: count(rows.filter((r) => !r.scored)),
  };
}
