import { describe, expect, it } from "vitest";
import { check, messagesAt } from "./test-helpers";

/** `toolSets`: named lists of globs a token may be given; every problem at its JSON path. */

function sets(toolSets: unknown) {
  return check({ mcpServers: {}, toolSets });
}

describe("the toolSets section", () => {
  it("reads named sets of globs, sorted by name, and none when absent", () => {
    const result = sets({ docs: { tools: ["files_read_*"] }, billing: { tools: ["pay_*", "crm_read_?"] } });
    expect(result.errors).toEqual([]);
    expect(result.config?.toolSets).toEqual([
      { name: "billing", tools: ["pay_*", "crm_read_?"], limits: {} },
      { name: "docs", tools: ["files_read_*"], limits: {} },
    ]);
    expect(check({ mcpServers: {} }).config?.toolSets).toEqual([]);
  });

  it("refuses a section that is not an object, naming its path", () => {
    const result = sets(["billing"]);
    expect(result.config).toBeNull();
    expect(messagesAt(result.errors, "toolSets")[0]).toMatch(/must be an object mapping set names/);
  });

  it("refuses a set name tokens could not carry", () => {
    const result = sets({ "Billing Bot": { tools: ["pay_*"] } });
    expect(messagesAt(result.errors, 'toolSets["Billing Bot"]')[0]).toMatch(
      /set name "Billing Bot" is not allowed/,
    );
  });

  it("needs a non-empty list of globs in tools, each checked at its index", () => {
    expect(messagesAt(sets({ billing: {} }).errors, "toolSets.billing.tools")[0]).toMatch(/is required/);
    expect(messagesAt(sets({ billing: { tools: "pay_*" } }).errors, "toolSets.billing.tools")[0]).toMatch(
      /write it as a list: \["pay_\*"\]/,
    );
    expect(messagesAt(sets({ billing: { tools: [] } }).errors, "toolSets.billing.tools")[0]).toMatch(
      /lists no tools/,
    );
    const bad = sets({ billing: { tools: ["pay_*", "crm read"] } });
    expect(messagesAt(bad.errors, "toolSets.billing.tools[1]")[0]).toMatch(/contains " " \(a space\)/);
    expect(bad.config).toBeNull();
  });

  it("refuses unknown keys in a set, with the fix other gateways' words call for", () => {
    const result = sets({ billing: { tools: ["pay_*"], allow: ["crm_*"], tols: [] } });
    expect(messagesAt(result.errors, "toolSets.billing.allow")[0]).toMatch(/list the globs in "tools"/);
    expect(messagesAt(result.errors, "toolSets.billing.tols")[0]).toMatch(/did you mean "tools"\?/);
  });

  it("reads a set's limits, only those given, each at its JSON path when wrong", () => {
    const ok = sets({ billing: { tools: ["pay_*"], limits: { callsPerMinute: 60 } } });
    expect(ok.config?.toolSets[0]?.limits).toEqual({ callsPerMinute: 60 });
    const bad = sets({
      billing: { tools: ["pay_*"], limits: { callsPerMinute: -1, maxConcurrentCalls: 4, concurrency: 2 } },
    });
    expect(messagesAt(bad.errors, "toolSets.billing.limits.callsPerMinute")[0]).toMatch(
      /-1 is not allowed; use 0 \(off\) or an integer from 1 to 100000/,
    );
    expect(messagesAt(bad.errors, "toolSets.billing.limits.maxConcurrentCalls")).toEqual([]);
    expect(messagesAt(bad.errors, "toolSets.billing.limits.concurrency")[0]).toMatch(
      /use "maxConcurrentCalls"/,
    );
    const concurrent = sets({ billing: { tools: ["pay_*"], limits: { maxConcurrentCalls: 4 } } });
    expect(concurrent.config?.toolSets[0]?.limits).toEqual({ maxConcurrentCalls: 4 });
  });
});

describe("the agentLimits section", () => {
  it("defaults to 20 calls waiting, no pace and no bound on calls running; each key checked at its path", () => {
    expect(check({ mcpServers: {} }).config?.agentLimits).toEqual({
      callsPerMinute: 0,
      maxPendingCalls: 20,
      maxConcurrentCalls: 0,
    });
    const given = check({
      mcpServers: {},
      agentLimits: { callsPerMinute: 600, maxPendingCalls: 0, maxConcurrentCalls: 16 },
    });
    expect(given.config?.agentLimits).toEqual({
      callsPerMinute: 600,
      maxPendingCalls: 0,
      maxConcurrentCalls: 16,
    });
    const bad = check({ mcpServers: {}, agentLimits: { maxPendingCalls: "5", rpm: 3 } });
    expect(messagesAt(bad.errors, "agentLimits.maxPendingCalls")[0]).toMatch(/write 5 without quotes/);
    expect(messagesAt(bad.errors, "agentLimits.rpm")[0]).toMatch(/use "callsPerMinute"/);
    expect(messagesAt(check({ mcpServers: {}, agentLimits: 5 }).errors, "agentLimits")[0]).toMatch(
      /must be an object/,
    );
  });
});
