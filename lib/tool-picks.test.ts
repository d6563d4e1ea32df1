import { describe, expect, it } from "vitest";
import { stillPicked } from "./tool-picks";

describe("tools picked for a bulk enable", () => {
  it("a selected tool that changed while out of view is no longer picked; the others are", () => {
    const picked = new Map([
      ["files_read", "h-read-1"],
      ["files_write", "h-write-1"],
      ["files_gone", "h-gone-1"],
    ]);
    const now = new Map([
      ["files_read", { definitionHash: "h-read-1" }],
      ["files_write", { definitionHash: "h-write-2" }],
    ]);
    expect([...stillPicked(picked, now)]).toEqual(["files_read"]);
  });
});
