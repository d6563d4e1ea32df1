/**
 * Arguments are checked against untrusted input schemas without letting a schema freeze the
 * process (docs/ARCHITECTURE.md: a hostile `pattern` needs a bound).
 */
import { describe, expect, it } from "vitest";
import { GatehouseError } from "@/lib/errors";
import { CHECK_DEADLINE_MS, checkArguments, hasRegex } from "./arguments";

const hostile = {
  type: "object",
  properties: { name: { type: "string", pattern: "^(a|a)*$" } },
  required: ["name"],
};
const evilInput = { name: `${"a".repeat(40)}!` };
const notes = {
  type: "object",
  properties: { text: { type: "string", minLength: 1 }, tags: { type: "array", items: { type: "string" } } },
  required: ["text"],
  additionalProperties: false,
};

function refusal(fn: () => void): GatehouseError {
  try {
    fn();
  } catch (err) {
    if (err instanceof GatehouseError) return err;
    throw err;
  }
  throw new Error("expected a refusal");
}

describe("checking arguments against a tool's input schema", () => {
  it("names the bad field, the missing property and an unexpected one", () => {
    expect(() => checkArguments("notes-1", notes, { text: "hello", tags: ["a"] })).not.toThrow();
    expect(refusal(() => checkArguments("notes-1", notes, { text: "x", tags: [1] })).message).toBe(
      "arguments.tags.0 must be string",
    );
    expect(refusal(() => checkArguments("notes-1", notes, {})).message).toBe(
      "arguments must have required property 'text' (missing text)",
    );
    const extra = refusal(() => checkArguments("notes-1", notes, { text: "x", rm: true }));
    expect(extra.code).toBe("invalid_arguments");
  });

  it("only schemas without any regular expression may be checked on the main thread", () => {
    expect(hasRegex(notes)).toBe(false);
    expect(hasRegex(hostile)).toBe(true);
    expect(hasRegex({ type: "object", patternProperties: { "^x": { type: "string" } } })).toBe(true);
    expect(hasRegex({ anyOf: [{ type: "string" }, { items: [{ pattern: "a+" }] }] })).toBe(true);
  });

  it("a regex-free schema gives the same answers once its checks move to the main thread", () => {
    const schema = { type: "object", properties: { n: { type: "integer" } }, required: ["n"] };
    const first = refusal(() => checkArguments("ints-1", schema, { n: "x" }));
    const again = refusal(() => checkArguments("ints-1", schema, { n: "x" }));
    expect(again.message).toBe(first.message);
    expect(again.code).toBe("invalid_arguments");
    expect(() => checkArguments("ints-1", schema, { n: 3 })).not.toThrow();
  });

  it("a schema that cannot be compiled makes the tool unusable", () => {
    const err = refusal(() =>
      checkArguments("broken-1", { type: "object", properties: { a: { type: 12 } } }, {}),
    );
    expect(err.code).toBe("tool_unusable");
  });

  it("a pattern that backtracks catastrophically is abandoned at the deadline instead of freezing the process", () => {
    const started = performance.now();
    const err = refusal(() => checkArguments("hostile-1", hostile, evilInput));
    const took = performance.now() - started;
    expect(err.code).toBe("tool_unusable");
    expect(err.message).toContain(`took over ${CHECK_DEADLINE_MS} ms`);
    // Well under what the pattern needs (minutes), a little over the deadline.
    expect(took).toBeLessThan(CHECK_DEADLINE_MS + 3000);

    // That definition is refused at once from now on, and other tools are checked as before.
    const again = performance.now();
    expect(refusal(() => checkArguments("hostile-1", hostile, { name: "a" })).code).toBe("tool_unusable");
    expect(performance.now() - again).toBeLessThan(50);
    expect(() => checkArguments("notes-1", notes, { text: "after the hostile one" })).not.toThrow();
    expect(refusal(() => checkArguments("notes-1", notes, { text: 3 })).message).toBe(
      "arguments.text must be string",
    );
  });
});
