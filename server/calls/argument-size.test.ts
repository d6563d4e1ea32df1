/**
 * Arguments are measured as the JSON they are, without recursion, and schemas are profiled for
 * the keywords whose cost can outgrow their size.
 */
import { describe, expect, it } from "vitest";
import { MAX_REQUEST_BODY_BYTES } from "../request";
import { ARGUMENT_LIMITS, measureArguments, schemaProfile } from "./argument-size";

const wide = { maxBytes: Number.MAX_SAFE_INTEGER, maxDepth: 1000 };

describe("measuring arguments", () => {
  it("counts the bytes JSON.stringify writes", () => {
    const samples: unknown[] = [
      {},
      [],
      { a: 1, b: [true, false, null], c: "x" },
      { 'ké"y': 'va"lue\n\u0001', emoji: "😀", lone: "\ud800", n: -1.5e-7, big: 1e21, zero: -0 },
      { nested: [[[]], [{}], { a: [1, 2, { b: "c" }] }] },
      { text: "é".repeat(1000) },
    ];
    for (const value of samples) {
      expect(measureArguments(value, wide).bytes).toBe(Buffer.byteLength(JSON.stringify(value)));
    }
    expect(measureArguments({ a: [1, "b"] }, wide)).toEqual({ bytes: 13, nodes: 4, over: null });
  });

  it("stops at the first bound passed, without walking the rest", () => {
    const limits = { maxBytes: 100, maxDepth: 3 };
    expect(measureArguments({ a: { b: { c: 1 } } }, limits).over).toBe(null);
    expect(measureArguments({ a: { b: { c: [] } } }, limits).over).toBe("depth");
    expect(measureArguments({ a: "x".repeat(100) }, limits).over).toBe("bytes");
    const many = { xs: Array.from({ length: 1_000_000 }, (_, i) => i) };
    expect(measureArguments(many, limits).nodes).toBeLessThan(100);
  });

  it("measures 200,000 levels of nesting without overflowing the stack", () => {
    const deep = JSON.parse(`${"[".repeat(200_000)}${"]".repeat(200_000)}`) as unknown;
    expect(measureArguments(deep, ARGUMENT_LIMITS).over).toBe("depth");
  });

  it("the default bound fits in a request body with room for the rest of it", () => {
    expect(ARGUMENT_LIMITS.maxBytes).toBeLessThanOrEqual(MAX_REQUEST_BODY_BYTES / 2);
  });
});

describe("profiling a schema", () => {
  it("counts its values and names the first costly keyword", () => {
    expect(schemaProfile({ type: "object", properties: { a: { enum: [1, 2] } } })).toEqual({
      nodes: 7,
      costly: null,
    });
    for (const key of ["pattern", "patternProperties", "format", "uniqueItems", "$ref", "$dynamicRef"]) {
      expect(schemaProfile({ anyOf: [{ type: "string" }, { items: [{ [key]: "x" }] }] }).costly).toBe(key);
    }
  });
});
