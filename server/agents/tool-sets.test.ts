import { describe, expect, it } from "vitest";
import { ToolSets } from "./tool-sets";

/** Which tools a token's set holds: globs on local names; no set, or a person, holds every tool. */

const sets = new ToolSets([
  { name: "billing", tools: ["pay_*", "crm_read_?"], limits: {} },
  { name: "docs", tools: ["files_read_*"], limits: {} },
]);
const agent = (toolSet: string | null) => ({ kind: "agent" as const, name: "bot", toolSet });

describe("ToolSets", () => {
  it("a token's set holds the tools its globs match, and no other", () => {
    expect(sets.holds(agent("billing"), "pay_invoice")).toBe(true);
    expect(sets.holds(agent("billing"), "crm_read_a")).toBe(true);
    expect(sets.holds(agent("billing"), "crm_read_ab")).toBe(false);
    expect(sets.holds(agent("billing"), "files_read_x")).toBe(false);
    expect(sets.filter(agent("docs"), ["pay_x", "files_read_a", "files_write_a"], (n) => n)).toEqual([
      "files_read_a",
    ]);
  });

  it("a token without a set, and a person whatever they carry, hold every tool", () => {
    expect(sets.holds(agent(null), "anything_at_all")).toBe(true);
    expect(sets.holds({ kind: "user", name: "rita", toolSet: "docs" }, "pay_invoice")).toBe(true);
    expect(sets.refusal(agent(null), "pay_invoice")).toBeNull();
  });

  it("a token whose set left the configuration holds nothing, and is told why", () => {
    expect(sets.holds(agent("gone"), "pay_invoice")).toBe(false);
    expect(sets.filter(agent("gone"), ["pay_invoice"], (n) => n)).toEqual([]);
    const refusal = sets.refusal(agent("gone"), "pay_invoice");
    expect(refusal?.code).toBe("tool_not_in_set");
    expect(refusal?.message).toMatch(/tool set "gone" is not in the configuration/);
  });

  it("a call outside the set is refused tool_not_in_set, naming the tool and the set", () => {
    const refusal = sets.refusal(agent("docs"), "pay_invoice");
    expect(refusal?.code).toBe("tool_not_in_set");
    expect(refusal?.message).toBe('"pay_invoice" is not in tool set "docs" of this token');
  });
});
