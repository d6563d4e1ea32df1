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
      { text: "\\u202e", hidden: true, title: "U+202E right-to-left override" },
      { text: 'evil"', hidden: false },
    ]);
    expect(countHidden({ "a\u200B": ["x\u2066y", 3, { z: "\u202E\u202C" }], plain: "text" })).toBe(4);
  });

  it("a tag character is marked as an escape of its own, naming the letter it hides; the value is untouched", () => {
    const value = "ok\u{E0041}\u{E0042}";
    expect(jsonStringParts(value)).toEqual([
      { text: '"ok', hidden: false },
      { text: "\\u{e0041}", hidden: true, title: 'U+E0041 tag character, an invisible "A"' },
      { text: "\\u{e0042}", hidden: true, title: 'U+E0042 tag character, an invisible "B"' },
      { text: '"', hidden: false },
    ]);
    expect(value).toBe("ok\u{E0041}\u{E0042}");
    expect(countHidden({ q: value })).toBe(2);
  });

  it("variation selectors, invisible operators and the other hidden characters are marked too", () => {
    expect(jsonString("a\uFE0Fb\u{E0100}c\u2062d\u061Ce\u180Ef\u200Eg\u2069h")).toBe(
      '"a\\ufe0fb\\u{e0100}c\\u2062d\\u061ce\\u180ef\\u200eg\\u2069h"',
    );
    expect(countHidden(["\uFE0F", "\u{E01EF}", "\u2060", "\u{E007F}"])).toBe(4);
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
