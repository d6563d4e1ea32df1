import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import type { ConfigResult } from "./index";
import { check } from "./test-helpers";

/** The `rules` section (PRODUCT.md §11): every broken rule stops the start with its JSON path and a fix. */

function withRules(rules: unknown): ConfigResult {
  return check({ mcpServers: {}, rules });
}

const ok = { name: "no-drop", tools: ["db_*"], decision: "deny" };
const root = path.resolve(__dirname, "../..");

/** Runs a command in the repository root; resolves with its exit code and output. */
function run(
  command: string,
  args: string[],
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd: root, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (c: Buffer) => {
      stdout += c.toString();
    });
    child.stderr.on("data", (c: Buffer) => {
      stderr += c.toString();
    });
    child.once("error", reject);
    child.once("exit", (code) => resolve({ code, stdout, stderr }));
  });
}

function runNode(args: string[]) {
  return run(process.execPath, args);
}

/** The one error of `rules`, which must be at `path`; the config is null (the start stops). */
function onlyError(rules: unknown, path: string): string {
  const result = withRules(rules);
  expect(result.config).toBeNull();
  expect(result.errors.map((e) => e.path)).toEqual([path]);
  return result.errors[0]?.message ?? "";
}

describe("rules", () => {
  it("absent is no rules", () => {
    const result = check({ mcpServers: {} });
    expect(result.errors).toEqual([]);
    expect(result.config?.rules).toEqual([]);
  });

  it("a valid config with every key comes back with its defaults applied", () => {
    const result = withRules([
      {
        name: "notes-reads",
        tools: ["files_read_text_file", "files_list_directory"],
        when: "args.path.startsWith('/srv/notes/')",
        decision: "allow",
      },
      {
        name: "no-drop",
        tools: ["db_*"],
        when: "args.sql.matches('(?i)\\\\bdrop\\\\b')",
        decision: "deny",
        reason: "DROP never goes through Gatehouse",
      },
      {
        name: "payments",
        tools: ["pay_*", "bank_?x"],
        agents: ["billing-bot"],
        decision: "review",
        approvals: 2,
      },
    ]);
    expect(result.errors).toEqual([]);
    expect(result.warnings).toEqual([]);
    expect(result.config?.rules).toEqual([
      {
        name: "notes-reads",
        tools: ["files_read_text_file", "files_list_directory"],
        agents: null,
        when: "args.path.startsWith('/srv/notes/')",
        decision: "allow",
        reason: null,
        approvals: 1,
      },
      {
        name: "no-drop",
        tools: ["db_*"],
        agents: null,
        when: "args.sql.matches('(?i)\\\\bdrop\\\\b')",
        decision: "deny",
        reason: "DROP never goes through Gatehouse",
        approvals: 1,
      },
      {
        name: "payments",
        tools: ["pay_*", "bank_?x"],
        agents: ["billing-bot"],
        when: null,
        decision: "review",
        reason: null,
        approvals: 2,
      },
    ]);
  });

  it("rules that are not an array", () => {
    expect(onlyError({ "no-drop": ok }, "rules")).toMatch(/must be an array of rules like \[.*not an object/);
  });

  it("an entry that is not an object", () => {
    expect(onlyError([ok, "no-drop"], "rules[1]")).toMatch(/must be an object like .*not a string/);
  });

  it("an unknown key, with did-you-mean and hints", () => {
    expect(onlyError([{ ...ok, reasn: "x" }], "rules[0].reasn")).toBe(
      'unknown key "reasn"; did you mean "reason"?',
    );
    expect(onlyError([{ ...ok, condition: "true" }], "rules[0].condition")).toMatch(
      /unknown key "condition"; write the condition in "when"/,
    );
  });

  it("a missing name, a name that is not allowed, and a duplicate naming the first", () => {
    expect(onlyError([{ tools: ["x"], decision: "deny" }], "rules[0].name")).toMatch(/is required; add one/);
    expect(onlyError([{ ...ok, name: "No Drop" }], "rules[0].name")).toMatch(
      /rule name "No Drop" is not allowed; .*\^\[a-z0-9\]\[a-z0-9._-\]\{0,63\}\$.*e\.g\. "no-drop"/,
    );
    expect(onlyError([ok, { ...ok, name: "other" }, ok], "rules[2].name")).toBe(
      '"no-drop" is already the name of rules[0]; give each rule its own name (calls and hit counts name rules)',
    );
  });

  it("tools missing, empty, not a list, or with a character a glob cannot hold", () => {
    expect(onlyError([{ name: "a", decision: "deny" }], "rules[0].tools")).toMatch(/is required; list globs/);
    expect(onlyError([{ ...ok, tools: [] }], "rules[0].tools")).toMatch(
      /lists no tools, so the rule could never apply/,
    );
    expect(onlyError([{ ...ok, tools: "db_*" }], "rules[0].tools")).toMatch(
      /not a string; write it as a list: \["db_\*"\]/,
    );
    expect(onlyError([{ ...ok, tools: ["db_*", "db_[a]"] }], "rules[0].tools[1]")).toMatch(
      /^"db_\[a\]" contains "\[", which a glob cannot hold; .*"\*" \(any run of characters\) and "\?" \(exactly one\)/,
    );
    expect(onlyError([{ ...ok, tools: ["db query"] }], "rules[0].tools[0]")).toMatch(
      /contains " " \(a space\)/,
    );
    expect(onlyError([{ ...ok, tools: ["x", ""] }], "rules[0].tools[1]")).toMatch(/not an empty string/);
  });

  it("agents empty or not token names", () => {
    expect(onlyError([{ ...ok, agents: [] }], "rules[0].agents")).toMatch(
      /lists no agents.*remove "agents" to apply to any requester/,
    );
    expect(onlyError([{ ...ok, agents: ["bot", "-bad"] }], "rules[0].agents[1]")).toMatch(
      /"-bad" is not a token name; use 1-64 letters/,
    );
    expect(onlyError([{ ...ok, agents: ["bot", 7] }], "rules[0].agents[1]")).toMatch(
      /a number is not a token name/,
    );
  });

  it("agent.set is the agent's tool set; anything else selected from agent is refused with the fix", () => {
    const ok = withRules([
      { name: "sets", tools: ["demo_*"], when: "agent.set == 'billing'", decision: "deny" },
    ]);
    expect(ok.errors).toEqual([]);
    const message = onlyError(
      [{ name: "typo", tools: ["demo_*"], when: "agent.sett == 'billing'", decision: "deny" }],
      "rules[0].when",
    );
    expect(message).toMatch(/unknown name "agent.sett".*did you mean "agent.set"/);
  });

  it("a when with a CEL syntax error names the rule and the column", () => {
    const rules = [ok, { ...ok, name: "x" }, { ...ok, name: "no-drop-2", when: "args.sql = 'DROP'" }];
    expect(onlyError(rules, "rules[2].when")).toBe(
      'rule "no-drop-2": CEL syntax error at column 10: found = but expecting end of input',
    );
  });

  it("a when on several lines names the line and column", () => {
    expect(onlyError([{ ...ok, when: "args.a == 'x' &&\n  args.b ==== 1" }], "rules[0].when")).toMatch(
      /^rule "no-drop": CEL syntax error at line 2, column \d+: /,
    );
  });

  it("a when that uses an unknown variable or function", () => {
    expect(onlyError([{ ...ok, when: "argz.path == '/'" }], "rules[0].when")).toBe(
      'rule "no-drop": unknown name "argz" at column 1; did you mean "args"? A condition can use args (the call\'s arguments), tool, agent and agent.set',
    );
    expect(onlyError([{ ...ok, when: "args.path.startswith('/')" }], "rules[0].when")).toMatch(
      /^rule "no-drop": unknown function "startswith" at column \d+; did you mean "startsWith"\?/,
    );
  });

  it("a matches() pattern holding a backspace is an error with the fix", () => {
    // The file says "(?i)\\bdrop\\b": CEL reads the '\b' it gets as a backspace, so the deny rule
    // would silently never match a DROP.
    const when = JSON.parse(String.raw`"args.sql.matches('(?i)\\bdrop\\b')"`) as string;
    expect(onlyError([{ ...ok, when }], "rules[0].when")).toBe(
      String.raw`rule "no-drop": the pattern given to matches() holds a backspace character at column 18; in a CEL string \b is a backspace, not a word boundary; in gatehouse.json write \\\\b (CEL then reads \\b), or use a raw string: "args.sql.matches(r'(?i)\\bdrop\\b')"`,
    );
    const fixes = [
      String.raw`"args.sql.matches('(?i)\\\\bdrop\\\\b')"`,
      String.raw`"args.sql.matches(r'(?i)\\bdrop\\b')"`,
    ];
    for (const fixed of fixes) {
      expect(withRules([{ ...ok, when: JSON.parse(fixed) as string }]).errors).toEqual([]);
    }
  });

  it("a constant matches() pattern that does not compile is an error at its column", () => {
    // Otherwise the start passes and the condition is an error on every call.
    expect(onlyError([{ ...ok, name: "x", when: "args.sql.matches('(')" }], "rules[0].when")).toBe(
      "rule \"x\": the regular expression '(' does not compile: missing closing ): `(` at column 18",
    );
    expect(onlyError([{ ...ok, name: "x", when: "matches(args.sql, 'a{1001}')" }], "rules[0].when")).toBe(
      "rule \"x\": the regular expression 'a{1001}' does not compile: invalid repeat count: `{1001}` at column 19",
    );
    for (const when of [
      String.raw`args.sql.matches(r'^(?i)select\s')`,
      String.raw`matches(args.sql, r'\bdrop\b')`,
      // A pattern from the arguments is only known when a call comes (and an error then fails closed).
      "args.sql.matches(args.pattern)",
    ]) {
      expect(withRules([{ ...ok, when }]).errors, when).toEqual([]);
    }
  });

  it("a when over the length or nesting bounds, or one that is not a condition", () => {
    expect(onlyError([{ ...ok, when: `tool == '${"x".repeat(2000)}'` }], "rules[0].when")).toMatch(
      /the condition is 2010 characters long; at most 2000 are allowed/,
    );
    const deep = `${"(".repeat(33)}true${")".repeat(33)}`;
    expect(onlyError([{ ...ok, when: deep }], "rules[0].when")).toMatch(/nests brackets 33 deep; at most 32/);
    // Brackets inside string literals do not count.
    expect(withRules([{ ...ok, when: `tool == '${"(".repeat(40)}'` }]).errors).toEqual([]);
    expect(onlyError([{ ...ok, when: "'yes'" }], "rules[0].when")).toMatch(/is a constant, not a condition/);
    expect(onlyError([{ ...ok, when: "" }], "rules[0].when")).toMatch(/not an empty string; remove "when"/);
  });

  it("a when too deep for the parser's stack is an error, not a crash", async () => {
    // Chained operators nest without brackets; a small stack makes 990 of them too deep to parse.
    const script = `import("./server/config/rules.ts").then(async (m) => {
      const { Issues } = await import("./server/config/readers.ts");
      const issues = new Issues();
      m.readRules({ rules: [{ name: "deep", tools: ["x"], decision: "deny", when: "1" + "+1".repeat(990) + " == 2" }] }, issues);
      process.stdout.write(JSON.stringify(issues.errors));
    })`;
    const out = await runNode([
      "--stack-size=200",
      "--conditions=react-server",
      "--import",
      "tsx",
      "-e",
      script,
    ]);
    expect(out.code).toBe(0);
    expect(JSON.parse(out.stdout)).toEqual([
      {
        path: "rules[0].when",
        message:
          'rule "deep": the condition nests too deeply to be read; simplify it or split the rule in two',
      },
    ]);
  }, 30_000);

  it("decision missing or unknown", () => {
    expect(onlyError([{ name: "a", tools: ["x"] }], "rules[0].decision")).toMatch(
      /is required; add "decision": "allow", "deny" or "review"/,
    );
    expect(onlyError([{ ...ok, decision: "block" }], "rules[0].decision")).toMatch(
      /^"block" is not a decision; use "allow" \(run at once\), "deny" \(refuse\) or "review"/,
    );
  });

  it("reason empty or over 500 characters", () => {
    expect(onlyError([{ ...ok, reason: "" }], "rules[0].reason")).toMatch(/not an empty string/);
    expect(onlyError([{ ...ok, reason: "r".repeat(501) }], "rules[0].reason")).toMatch(
      /is 501 characters long; at most 500/,
    );
  });

  it("approvals only on review rules, an integer from 1 to 5", () => {
    expect(onlyError([{ ...ok, approvals: 2 }], "rules[0].approvals")).toMatch(
      /only applies to "review" rules.*use "decision": "review"/,
    );
    const review = { ...ok, decision: "review" };
    expect(onlyError([{ ...review, approvals: 6 }], "rules[0].approvals")).toMatch(
      /6 is not allowed; use an integer from 1 to 5/,
    );
    expect(onlyError([{ ...review, approvals: 1.5 }], "rules[0].approvals")).toMatch(/1.5 is not allowed/);
    expect(onlyError([{ ...review, approvals: "2" }], "rules[0].approvals")).toMatch(
      /not a string; write 2 without quotes/,
    );
  });

  it("reports every broken rule at once", () => {
    const result = withRules([
      { ...ok, name: "BAD" },
      { ...ok, name: "b", tools: ["a b"] },
      { ...ok, name: "c", when: "args.x ==" },
    ]);
    expect(result.config).toBeNull();
    expect(result.errors.map((e) => e.path)).toEqual(["rules[0].name", "rules[1].tools[0]", "rules[2].when"]);
  });
});

describe("docs/RULES.md", () => {
  const doc = readFileSync(path.join(root, "docs", "RULES.md"), "utf8");

  it("its example rules are valid as written", () => {
    const block = /```json\n([\s\S]*?)```/.exec(doc)?.[1] ?? "";
    const result = check(JSON.parse(`{"mcpServers": {}, ${block}}`));
    expect(result.errors).toEqual([]);
    expect(result.config?.rules.map((r) => r.name)).toEqual(["notes-reads", "no-drop", "payments"]);
  });

  it("its example conditions are valid as written", () => {
    const lines = (/```text\n([\s\S]*?)```/.exec(doc)?.[1] ?? "").split("\n").filter((l) => l.trim());
    expect(lines.length).toBeGreaterThan(3);
    for (const when of lines) {
      expect(withRules([{ ...ok, when }]).errors, when).toEqual([]);
    }
  });
});

describe("npm run gatehouse -- config check", () => {
  it("a broken rule file exits 1 with the rule's JSON path on stderr", async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), "gatehouse-rules-check-"));
    try {
      const file = path.join(dir, "gatehouse.json");
      writeFileSync(
        file,
        JSON.stringify({ mcpServers: {}, rules: [ok, { ...ok, name: "no-drop-2", when: "args.sql = 'x'" }] }),
      );
      const out = await run("npm", ["run", "--silent", "gatehouse", "--", "config", "check", file]);
      expect(out.code).toBe(1);
      expect(out.stderr).toContain('rules[1].when: rule "no-drop-2": CEL syntax error at column 10');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 30_000);
});
