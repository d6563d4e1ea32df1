import { describe, expect, it } from "vitest";
import { safeReturnPath, signInHref } from "./return-path";

describe("the return path after sign-in", () => {
  it.each([
    ["/approvals/0b6c1f2e", "/approvals/0b6c1f2e"],
    ["/activity?status=denied&tool=add_note", "/activity?status=denied&tool=add_note"],
    ["/approvals/abc#story", "/approvals/abc#story"],
    ["/", "/"],
    // Dot segments stay on this origin; the normalised path is what is kept.
    ["/approvals/../settings", "/settings"],
  ])("keeps the same-origin path %s", (raw, kept) => {
    expect(safeReturnPath(raw)).toBe(kept);
  });

  it.each([
    ["a scheme-relative address", "//evil.example/approvals"],
    ["a backslash read as a slash", "/\\evil.example"],
    ["a backslash later in the path", "/approvals\\..\\..\\\\evil.example"],
    ["an absolute URL", "https://evil.example/approvals/1"],
    ["a javascript: URL", "javascript:alert(1)"],
    ["a relative path", "approvals/1"],
    ["a tab the URL parser would drop", "/\t/evil.example"],
    ["a newline the URL parser would drop", "/\n/evil.example"],
    ["a space", "/ /evil.example"],
    ["the sign-in page itself", "/login?next=/approvals"],
    ["an empty string", ""],
    ["a path over 2048 characters", `/${"a".repeat(2048)}`],
    ["dot segments collapsing into a scheme-relative path", "/..//evil.example"],
    ["a dot segment before a double slash", "/.//evil.example"],
    ["an encoded dot-dot before a double slash", "/%2e%2e//evil.example"],
  ])("refuses %s", (_what, raw) => {
    expect(safeReturnPath(raw)).toBeNull();
  });

  it("refuses what is not a string, as a repeated query parameter arrives", () => {
    expect(safeReturnPath(["/approvals/1", "/approvals/2"])).toBeNull();
    expect(safeReturnPath(undefined)).toBeNull();
  });

  it("the sign-in address carries a safe path, and nothing for the home page or an unsafe one", () => {
    expect(signInHref("/approvals/abc")).toBe("/login?next=%2Fapprovals%2Fabc");
    expect(signInHref("/activity?status=denied")).toBe("/login?next=%2Factivity%3Fstatus%3Ddenied");
    expect(signInHref("/")).toBe("/login");
    expect(signInHref("//evil.example")).toBe("/login");
    expect(signInHref(null)).toBe("/login");
  });
});
