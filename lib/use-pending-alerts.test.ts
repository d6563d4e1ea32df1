import { describe, expect, it } from "vitest";
import type { CallView } from "./api-types";
import { alertsFor, plainTitle, titleWithCount } from "./use-pending-alerts";

function call(id: string, tool = "demo_add_note"): CallView {
  return {
    id,
    tool,
    server: "demo",
    status: "pending",
    destructive: true,
    approvalReason: "no readOnlyHint",
    toolDescription: null,
    toolChanged: false,
    arguments: {},
    requester: { kind: "agent", name: "build-bot" },
    createdAt: "2026-12-01T10:00:00.000Z",
    expiresAt: "2026-12-01T10:15:00.000Z",
    decidedAt: null,
    decidedBy: null,
    reason: null,
    startedAt: null,
    finishedAt: null,
    result: null,
    resultTruncated: false,
    error: null,
    durationMs: null,
    rule: null,
    grantId: null,
    approvalsNeeded: 1,
    approvedBy: [],
  };
}

describe("the tab title's count", () => {
  it("puts the count in front while calls are pending, and replaces an earlier count", () => {
    expect(titleWithCount("Approvals · Gatehouse", 3)).toBe("(3) Approvals · Gatehouse");
    expect(titleWithCount("(3) Approvals · Gatehouse", 12)).toBe("(12) Approvals · Gatehouse");
  });

  it("is plain with nothing pending, and taking the count off leaves the page's own title", () => {
    expect(titleWithCount("(2) Approval · Gatehouse", 0)).toBe("Approval · Gatehouse");
    expect(plainTitle("(2) Approvals · Gatehouse")).toBe("Approvals · Gatehouse");
    expect(plainTitle("Activity · Gatehouse")).toBe("Activity · Gatehouse");
  });
});

describe("system notifications for new pending calls", () => {
  it("one per call names the tool, who asked and the server, and opens the call's page", () => {
    expect(alertsFor([call("a/1"), call("b2", "crowd_tool_001")])).toEqual([
      {
        title: "Approval needed: demo_add_note",
        options: { body: "Requested by agent build-bot on demo", tag: "gatehouse-call-a/1" },
        path: "/approvals/a%2F1",
      },
      {
        title: "Approval needed: crowd_tool_001",
        options: { body: "Requested by agent build-bot on demo", tag: "gatehouse-call-b2" },
        path: "/approvals/b2",
      },
    ]);
  });

  it("more than three at once become one notification that opens the queue", () => {
    const alerts = alertsFor(["1", "2", "3", "4"].map((id) => call(id)));
    expect(alerts).toEqual([
      {
        title: "4 calls need approval",
        options: { body: "Open Gatehouse to decide.", tag: "gatehouse-pending" },
        path: "/approvals",
      },
    ]);
    expect(alertsFor(["1", "2", "3"].map((id) => call(id)))).toHaveLength(3);
  });
});
