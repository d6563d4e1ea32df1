/** approvalNeed: the one decision of "does a call wait for a reviewer", row by row. */
import type { Tool } from "@modelcontextprotocol/client";
import { describe, expect, it } from "vitest";
import { tool } from "@/test/support/catalogue";
import { approvalNeed } from "./approval";
import { definitionHash, definitionOf } from "./definition";
import type { ToolRow } from "./rows";

describe("approvalNeed", () => {
  function input(annotations: Record<string, unknown> | undefined, over: Partial<ToolRow> = {}) {
    const def = definitionOf(tool("t", annotations ? ({ annotations } as Partial<Tool>) : {}));
    return {
      definition: JSON.stringify(def),
      definitionHash: definitionHash(def),
      vouchedHash: null as string | null,
      alwaysConfirm: false,
      ...over,
    };
  }

  const CASES: [string, Record<string, unknown> | undefined, Partial<ToolRow>, boolean, string | null][] = [
    ["readOnlyHint: true runs at once", { readOnlyHint: true }, {}, false, null],
    ["no annotations waits", undefined, {}, true, "no readOnlyHint"],
    ["readOnlyHint: false waits", { readOnlyHint: false }, {}, true, "readOnlyHint: false"],
    ["destructiveHint: true waits", { destructiveHint: true }, {}, true, "destructiveHint: true"],
    [
      "destructiveHint: true is the reason even beside readOnlyHint: false",
      { readOnlyHint: false, destructiveHint: true },
      {},
      true,
      "destructiveHint: true",
    ],
    ['readOnlyHint: "true" (a string) waits', { readOnlyHint: "true" }, {}, true, "no readOnlyHint"],
    ["destructiveHint: false alone waits", { destructiveHint: false }, {}, true, "no readOnlyHint"],
    [
      "always confirm makes a read-only tool wait",
      { readOnlyHint: true },
      { alwaysConfirm: true },
      true,
      "owner requires confirmation",
    ],
    [
      "always confirm on a destructive tool keeps the server's reason",
      { destructiveHint: true },
      { alwaysConfirm: true },
      true,
      "destructiveHint: true",
    ],
  ];
  for (const [label, annotations, over, destructive, reason] of CASES) {
    it(label, () => {
      expect(approvalNeed(input(annotations, over))).toMatchObject({ destructive, reason });
    });
  }

  it("a vouch for the current definition runs at once; for another definition it counts for nothing", () => {
    const current = input(undefined);
    expect(approvalNeed({ ...current, vouchedHash: current.definitionHash })).toEqual({
      destructive: false,
      reason: null,
      readOnlyBy: "vouch",
    });
    expect(approvalNeed({ ...current, vouchedHash: "0".repeat(64) })).toMatchObject({
      destructive: true,
      reason: "no readOnlyHint",
    });
  });

  it("a vouch never overrides a server that says readOnlyHint: false or destructiveHint: true", () => {
    for (const annotations of [{ readOnlyHint: false }, { destructiveHint: true }]) {
      const r = input(annotations);
      expect(approvalNeed({ ...r, vouchedHash: r.definitionHash }).destructive).toBe(true);
    }
  });

  it("a vouched tool with always confirm still waits, saying the owner requires it", () => {
    const r = input(undefined, { alwaysConfirm: true });
    expect(approvalNeed({ ...r, vouchedHash: r.definitionHash })).toEqual({
      destructive: true,
      reason: "owner requires confirmation",
      readOnlyBy: "vouch",
    });
  });
});
