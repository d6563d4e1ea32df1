import { describe, expect, it } from "vitest";
import { oneLineText, TOOL_ERROR_MAX_CHARS, toolErrorText } from "./tool-error-text";

const failed = (...texts: string[]) => ({
  isError: true,
  content: texts.map((text) => ({ type: "text", text })),
});

describe("a failed call's own error text, as the console shows it", () => {
  it("a tool's error text is shown on one line without hidden, control or bidi characters", () => {
    const hostile =
      "disk\u200B full\u202E atad/rav\u202C\n\tretry\u0007 later\r\n" +
      "\u{E0049}\u{E0067}\u{E006E}\u{E006F}\u{E0072}\u{E0065} ok\u2028end\u00AD!";
    expect(oneLineText(hostile)).toBe("disk full atad/rav retry later ok end!");
  });

  it("a long error text is cut to the cap with an ellipsis, never inside a character", () => {
    const long = `${"é".repeat(10)}${"😀".repeat(400)}`;
    const shown = oneLineText(long);
    expect(shown.endsWith("…")).toBe(true);
    expect(Array.from(shown)).toHaveLength(TOOL_ERROR_MAX_CHARS);
    expect(shown).not.toMatch(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])/);
    expect(oneLineText("short", 10)).toBe("short");
    expect(oneLineText("exactly-10", 10)).toBe("exactly-10");
    expect(oneLineText("eleven-char", 10)).toBe("eleven-ch…");
  });

  it("the text parts of an isError result are joined; other parts and results that succeeded give none", () => {
    expect(
      toolErrorText({
        isError: true,
        content: [
          { type: "text", text: "quota exceeded" },
          { type: "image", data: "AAAA", mimeType: "image/png" },
          { type: "text", text: "\n  on /var/data  " },
        ],
      }),
    ).toBe("quota exceeded on /var/data");
    expect(toolErrorText({ content: [{ type: "text", text: "fine" }] })).toBeNull();
    expect(
      toolErrorText({ isError: true, content: [{ type: "image", data: "AA", mimeType: "x" }] }),
    ).toBeNull();
    expect(toolErrorText(failed("\u200B\u202E \n"))).toBeNull();
    expect(toolErrorText(null)).toBeNull();
    expect(toolErrorText("isError")).toBeNull();
    expect(toolErrorText({ isError: true, content: "not a list" })).toBeNull();
  });

  it("a result stored truncated still gives the start of the tool's error text", () => {
    const whole = JSON.stringify(failed(`bad \\ "quoted" input\u202E ${"x".repeat(500)}`));
    const stored = { truncated: true, bytes: whole.length, preview: whole.slice(0, 120) };
    const shown = toolErrorText(stored);
    expect(shown).toMatch(/^bad \\ "quoted" input x+$/);
    // Cut inside an escape: the broken escape is dropped, not shown.
    const cut = JSON.stringify(failed('say "hi"'));
    const at = cut.indexOf('\\"hi');
    expect(toolErrorText({ truncated: true, bytes: 999, preview: cut.slice(0, at + 1) })).toBe("say");
    // A preview of a result that says it did not fail, or without content, gives none.
    const ok = JSON.stringify({ isError: false, content: [{ type: "text", text: "ok" }] });
    expect(toolErrorText({ truncated: true, bytes: 999, preview: ok })).toBeNull();
    expect(toolErrorText({ truncated: true, bytes: 999, preview: '{"isError":true,"structured' })).toBeNull();
  });
});
