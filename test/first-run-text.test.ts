import { describe, expect, it } from "vitest";
import { enabledNoticeText } from "@/components/enabled-notice";
import { nextSteps } from "@/components/next-steps";
import { waitsForAnotherReviewer } from "@/lib/viewer";

const tool = (localName: string, destructive: boolean, alwaysConfirm = false) => ({
  localName,
  destructive,
  alwaysConfirm,
});

describe("enabledNoticeText", () => {
  it("says a destructive tool's calls now wait for a reviewer", () => {
    expect(enabledNoticeText([tool("demo_add_note", true)])).toBe(
      "demo_add_note is enabled. It can change things, so every call waits on Approvals until a reviewer approves it.",
    );
  });

  it("says a read-only tool's calls run at once, and an always-confirmed one's wait", () => {
    expect(enabledNoticeText([tool("demo_list_notes", false)])).toBe(
      "demo_list_notes is enabled. It is read-only: agents' calls run at once, without approval.",
    );
    expect(enabledNoticeText([tool("peek", false, true)])).toBe(
      "peek is enabled. Every call waits on Approvals until a reviewer approves it.",
    );
  });

  it("names the held tools of a bulk enable, and counts them when there are many", () => {
    expect(enabledNoticeText([tool("a", true), tool("b", false)])).toBe(
      "Enabled 2 tools. Calls of a wait on Approvals until a reviewer approves them; the others run at once.",
    );
    const many = ["a", "b", "c", "d"].map((n) => tool(n, true));
    expect(enabledNoticeText([...many, tool("e", false)])).toBe(
      "Enabled 5 tools. Calls of 4 of them wait on Approvals until a reviewer approves them; the others run at once.",
    );
    expect(enabledNoticeText([tool("a", false), tool("b", false)])).toBe(
      "Enabled 2 tools. All are read-only: their calls run at once, without approval.",
    );
    expect(enabledNoticeText([])).toBeNull();
  });
});

describe("nextSteps", () => {
  const base = {
    me: "olga",
    servers: [{ name: "alpha" }, { name: "demo" }],
    tools: [{ server: "demo", status: "proposed" as const }],
    users: [{ name: "olga", roles: ["owner" as const] }],
    looked: false,
    selfApproval: false,
  };

  it("starts from the demo server with nothing done", () => {
    const steps = nextSteps(base);
    expect(steps?.map((s) => [s.key, s.title, s.done])).toEqual([
      ["look", "Look at the demo server", false],
      ["enable", "Enable its tools", false],
      ["reviewer", "Add a reviewer", false],
    ]);
    expect(steps?.[1]?.href).toBe("/tools?server=demo");
    expect(steps?.[2]?.href).toBe("/settings?add=reviewer#add-user");
  });

  it("ticks each step from what is true: a look, an enabled tool of that server, another reviewer", () => {
    const steps = nextSteps({
      ...base,
      looked: true,
      tools: [
        { server: "alpha", status: "enabled" },
        { server: "demo", status: "enabled" },
      ],
      users: [...base.users, { name: "rita", roles: ["reviewer"] }],
    });
    expect(steps?.every((s) => s.done)).toBe(true);
  });

  it("does not count another server's tools, the owner themselves, or a missing server", () => {
    const steps = nextSteps({ ...base, tools: [{ server: "alpha", status: "enabled" }] });
    expect(steps?.[1]?.done).toBe(false);
    expect(steps?.[2]?.done).toBe(false);
    expect(nextSteps({ ...base, servers: [{ name: "only" }] })?.[0]?.title).toBe("Look at the only server");
    expect(nextSteps({ ...base, servers: [] })).toBeNull();
  });

  it("counts the reviewer step done when approvals.selfApproval lets the owner approve alone, and says why", () => {
    const off = nextSteps(base)?.[2];
    expect(off?.detail).toBe(
      "A call that changes things has to be approved by someone other than whoever asked for it: you, or an agent whose token you created.",
    );
    const on = nextSteps({ ...base, selfApproval: true })?.[2];
    expect(on?.done).toBe(true);
    expect(on?.detail).toContain("approvals.selfApproval is on");
  });
});

describe("waitsForAnotherReviewer", () => {
  const call = { approvalsNeeded: 1, rule: null };
  it("is true for a lone owner's call, and false once someone else may approve it", () => {
    expect(waitsForAnotherReviewer(call, { selfApproval: false, otherReviewers: 0 })).toBe(true);
    expect(waitsForAnotherReviewer(call, { selfApproval: false, otherReviewers: 1 })).toBe(false);
  });

  it("is false when self-approval covers the call, never for two approvals or a rule's hold", () => {
    expect(waitsForAnotherReviewer(call, { selfApproval: true, otherReviewers: 0 })).toBe(false);
    expect(
      waitsForAnotherReviewer({ approvalsNeeded: 2, rule: null }, { selfApproval: true, otherReviewers: 1 }),
    ).toBe(true);
    expect(
      waitsForAnotherReviewer(
        { approvalsNeeded: 1, rule: "hold" },
        { selfApproval: true, otherReviewers: 0 },
      ),
    ).toBe(true);
  });
});
