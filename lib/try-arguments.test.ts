import { describe, expect, it } from "vitest";
import { argumentsSkeleton, parseArguments } from "./try-arguments";

describe("the Try form's starting arguments", () => {
  it("lists each required property with an empty value of its type, and leaves optional ones out", () => {
    expect(
      argumentsSkeleton({
        type: "object",
        properties: {
          text: { type: "string" },
          count: { type: "integer" },
          force: { type: "boolean" },
          tags: { type: "array" },
          mode: { type: "string", enum: ["fast", "safe"] },
          level: { type: "number", default: 3 },
          nested: { type: "object", properties: { id: { type: "string" } }, required: ["id"] },
          optional: { type: "string" },
        },
        required: ["text", "count", "force", "tags", "mode", "level", "nested"],
      }),
    ).toEqual({ text: "", count: 0, force: false, tags: [], mode: "fast", level: 3, nested: { id: "" } });
  });

  it("a schema without properties, or no schema, starts from {}", () => {
    expect(argumentsSkeleton({ type: "object" })).toEqual({});
    expect(argumentsSkeleton(null)).toEqual({});
  });
});

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
