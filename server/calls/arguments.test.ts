/**
 * Arguments are checked against untrusted input schemas without letting a schema or an argument
 * freeze the process (docs/ARCHITECTURE.md, threat model: a hostile `pattern`, a quadratic
 * `uniqueItems`, an argument of megabytes or nested thousands of levels deep).
 */
import { describe, expect, it } from "vitest";
import { GatehouseError } from "@/lib/errors";
import { workerChecksPosted } from "./argument-checker";
import {
  ARGUMENT_LIMITS,
  CHECK_DEADLINE_MS,
  checkArguments,
  checkedOnMainThread,
  mainThreadSchema,
  recordedArguments,
} from "./arguments";

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
const unique = {
  type: "object",
  properties: { xs: { type: "array", uniqueItems: true } },
};
const agent = (name: string) => ({ kind: "agent", name });
const A = agent("agent-a");

/** Distinct numbers 0..n-1: every pair differs, so `uniqueItems` compares them all. */
const distinct = (n: number) => Array.from({ length: n }, (_, i) => i);

function refusal(fn: () => void): GatehouseError {
  try {
    fn();
  } catch (err) {
    if (err instanceof GatehouseError) return err;
    throw err;
  }
  throw new Error("expected a refusal");
}

/** `{"a":{"a":…}}` `levels` deep, built by the parser (which, unlike most code, is not recursive). */
function nested(levels: number): Record<string, unknown> {
  return JSON.parse(`${'{"a":'.repeat(levels)}1${"}".repeat(levels)}`) as Record<string, unknown>;
}

describe("checking arguments against a tool's input schema", () => {
  it("a tool whose schema names itself with a root $id stays callable after its definition changes", () => {
    // Two definitions (the tool before and after a change, or two tools) with one root $id: each
    // compiled on its own, never refused because the other was compiled first.
    const before = {
      $id: "https://tools.example/notes",
      type: "object",
      properties: { text: { type: "string" } },
    };
    const after = { ...before, properties: { text: { type: "string" }, tag: { type: "string" } } };
    for (const [hash, schema] of [
      ["ids-1", before],
      ["ids-2", after],
    ] as const) {
      expect(() => checkArguments(hash, schema, { text: "x" }, A)).not.toThrow();
      // Past the fast path too: a pattern keeps it in the worker.
      const slow = {
        ...schema,
        properties: { ...schema.properties, code: { type: "string", pattern: "^a+$" } },
      };
      expect(() => checkArguments(`${hash}-slow`, slow, { text: "x", code: "aa" }, A)).not.toThrow();
    }
  });

  it("names the bad field, the missing property and an unexpected one", () => {
    expect(() => checkArguments("notes-1", notes, { text: "hello", tags: ["a"] }, A)).not.toThrow();
    expect(refusal(() => checkArguments("notes-1", notes, { text: "x", tags: [1] }, A)).message).toBe(
      "arguments.tags.0 must be string",
    );
    expect(refusal(() => checkArguments("notes-1", notes, {}, A)).message).toBe(
      "arguments must have required property 'text' (missing text)",
    );
    const extra = refusal(() => checkArguments("notes-1", notes, { text: "x", rm: true }, A));
    expect(extra.code).toBe("invalid_arguments");
  });

  it("only schemas without costly keywords may be checked on the main thread", () => {
    expect(mainThreadSchema(notes)).toBe(true);
    expect(mainThreadSchema(hostile)).toBe(false);
    expect(mainThreadSchema({ type: "object", patternProperties: { "^x": { type: "string" } } })).toBe(false);
    expect(mainThreadSchema({ anyOf: [{ type: "string" }, { items: [{ pattern: "a+" }] }] })).toBe(false);
    expect(mainThreadSchema(unique)).toBe(false);
    expect(mainThreadSchema({ type: "string", format: "email" })).toBe(false);
    expect(mainThreadSchema({ $defs: { n: { type: "array" } }, items: { $ref: "#/$defs/n" } })).toBe(false);
    const huge = { type: "string", enum: distinct(500).map(String) };
    expect(mainThreadSchema(huge)).toBe(false);
  });

  it("arguments are checked on the main thread only when small for that schema", () => {
    expect(checkedOnMainThread(notes, { text: "hello", tags: ["a", "b"] })).toBe(true);
    expect(checkedOnMainThread(notes, { text: "x".repeat(100 * 1024) })).toBe(false);
    expect(checkedOnMainThread(hostile, { name: "a" })).toBe(false);
    // A schema of 190 values with 8 KiB of arguments: small each, too much work together.
    const wide = { type: "object", properties: { v: { enum: distinct(185) } } };
    expect(checkedOnMainThread(wide, { v: 1 })).toBe(true);
    expect(checkedOnMainThread(wide, { v: 1, pad: "x".repeat(8 * 1024) })).toBe(false);
  });

  it("a regex-free schema gives the same answers once its checks move to the main thread", () => {
    const schema = { type: "object", properties: { n: { type: "integer" } }, required: ["n"] };
    const first = refusal(() => checkArguments("ints-1", schema, { n: "x" }, A));
    const again = refusal(() => checkArguments("ints-1", schema, { n: "x" }, A));
    expect(again.message).toBe(first.message);
    expect(again.code).toBe("invalid_arguments");
    expect(() => checkArguments("ints-1", schema, { n: 3 }, A)).not.toThrow();
  });

  it("a schema that cannot be compiled makes the tool unusable", () => {
    const err = refusal(() =>
      checkArguments("broken-1", { type: "object", properties: { a: { type: 12 } } }, {}, A),
    );
    expect(err.code).toBe("tool_unusable");
  });

  it("a schema that fails to compile is refused without recompiling on each call", () => {
    const broken = { type: "object", properties: { a: { type: 12 } } };
    expect(refusal(() => checkArguments("broken-2", broken, {}, A)).code).toBe("tool_unusable");
    const posted = workerChecksPosted();
    for (let i = 0; i < 5; i++) {
      expect(refusal(() => checkArguments("broken-2", broken, {}, agent(`other-${i}`))).code).toBe(
        "tool_unusable",
      );
    }
    expect(workerChecksPosted()).toBe(posted);
  });

  it("a pattern that backtracks catastrophically is abandoned at the deadline, and the tool stays callable", () => {
    const err = refusal(() => checkArguments("hostile-1", hostile, evilInput, agent("patient")));
    expect(err.code).toBe("invalid_arguments");
    expect(err.message).toContain(`took over ${CHECK_DEADLINE_MS} ms`);

    // One slow argument refuses that call only: the same agent, and others, call the tool again.
    expect(() => checkArguments("hostile-1", hostile, { name: "a" }, agent("patient"))).not.toThrow();
    expect(() => checkArguments("hostile-1", hostile, { name: "aa" }, agent("other"))).not.toThrow();
    expect(() => checkArguments("notes-1", notes, { text: "after the hostile one" }, A)).not.toThrow();
    expect(refusal(() => checkArguments("notes-1", notes, { text: 3 }, A)).message).toBe(
      "arguments.text must be string",
    );
  });
});

describe("no argument can freeze the process", () => {
  // Without the fix the second check ran on the main thread and compared ~10^10 pairs: minutes,
  // far past this timeout. With it, the check ends at the deadline.
  it("an array under uniqueItems as large as the size bound allows is checked within the deadline", {
    timeout: 15_000,
  }, () => {
    const who = agent("unique-big");
    expect(() => checkArguments("unique-1", unique, { xs: [1, 2, 3] }, who)).not.toThrow();
    const xs = distinct(150_000);
    expect(JSON.stringify({ xs }).length).toBeLessThan(ARGUMENT_LIMITS.maxBytes);
    const err = refusal(() => checkArguments("unique-1", unique, { xs }, who));
    expect(err.code).toBe("invalid_arguments");
    expect(err.message).toContain(`took over ${CHECK_DEADLINE_MS} ms`);
  });

  it("500,000 numbers under uniqueItems are refused at once by the size bound, and within the deadline past it", {
    timeout: 15_000,
  }, () => {
    const who = agent("unique-500k");
    const xs = distinct(500_000);
    expect(() => checkArguments("unique-2", unique, { xs: [1, 2] }, who)).not.toThrow();
    const bound = refusal(() => checkArguments("unique-2", unique, { xs }, who));
    expect(bound.code).toBe("invalid_arguments");
    expect(bound.message).toBe("arguments are over 1 MiB of JSON (1048576 bytes), the most a call may send");

    // A tool whose bound lets them through: the check still ends at the deadline.
    const limits = { maxBytes: 8 * 1024 * 1024 };
    const slow = refusal(() => checkArguments("unique-2", unique, { xs }, who, { limits }));
    expect(slow.message).toContain(`took over ${CHECK_DEADLINE_MS} ms`);
  });

  it("arguments over the size bound are refused with a plain message before any schema check", () => {
    const broken = { type: "object", properties: { a: { type: 12 } } };
    const big = { text: "x".repeat(ARGUMENT_LIMITS.maxBytes) };
    const err = refusal(() => checkArguments("broken-2", broken, big, A));
    expect(err.code).toBe("invalid_arguments");
    expect(err.message).toBe("arguments are over 1 MiB of JSON (1048576 bytes), the most a call may send");
    // Exactly at the bound is allowed (here: then the schema is looked at, and found broken).
    const fits = { text: "x".repeat(ARGUMENT_LIMITS.maxBytes - '{"text":""}'.length) };
    expect(refusal(() => checkArguments("broken-2", broken, fits, A)).code).toBe("tool_unusable");
  });

  it("a deeply nested argument is refused, not a crash", () => {
    for (const levels of [ARGUMENT_LIMITS.maxDepth + 1, 100_000]) {
      const err = refusal(() => checkArguments("notes-1", notes, nested(levels), A));
      expect(err.code).toBe("invalid_arguments");
      expect(err.message).toBe(
        `arguments are nested deeper than ${ARGUMENT_LIMITS.maxDepth} levels, the most a call may send`,
      );
    }
    // At the bound the schema decides.
    const deep = { text: "ok", ...nested(ARGUMENT_LIMITS.maxDepth) };
    expect(refusal(() => checkArguments("notes-1", notes, deep, A)).message).toBe(
      "arguments must NOT have additional properties",
    );
  });

  it("a refused call keeps a note instead of arguments over the bounds", () => {
    const small = { text: "hello" };
    expect(recordedArguments(small)).toBe(small);
    const kept = recordedArguments(nested(100_000));
    expect(kept).toEqual({
      "(not kept)": `arguments are nested deeper than ${ARGUMENT_LIMITS.maxDepth} levels, the most a call may send`,
    });
    expect(
      JSON.stringify(recordedArguments({ text: "x".repeat(2 * ARGUMENT_LIMITS.maxBytes) })).length,
    ).toBeLessThan(200);
  });
});
