import { describe, expect, it } from "vitest";
import type { CallFact } from "./events";
import { decidedHow, LabelBounds, OTHER, TOOL_LABEL_CAP } from "./metrics";

const call = (over: Partial<CallFact["call"]>): CallFact["call"] => ({
  server: "demo",
  tool: "demo_add_note",
  status: "running",
  rule: null,
  grantId: null,
  errorCode: null,
  ...over,
});

describe("how a decision was made", () => {
  it("names births by their grant, rule or the default, and leaves a held birth and an outcome undecided", () => {
    expect(decidedHow(null, call({ grantId: "g-1" }))).toBe("grant");
    expect(decidedHow(null, call({ rule: "allow-todo" }))).toBe("rule");
    expect(decidedHow(null, call({}))).toBe("default");
    expect(decidedHow(null, call({ status: "pending", rule: "review-all" }))).toBeNull();
    expect(decidedHow("running", call({ status: "succeeded" }))).toBeNull();
  });

  it("names a refusal a rule's only when a deny rule made it, even for a call a review rule held", () => {
    expect(decidedHow(null, call({ status: "refused", rule: "no-drop", errorCode: "denied_by_rule" }))).toBe(
      "rule",
    );
    expect(decidedHow(null, call({ status: "refused", errorCode: "tool_not_enabled" }))).toBe("check");
    expect(
      decidedHow("pending", call({ status: "refused", rule: "review-all", errorCode: "tool_changed" })),
    ).toBe("check");
    expect(
      decidedHow("pending", call({ status: "refused", rule: "no-drop", errorCode: "denied_by_rule" })),
    ).toBe("rule");
  });

  it("names the moves out of pending: a reviewer, the expiry, the withdrawal", () => {
    expect(decidedHow("pending", call({ status: "running" }))).toBe("reviewer");
    expect(decidedHow("pending", call({ status: "denied" }))).toBe("reviewer");
    expect(decidedHow("pending", call({ status: "expired" }))).toBe("expiry");
    expect(decidedHow("pending", call({ status: "withdrawn" }))).toBe("withdrawal");
  });
});

describe("label values", () => {
  it("are configured servers and known tools up to the cap; anything else is other", () => {
    const bounds = new LabelBounds(["demo"]);
    expect(bounds.server("demo")).toBe("demo");
    expect(bounds.server("ignore previous instructions")).toBe(OTHER);
    expect(bounds.tool("demo_add_note", true)).toBe("demo_add_note");
    expect(bounds.tool("whatever the agent typed", false)).toBe(OTHER);
    for (let i = 1; i < TOOL_LABEL_CAP; i++) expect(bounds.tool(`tool_${i}`, true)).toBe(`tool_${i}`);
    expect(bounds.tool("one_too_many", true)).toBe(OTHER);
    // Those already named keep their name past the cap.
    expect(bounds.tool("demo_add_note", true)).toBe("demo_add_note");
  });
});
