/**
 * Cleaning what a tool server says (definition.ts): which characters go, how texts are capped,
 * which strings of a schema are texts (cleaned) and which are what an agent must send (kept),
 * and what the definition hash covers.
 */
import type { Tool } from "@modelcontextprotocol/client";
import { Ajv } from "ajv";
import { describe, expect, it } from "vitest";
import { cleanDescription, cleanSchema, definitionHash, definitionOf, localNameProblem } from "./definition";

/** One sample of each class the cleaner must strip, by name. */
const HIDDEN: Record<string, string> = {
  "tag characters U+E0000–E007F": "\u{E0000}\u{E0001}\u{E0041}\u{E0067}\u{E007F}",
  "variation selectors U+FE00–FE0F": "\uFE00\uFE0F",
  "variation selectors U+E0100–E01EF": "\u{E0100}\u{E01EF}",
  "U+2060–2064": "\u2060\u2061\u2062\u2063\u2064",
  "U+061C": "\u061C",
  "U+180E": "\u180E",
  "U+00AD": "\u00AD",
  "bidi marks U+200E/200F": "\u200E\u200F",
  "bidi embeddings and overrides U+202A–202E": "\u202A\u202B\u202C\u202D\u202E",
  "bidi isolates U+2066–2069": "\u2066\u2067\u2068\u2069",
  "zero-width U+200B–200D, U+FEFF": "\u200B\u200C\u200D\uFEFF",
  "C0 controls but tab and newline": "\u0000\u0007\u000B\u000D\u001B\u001F",
  "DEL and C1 controls": "\u007F\u0085\u009B\u009F",
  "interlinear annotations U+FFF9–FFFB": "\uFFF9\uFFFA\uFFFB",
  "an unpaired surrogate": "\uD800",
};

describe("cleanDescription", () => {
  for (const [what, chars] of Object.entries(HIDDEN)) {
    it(`strips ${what}`, () => {
      expect(cleanDescription(`a${chars}b`)).toBe("ab");
    });
  }

  it("turns the line and paragraph separators U+2028/U+2029 into newlines", () => {
    expect(cleanDescription("one\u2028two\u2029three")).toBe("one\ntwo\nthree");
  });

  it("keeps tab, newline, accents, scripts and emoji", () => {
    const text = "Grüße\tdu\nمرحبا 日本 👋 😀";
    expect(cleanDescription(text)).toBe(text);
  });

  it("caps at maxChars with an ellipsis, never cutting a character in two", () => {
    expect(cleanDescription("abcdefghij", 5)).toBe("abcd…");
    expect(cleanDescription("abcde", 5)).toBe("abcde");
    // "abc😀": cut after 4 units would leave half of the emoji.
    expect(cleanDescription("abc😀def", 5)).toBe("abc…");
    // The cap counts what is left once hidden characters are gone.
    expect(cleanDescription(`ab\u{E0041}\u{E0042}\u{E0043}cd`, 4)).toBe("abcd");
  });
});

describe("cleanSchema", () => {
  const all = Object.values(HIDDEN).join("");

  it("cleans and caps titles, descriptions, comments and vendor texts at any depth", () => {
    const schema = {
      type: "object",
      title: `T${all}`,
      description: `D${all}`,
      $comment: `C${all}`,
      "x-hint": [`H${all}`, { note: `N${all}` }],
      properties: {
        a: { type: "string", description: `A${all}`, title: "x".repeat(50) },
        list: { type: "array", items: [{ description: `I${all}` }], prefixItems: [{ title: `P${all}` }] },
        either: { anyOf: [{ description: `1${all}` }, { not: { description: `2${all}` } }] },
      },
      $defs: { d: { description: `Def${all}` } },
      definitions: { e: { if: { description: `If${all}` }, else: true } },
      additionalProperties: { description: `More${all}` },
    };
    expect(cleanSchema(schema, 10)).toEqual({
      type: "object",
      title: "T",
      description: "D",
      $comment: "C",
      "x-hint": ["H", { note: "N" }],
      properties: {
        a: { type: "string", description: "A", title: `${"x".repeat(9)}…` },
        list: { type: "array", items: [{ description: "I" }], prefixItems: [{ title: "P" }] },
        either: { anyOf: [{ description: "1" }, { not: { description: "2" } }] },
      },
      $defs: { d: { description: "Def" } },
      definitions: { e: { if: { description: "If" }, else: true } },
      additionalProperties: { description: "More" },
    });
  });

  it("keeps property names and the values an agent sends exactly as listed; cleans default and examples", () => {
    const z = "\u200B";
    const schema = {
      type: ["object", "null"],
      properties: {
        [`name${z}`]: { type: "string", enum: [`a${z}`, "b"], default: `a${z}`, examples: [`a${z}`] },
        // Properties named like keywords are properties: their schemas are cleaned.
        type: { type: "string", description: `kind${z}`, const: `k${z}` },
        description: { type: "string", description: `text${z}`, pattern: `^x${z}$`, format: "email" },
        enum: { description: `e${z}` },
        ["__proto__"]: { description: `p${z}` },
      },
      patternProperties: { [`^p${z}`]: { description: `pp${z}` } },
      dependencies: { [`name${z}`]: [`type${z}`], type: { description: `dep${z}` } },
      dependentRequired: { a: [`b${z}`] },
      required: [`name${z}`],
      $ref: `#/$defs/x${z}`,
    };
    const clean = cleanSchema(schema) as typeof schema;
    expect(clean.type).toEqual(["object", "null"]);
    expect(Object.keys(clean.properties)).toEqual([`name${z}`, "type", "description", "enum", "__proto__"]);
    // What an agent sends stays; `default` and `examples` are text a model reads: cleaned.
    expect(clean.properties[`name${z}`]).toEqual({
      type: "string",
      enum: [`a${z}`, "b"],
      default: "a",
      examples: ["a"],
    });
    expect(clean.properties.type).toEqual({ type: "string", description: "kind", const: `k${z}` });
    expect(clean.properties.description).toEqual({
      type: "string",
      description: "text",
      pattern: `^x${z}$`,
      format: "email",
    });
    expect(clean.properties.enum).toEqual({ description: "e" });
    expect(Object.getOwnPropertyDescriptor(clean.properties, "__proto__")?.value).toEqual({
      description: "p",
    });
    expect(clean.patternProperties).toEqual({ [`^p${z}`]: { description: "pp" } });
    expect(clean.dependencies).toEqual({ [`name${z}`]: [`type${z}`], type: { description: "dep" } });
    expect(clean.dependentRequired).toEqual(schema.dependentRequired);
    expect(clean.required).toEqual(schema.required);
    expect(clean.$ref).toBe(schema.$ref);
  });

  it("accepts and refuses the same arguments as the schema as listed", () => {
    const z = "\u200B";
    const schema = {
      type: "object",
      description: `Pick${z}`,
      properties: {
        kind: { type: "string", enum: ["noun", `verb${z}`], description: `The kind${z}` },
        code: { type: "string", pattern: `^a${z}b$`, title: `Code${z}` },
        fixed: { const: `c${z}` },
        items: { $ref: "#/$defs/list" },
      },
      $defs: { list: { type: "array", items: { type: "integer" }, description: `List${z}` } },
      required: ["kind"],
      additionalProperties: false,
    };
    const ajv = new Ajv({ strict: false, allErrors: false, validateSchema: false });
    const raw = ajv.compile(schema);
    const clean = ajv.compile(cleanSchema(schema, 8) as object);
    const samples: unknown[] = [
      { kind: "noun" },
      { kind: `verb${z}` },
      { kind: "verb" },
      { kind: "noun", code: `a${z}b` },
      { kind: "noun", code: "ab" },
      { kind: "noun", fixed: `c${z}` },
      { kind: "noun", fixed: "c" },
      { kind: "noun", items: [1, 2] },
      { kind: "noun", items: ["1"] },
      { kind: "noun", other: 1 },
      {},
    ];
    expect(samples.map((s) => clean(s))).toEqual(samples.map((s) => raw(s)));
    expect(samples.map((s) => raw(s))).toContain(true);
    expect(samples.map((s) => raw(s))).toContain(false);
  });

  it("leaves numbers, booleans, null and boolean schemas alone", () => {
    const schema = {
      type: "integer",
      minimum: 0,
      maximum: 9,
      additionalProperties: false,
      items: true,
      x: null,
    };
    expect(cleanSchema(schema)).toEqual(schema);
    expect(cleanSchema(null)).toBeNull();
    expect(cleanSchema(true)).toBe(true);
  });
});

describe("definitionOf and the definition hash", () => {
  const clean: Tool = {
    name: "lookup",
    title: "Word lookup",
    description: "Looks up a word.",
    inputSchema: { type: "object", properties: { word: { type: "string", description: "The word" } } },
    outputSchema: { type: "object", properties: { meaning: { type: "string", description: "Its meaning" } } },
    annotations: { title: "Look up", readOnlyHint: true },
  };
  const tags = "\u{E0049}\u{E0067}\u{E006E}\u{E006F}\u{E0072}\u{E0065}";
  const hidden: Tool = {
    name: `lookup${tags}`,
    title: `Word\u2060 lookup${tags}`,
    description: `Looks\u200B up\u202E a word.${tags}`,
    inputSchema: {
      type: "object",
      properties: { word: { type: "string", description: `The\uFE0F word${tags}` } },
    },
    outputSchema: {
      type: "object",
      properties: { meaning: { type: "string", description: `Its\u2066 meaning\u2069` } },
    },
    annotations: { title: `Look\u00AD up`, readOnlyHint: true },
  };

  it("holds the cleaned texts: name, title, description, both schemas and the annotations' strings", () => {
    expect(definitionOf(hidden)).toEqual(clean);
  });

  it("a definition that only adds hidden characters hashes the same: nothing anyone is shown changed", () => {
    expect(definitionHash(definitionOf(hidden))).toBe(definitionHash(definitionOf(clean)));
  });

  it("a visible change still changes the hash, in a schema text as anywhere", () => {
    const changed: Tool = {
      ...clean,
      inputSchema: { type: "object", properties: { word: { type: "string", description: "The words" } } },
    };
    expect(definitionHash(definitionOf(changed))).not.toBe(definitionHash(definitionOf(clean)));
  });

  it("every text is capped at maxChars, a schema property description included", () => {
    const long: Tool = {
      ...clean,
      description: "d".repeat(100),
      inputSchema: { type: "object", properties: { word: { type: "string", description: "w".repeat(100) } } },
      annotations: { title: "t".repeat(100) },
    };
    const def = definitionOf(long, 64);
    expect(def.description).toBe(`${"d".repeat(63)}…`);
    expect(def.inputSchema).toEqual({
      type: "object",
      properties: { word: { type: "string", description: `${"w".repeat(63)}…` } },
    });
    expect(def.annotations).toEqual({ title: `${"t".repeat(63)}…` });
  });

  it("annotation keys are never changed: a hint with a hidden character in its key is no hint", () => {
    const sneaky = { ...clean, annotations: { "readOnlyHint\u200B": true } } as unknown as Tool;
    expect(definitionOf(sneaky).annotations).toEqual({ "readOnlyHint\u200B": true });
  });
});

describe("localNameProblem", () => {
  it("names the hidden characters of a tool name", () => {
    expect(localNameProblem("srv", "delete\u200B\u{E0041}")).toBe(
      "the tool name has hidden characters (U+200B, U+E0041)",
    );
    expect(localNameProblem("srv", "delete")).toBeNull();
  });
});

describe("every default-ignorable character is hidden text", () => {
  it("Hangul fillers, Mongolian variation selectors and the combining grapheme joiner are stripped", () => {
    expect(cleanDescription("a\u3164b\u115Fc\u180Bd\u034Fe\u{E0080}f")).toBe("abcdef");
  });
});
