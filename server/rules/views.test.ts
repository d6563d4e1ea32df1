import { describe, expect, it } from "vitest";
import type { RuleListView } from "@/lib/api-types";
import { openTestDb } from "@/test/support/store";
import type { Db } from "../store/db";
import { calls, tools } from "../store/schema";
import { enabledToolNames, listRules, rulesMatchingNoTool, ruleViews } from "./index";
import { rule } from "./rule-fixtures";

/** `GET /api/rules` and the start-time warning: hits counted from calls, globs against tool names. */

async function storeWithCalls(rows: { rule: string | null; createdAt: string }[]): Promise<Db> {
  const db = await openTestDb();
  for (const [i, row] of rows.entries()) {
    await db.insert(calls).values({
      id: `call-${i}`,
      tool: "db_query",
      server: "db",
      remoteName: "query",
      arguments: "{}",
      argumentsDigest: "d",
      destructive: true,
      requesterKind: "agent",
      requesterName: "bot",
      status: "denied",
      createdAt: row.createdAt,
      rule: row.rule,
    });
  }
  return db;
}

async function addTool(db: Db, localName: string, status: string): Promise<void> {
  await db.insert(tools).values({
    localName,
    server: localName.split("_")[0] ?? "x",
    remoteName: localName,
    status,
    present: true,
    definition: "{}",
    definitionHash: "h",
    description: "",
    readOnly: false,
  });
}

const rules = [
  rule({
    name: "no-drop",
    tools: ["db_*"],
    when: "args.sql.contains('DROP')",
    decision: "deny",
    reason: "no",
  }),
  rule({ name: "payments", tools: ["pay_*"], agents: ["billing-bot"], decision: "review", approvals: 2 }),
  rule({ name: "typo", tools: ["dbb_*"], decision: "allow" }),
];

describe("rule views", () => {
  it("count each rule's hits and its last hit from the calls it decided", async () => {
    const db = await storeWithCalls([
      { rule: "no-drop", createdAt: "2026-01-01T10:00:00.000Z" },
      { rule: "no-drop", createdAt: "2026-01-03T10:00:00.000Z" },
      { rule: "no-drop", createdAt: "2026-01-02T10:00:00.000Z" },
      { rule: "payments", createdAt: "2026-01-05T10:00:00.000Z" },
      { rule: null, createdAt: "2026-01-06T10:00:00.000Z" },
      { rule: "removed-rule", createdAt: "2026-01-07T10:00:00.000Z" },
    ]);
    const views = await ruleViews(db, rules, ["db_query", "db_exec", "pay_send", "files_read"]);
    expect(views.map((v) => [v.name, v.hits, v.lastHitAt])).toEqual([
      ["no-drop", 3, "2026-01-03T10:00:00.000Z"],
      ["payments", 1, "2026-01-05T10:00:00.000Z"],
      ["typo", 0, null],
    ]);
    expect(views[0]).toEqual({
      name: "no-drop",
      tools: ["db_*"],
      agents: null,
      when: "args.sql.contains('DROP')",
      decision: "deny",
      reason: "no",
      approvals: 1,
      hits: 3,
      lastHitAt: "2026-01-03T10:00:00.000Z",
      matchingTools: ["db_query", "db_exec"],
    });
    expect(views[1]?.agents).toEqual(["billing-bot"]);
    expect(views[1]?.approvals).toBe(2);
    expect(views[1]?.matchingTools).toEqual(["pay_send"]);
    expect(views[2]?.matchingTools).toEqual([]);
  });

  it("list only enabled tools as matching, in name order", async () => {
    const db = await storeWithCalls([]);
    await addTool(db, "db_query", "enabled");
    await addTool(db, "db_drop", "proposed");
    await addTool(db, "db_exec", "disabled");
    await addTool(db, "db_count", "enabled");
    await addTool(db, "dba_count", "enabled");
    // `_` before `a`, as in byte order, whatever the database's collation.
    expect(await enabledToolNames(db)).toEqual(["db_count", "db_query", "dba_count"]);
    const view: RuleListView = await listRules(db, rules);
    expect(view.rules.map((r) => r.name)).toEqual(["no-drop", "payments", "typo"]);
    expect(view.rules[0]?.matchingTools).toEqual(["db_count", "db_query"]);
  });
});

describe("rulesMatchingNoTool", () => {
  it("names the rules whose globs match none of the known tools", () => {
    expect(rulesMatchingNoTool(rules, ["db_query", "pay_send"])).toEqual(["typo"]);
    expect(rulesMatchingNoTool(rules, [])).toEqual(["no-drop", "payments", "typo"]);
    expect(rulesMatchingNoTool(rules, ["db_x", "pay_y", "dbb_z"])).toEqual([]);
  });
});
