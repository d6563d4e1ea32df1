import { existsSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runCli } from "@/test/support/cli";
import {
  ADD_NOTE,
  createAgentToken,
  enableTool,
  LIST_NOTES,
  startTestRuntime,
  type TestRuntime,
} from "@/test/support/runtime";

const rules = [
  {
    name: "no-drop",
    tools: ["demo_*"],
    when: "args.text.matches('(?i)drop')",
    decision: "deny",
    reason: "no DROP",
  },
  {
    name: "todo",
    tools: [ADD_NOTE],
    agents: ["build-bot"],
    when: "args.text.startsWith('todo:')",
    decision: "allow",
  },
  { name: "odd", tools: [ADD_NOTE], when: "args.level > 2", decision: "allow" },
];

const toolSets = { readers: { tools: ["demo_list_*"] } };

let rt: TestRuntime;
let env: Record<string, string>;

/** Rows in the store's call and audit tables, read beside the CLI. */
function storeCounts(): { calls: number; audit: number } {
  const db = new Database(rt.dbFile, { readonly: true });
  try {
    const count = (table: string) =>
      (db.prepare(`SELECT count(*) AS n FROM ${table}`).get() as { n: number }).n;
    return { calls: count("calls"), audit: count("audit_events") };
  } finally {
    db.close();
  }
}

function rulesTest(...args: string[]) {
  return rulesTestWith({}, ...args);
}

/** `npm run gatehouse -- rules test …` as a user runs it: a child process on the store the server left. */
function rulesTestWith(extra: Record<string, string>, ...args: string[]) {
  return runCli(["rules", "test", ...args], { ...env, ...extra });
}

beforeAll(async () => {
  // A server ran once on this store and discovered the demo tools; the CLI reads what it left.
  rt = await startTestRuntime({ config: { rules, toolSets } });
  await enableTool(rt.runtime, ADD_NOTE);
  await enableTool(rt.runtime, LIST_NOTES);
  await createAgentToken(rt.runtime, "reader-bot", { toolSet: "readers" });
  await rt.stop({ keepDir: true });
  const configFile = path.join(rt.dir, "gatehouse.json");
  writeFileSync(
    configFile,
    JSON.stringify({ mcpServers: { demo: { command: "node", args: ["demo/server.mjs"] } }, rules, toolSets }),
  );
  // The file the server left (DATABASE_URL emptied: this is about the SQLite store).
  env = { GATEHOUSE_DB: rt.dbFile, GATEHOUSE_CONFIG: configFile, DATABASE_URL: "" };
}, 30_000);
afterAll(() => {
  if (rt) rmSync(rt.dir, { recursive: true, force: true });
});

describe("npm run gatehouse -- rules test", () => {
  it("names the allow rule that would run a call, calling nothing and writing nothing", async () => {
    const before = storeCounts();
    const res = await rulesTest(ADD_NOTE, '{"text": "todo: milk"}', "--agent", "build-bot");
    expect(res.code, res.stderr).toBe(0);
    expect(res.stdout).toContain('runs at once (by rule "todo")');
    expect(storeCounts()).toEqual(before);
    // The demo server is not running: had anything been called, it would not have answered.
    expect(before.calls).toBe(0);
  });

  it("says the agent's tool set, and that a tool outside it stops before any rule", async () => {
    const outside = await rulesTest(ADD_NOTE, '{"text": "todo: milk"}', "--agent", "reader-bot");
    expect(outside.code, outside.stderr).toBe(0);
    expect(outside.stdout).toContain('as agent reader-bot (tool set "readers")');
    expect(outside.stdout).toContain(
      `stops: tool_not_in_set: "${ADD_NOTE}" is not in tool set "readers" of this token`,
    );
    const inside = await rulesTest(LIST_NOTES, "{}", "--agent", "reader-bot");
    // In the set, the rules judge it (here "no-drop", whose condition reads a key this call lacks).
    expect(inside.stdout).not.toContain("tool_not_in_set");
    expect(inside.stdout).toContain('denied by rule "no-drop"');
  });

  it("a store that does not exist is said, not created", async () => {
    const missing = path.join(rt.dir, "nowhere", "typo.db");
    const res = await rulesTestWith({ GATEHOUSE_DB: missing }, ADD_NOTE, '{"text": "x"}');
    expect(res.code).toBe(1);
    expect(res.stderr).toContain("no Gatehouse store at");
    expect(existsSync(missing)).toBe(false);
  });

  it("names the deny rule and its reason", async () => {
    const res = await rulesTest(ADD_NOTE, '{"text": "DROP it"}', "--agent", "build-bot");
    expect(res.code, res.stderr).toBe(0);
    expect(res.stdout).toContain('stops: denied_by_rule: denied by rule "no-drop": no DROP');
  });

  it("without a matching rule says the default and lists allow rules passed over for an error", async () => {
    const res = await rulesTest(ADD_NOTE, '{"text": "plain"}');
    expect(res.code, res.stderr).toBe(0);
    expect(res.stdout).toContain("waits for a reviewer's approval: no readOnlyHint");
    expect(res.stdout).toMatch(/passed over: rule "odd"/);
    // "todo" names agents; a call without --agent is nobody's, so it does not apply.
    expect(res.stdout).toContain("no --agent");
  });

  it("refuses arguments that are not a JSON object", async () => {
    const res = await rulesTest(ADD_NOTE, "[1,2]");
    expect(res.code).toBe(1);
    expect(res.stderr).toContain("ARGS must be a JSON object");
  });
});

describe("npm run gatehouse -- rules test with a server's argument bound", () => {
  it("says a call over the server's maxArgumentBytes would stop, as the server would refuse it", async () => {
    const bounded = path.join(rt.dir, "bounded.json");
    writeFileSync(
      bounded,
      JSON.stringify({
        mcpServers: { demo: { command: "node", args: ["demo/server.mjs"], maxArgumentBytes: 1024 } },
        rules,
      }),
    );
    const args = JSON.stringify({ text: "todo: x".padEnd(1500, "x") });
    const res = await rulesTestWith({ GATEHOUSE_CONFIG: bounded }, ADD_NOTE, args, "--agent", "build-bot");
    expect(res.code, res.stderr).toBe(0);
    expect(res.stdout).toContain("the most a call to demo may send");
    // Without the bound the same call is allowed by the rule.
    const free = await rulesTest(ADD_NOTE, args, "--agent", "build-bot");
    expect(free.stdout).toContain('runs at once (by rule "todo")');
  });
});
