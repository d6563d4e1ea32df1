import { describe, expect, it } from "vitest";
import { parseArguments } from "./try-arguments";

describe("reading what the owner typed", () => {
  it("accepts a JSON object, and empty text as {}", () => {
    expect(parseArguments('{"text": "hi"}')).toEqual({ ok: true, value: { text: "hi" } });
    expect(parseArguments("  ")).toEqual({ ok: true, value: {} });
  });

  it("refuses broken JSON and anything that is not an object, saying why", () => {
    const broken = parseArguments('{"text": ');
    expect(broken.ok).toBe(false);
    expect(!broken.ok && broken.message).toMatch(/^Not valid JSON: /);
    expect(parseArguments("[1]")).toEqual({
      ok: false,
      message: "The arguments must be a JSON object, like {}.",
    });
  });
});
