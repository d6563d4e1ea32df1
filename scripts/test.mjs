#!/usr/bin/env node
/**
 * `npm test`: the whole suite, as CI runs it. Installs Debian's Chromium when it is missing
 * (as root with apt-get; Playwright cannot download its own browser here), then runs
 * typecheck + lint, the unit and integration tests (Vitest), a production build and the
 * Playwright end-to-end tests, then the MCP conformance suite against /mcp
 * (scripts/conformance.mjs) and the benchmark at its smoke size, and prints one closing line:
 * "Tests: N passed, N failed".
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, rmSync } from "node:fs";
import path from "node:path";

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), "..");
const out = path.join(root, "test-results", "summary");
rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });
const chromium = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";

function run(label, cmd, args, env = {}) {
  console.log(`\n=== ${label}: ${cmd} ${args.join(" ")}`);
  const r = spawnSync(cmd, args, { stdio: "inherit", cwd: root, env: { ...process.env, ...env } });
  return r.status === 0;
}

if (!existsSync(chromium)) {
  const isRoot = typeof process.getuid === "function" && process.getuid() === 0;
  if (!isRoot || !existsSync("/usr/bin/apt-get")) {
    console.error(
      `Chromium not found at ${chromium}. Install Debian's chromium package, or set CHROMIUM_PATH.`,
    );
    process.exit(1);
  }
  if (
    !run("install chromium", "apt-get", ["update", "-qq"]) ||
    !run("install chromium", "apt-get", ["install", "-y", "-qq", "chromium"])
  ) {
    process.exit(1);
  }
}

const npx = "npx";
if (!run("check", "npm", ["run", "check"])) {
  console.log("\nTests: 0 passed, 1 failed (npm run check failed)");
  process.exit(1);
}
const vitestJson = path.join(out, "vitest.json");
const unitOk = run("unit + integration", npx, [
  "vitest",
  "run",
  "--reporter=default",
  "--reporter=json",
  `--outputFile.json=${vitestJson}`,
]);
const buildOk = run("build", "npm", ["run", "build"]);
const e2eJson = path.join(out, "playwright.json");
const e2eOk =
  buildOk &&
  run("end-to-end", npx, ["playwright", "test", "--reporter=list,json"], {
    PLAYWRIGHT_JSON_OUTPUT_NAME: e2eJson,
  });

let passed = 0;
let failed = 0;
let skipped = 0;
/** Names of the tests that failed, printed again just above the closing line so that the tail
 * of a long CI log says which ones they were. */
const failures = [];
try {
  const v = JSON.parse(readFileSync(vitestJson, "utf8"));
  passed += v.numPassedTests;
  failed += v.numFailedTests;
  skipped += v.numPendingTests + (v.numTodoTests ?? 0);
  for (const file of v.testResults ?? []) {
    const where = path.relative(root, file.name ?? "");
    const bad = (file.assertionResults ?? []).filter((t) => t.status === "failed");
    for (const t of bad) failures.push(`vitest ${where} › ${t.fullName ?? t.title}`);
    if (bad.length === 0 && file.status === "failed") failures.push(`vitest ${where} (file failed)`);
  }
} catch {
  failed += 1;
  failures.push("vitest: no results");
}
/** Every spec in a Playwright JSON report, depth first, with the titles leading to it. */
function* specsOf(suite, titles = []) {
  const here = suite.title ? [...titles, suite.title] : titles;
  for (const spec of suite.specs ?? []) yield { spec, titles: here };
  for (const child of suite.suites ?? []) yield* specsOf(child, here);
}
try {
  const p = JSON.parse(readFileSync(e2eJson, "utf8"));
  passed += p.stats.expected + p.stats.flaky;
  failed += p.stats.unexpected;
  skipped += p.stats.skipped;
  for (const top of p.suites ?? []) {
    for (const { spec, titles } of specsOf(top)) {
      const unexpected = (spec.tests ?? []).some((t) => t.status === "unexpected");
      if (unexpected) failures.push(`e2e ${[...titles, spec.title].join(" › ")}`);
    }
  }
} catch {
  failed += 1;
  failures.push("e2e: no results");
}
if (!buildOk) failed += 1;
// The protocol's own conformance suite against /mcp, each revision against each upstream (the
// revision Gatehouse speaks to the fixture servers): every scenario of every table counts, scored
// by the suite or not; one excluded by conformance/expected-failures.txt as skipped, an
// unexpected outcome or a stale exclusion as failed.
const conformanceOk = buildOk && run("conformance", "node", ["scripts/conformance.mjs"]);
try {
  const dist = process.env.NEXT_DIST_DIR;
  const dir = `conformance${dist ? `-${dist.replace(/[^A-Za-z0-9_-]/g, "_")}` : ""}`;
  const c = JSON.parse(readFileSync(path.join(root, "test-results", dir, "summary.json"), "utf8"));
  passed += c.passed;
  failed += c.unexpectedFailures + c.stale;
  skipped += c.expectedFailures;
  // A run narrowed to one revision or upstream (or another Gatehouse) is not the whole.
  if (c.partial !== false) {
    failed += 1;
    failures.push("conformance: its summary is of a partial run");
  }
} catch {
  failed += 1;
  failures.push("conformance: no summary");
}
// The benchmark at its smoke size: CI checks that it runs, never its figures (docs/PERFORMANCE.md).
const benchOk = buildOk && run("benchmark (smoke)", "npm", ["run", "bench", "--", "--smoke"]);
if (!benchOk) failed += 1;
const ok = unitOk && buildOk && e2eOk && conformanceOk && benchOk && failed === 0;
if (!buildOk) failures.push("build");
if (buildOk && !conformanceOk) failures.push("conformance (its lines above say which scenario)");
if (!benchOk) failures.push("benchmark (smoke)");
if (failures.length > 0) {
  console.log("\nFailed:");
  for (const f of failures) console.log(`  ${f}`);
}
console.log(`\nTests: ${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ""}`);
process.exit(ok ? 0 : 1);
