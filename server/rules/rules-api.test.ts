import { afterEach, describe, expect, it } from "vitest";
import type { RuleListView } from "@/lib/api-types";
import {
  bodyOf,
  createAgentToken,
  createTestUser,
  enableTool,
  LIST_NOTES,
  request,
  startTestRuntime,
  type TestRuntime,
} from "@/test/support/runtime";
import { calls } from "../store/schema";

/** `GET /api/rules` through the real route module and wrapper, on a runtime started from a config with rules. */

let rt: TestRuntime | undefined;
afterEach(async () => {
  await rt?.stop();
  rt = undefined;
});

const config = {
  rules: [
    { name: "demo-reads", tools: ["demo_list_*"], decision: "allow" },
    {
      name: "no-secrets",
      tools: ["demo_*"],
      when: "args.text.contains('secret')",
      decision: "deny",
      reason: "no secrets in notes",
    },
    { name: "pay", tools: ["pay_*"], agents: ["billing-bot"], decision: "review", approvals: 2 },
  ],
};

describe("GET /api/rules", () => {
  it("lists the rules in order with hits and the enabled tools they match, for reviewers and owners", async () => {
    rt = await startTestRuntime({ config });
    await enableTool(rt.runtime, LIST_NOTES);
    await rt.runtime.db.insert(calls).values({
      id: "c1",
      tool: LIST_NOTES,
      server: "demo",
      remoteName: "list_notes",
      arguments: "{}",
      argumentsDigest: "d",
      destructive: false,
      requesterKind: "agent",
      requesterName: "bot",
      status: "succeeded",
      createdAt: "2026-02-01T09:00:00.000Z",
      rule: "demo-reads",
    });
    const reviewer = await createTestUser(rt.runtime, "rita", ["reviewer"]);
    const owner = await createTestUser(rt.runtime, "olga", ["owner"]);
    for (const cookie of [reviewer.cookie, owner.cookie]) {
      const res = await request("GET", "/api/rules", { cookie });
      expect(res.status).toBe(200);
      const body = await bodyOf<RuleListView>(res);
      expect(body.rules.map((r) => [r.name, r.hits, r.lastHitAt, r.matchingTools])).toEqual([
        ["demo-reads", 1, "2026-02-01T09:00:00.000Z", [LIST_NOTES]],
        ["no-secrets", 0, null, [LIST_NOTES]],
        ["pay", 0, null, []],
      ]);
      expect(body.rules[1]).toMatchObject({
        when: "args.text.contains('secret')",
        decision: "deny",
        reason: "no secrets in notes",
        agents: null,
        approvals: 1,
      });
      expect(body.rules[2]).toMatchObject({ agents: ["billing-bot"], decision: "review", approvals: 2 });
    }
  });

  it("says the tool set of each token a rule names, and nothing of other tokens", async () => {
    rt = await startTestRuntime({ config: { ...config, toolSets: { billing: { tools: ["pay_*"] } } } });
    await createAgentToken(rt.runtime, "billing-bot", { toolSet: "billing" });
    await createAgentToken(rt.runtime, "elsewhere-bot", { toolSet: "billing" });
    const reviewer = await createTestUser(rt.runtime, "rita", ["reviewer"]);
    const body = await bodyOf<RuleListView>(await request("GET", "/api/rules", { cookie: reviewer.cookie }));
    expect(body.toolSets).toEqual({ "billing-bot": "billing" });
  });

  it("is not for agents", async () => {
    rt = await startTestRuntime({ config });
    const res = await request("GET", "/api/rules", { bearer: await createAgentToken(rt.runtime, "robot") });
    expect(res.status).toBe(403);
    expect((await bodyOf<{ error: { code: string } }>(res)).error.code).toBe("forbidden");
  });
});
