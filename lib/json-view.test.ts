import { describe, expect, it } from "vitest";
import { countHidden, FOLD_CHARS, foldString, jsonString, jsonStringParts } from "./json-view";

describe("escaped JSON strings for reviewers", () => {
  it("quotes, backslashes and control characters are escaped as JSON", () => {
    expect(jsonString('say "hi"\\\n\t\u0000')).toBe('"say \\"hi\\"\\\\\\n\\t\\u0000"');
  });

  it("bidirectional overrides, zero-width characters and line separators are shown as \\u escapes", () => {
    expect(jsonString("a\u202Eb\u200Bc\u2028d\u2066e\u00ADf\u0085g")).toBe(
      '"a\\u202eb\\u200bc\\u2028d\\u2066e\\u00adf\\u0085g"',
    );
  });

  it("each deceptive character is a run of its own, so a view can highlight it, and they are counted", () => {
    expect(jsonStringParts("pay\u202Eevil")).toEqual([
      { text: '"pay', hidden: false },
      { text: "\\u202e", hidden: true },
      { text: 'evil"', hidden: false },
    ]);
    expect(countHidden({ "a\u200B": ["x\u2066y", 3, { z: "\u202E\u202C" }], plain: "text" })).toBe(4);
  });

  it("ordinary text, accents and emoji are left as they are", () => {
    expect(jsonString("Grüße 👋 日本")).toBe('"Grüße 👋 日本"');
  });
});

describe("folding long values", () => {
  it("a string up to the limit is shown whole", () => {
    expect(foldString("x".repeat(FOLD_CHARS))).toBeNull();
  });

  it("a longer string is folded after the limit and says how much is hidden", () => {
    const fold = foldString("a".repeat(FOLD_CHARS) + "b".repeat(1000));
    expect(fold).toEqual({ head: "a".repeat(FOLD_CHARS), hidden: 1000, total: FOLD_CHARS + 1000 });
  });

  it("a fold never splits a character made of two UTF-16 units", () => {
    const fold = foldString("😀".repeat(5), 3);
    expect(fold).toEqual({ head: "😀😀😀", hidden: 2, total: 5 });
  });
});
