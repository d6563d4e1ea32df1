import { describe, expect, it } from "vitest";
import {
  emptyItem,
  type Field,
  type FormValue,
  formArguments,
  formModel,
  initialValues,
  type ListField,
  MAX_FIELDS,
  MAX_NESTING,
  type ObjectField,
  replaceAt,
  valuesFromArguments,
} from "./schema-form";

function fieldsOf(schema: unknown): Field[] {
  const model = formModel(schema);
  if (!model.ok) throw new Error(`not a form: ${model.reason}`);
  return model.fields;
}

function field(fields: readonly Field[], name: string): Field {
  const found = fields.find((f) => f.name === name);
  if (!found) throw new Error(`no field ${name}`);
  return found;
}

/** The values with the named top-level fields set, the others as they start. */
function withValues(fields: readonly Field[], set: Record<string, FormValue>): FormValue[] {
  return fields.map((f) => (Object.hasOwn(set, f.name) ? (set[f.name] as FormValue) : f.initial));
}

/** server-everything's get-annotated-message, as it lists it. */
const annotatedMessage = {
  type: "object",
  properties: {
    messageType: { type: "string", enum: ["error", "success", "debug"], description: "Type of message" },
    includeImage: { default: false, description: "Whether to include an example image", type: "boolean" },
  },
  required: ["messageType"],
  $schema: "http://json-schema.org/draft-07/schema#",
};

describe("reading an input schema into fields", () => {
  it("gives each property the control its type calls for, with its name, title, type, hint and required mark", () => {
    const fields = fieldsOf({
      type: "object",
      properties: {
        text: { type: "string", title: "Text", description: "What to say" },
        site: { type: "string", format: "uri" },
        mail: { type: "string", format: "email" },
        count: { type: "integer", minimum: 1, maximum: 10 },
        ratio: { type: "number", exclusiveMinimum: 0 },
        force: { type: "boolean" },
        mode: { type: "string", enum: ["fast", "safe"] },
      },
      required: ["text", "force"],
    });
    expect(fields.map((f) => [f.name, f.kind, f.typeLabel, f.required])).toEqual([
      ["text", "text", "string", true],
      ["site", "text", "string (uri)", false],
      ["mail", "text", "string (email)", false],
      // A number's range is in its label: the field is a text box, with no spinner to show it.
      ["count", "number", "integer, 1 to 10", false],
      ["ratio", "number", "number, above 0", false],
      ["force", "boolean", "boolean", true],
      ["mode", "select", "string", false],
    ]);
    expect(field(fields, "text")).toMatchObject({ title: "Text", description: "What to say", path: "text" });
    expect(field(fields, "site")).toMatchObject({ inputType: "url" });
    expect(field(fields, "mail")).toMatchObject({ inputType: "email" });
    expect(field(fields, "count")).toMatchObject({ integer: true, minimum: 1, maximum: 10 });
    expect(field(fields, "ratio")).toMatchObject({ integer: false, exclusiveMinimum: 0 });
    expect(field(fields, "mode")).toMatchObject({
      options: [
        { label: "fast", value: "fast" },
        { label: "safe", value: "safe" },
      ],
    });
  });

  it("reads a const, and oneOf of consts with titles, as a select", () => {
    const fields = fieldsOf({
      type: "object",
      properties: {
        only: { const: 7 },
        speed: {
          oneOf: [
            { const: "s", title: "Slow" },
            { const: "f", title: "Fast" },
          ],
        },
      },
    });
    expect(field(fields, "only")).toMatchObject({ kind: "select", options: [{ label: "7", value: 7 }] });
    expect(field(fields, "speed")).toMatchObject({
      kind: "select",
      options: [
        { label: "Slow", value: "s" },
        { label: "Fast", value: "f" },
      ],
    });
  });

  it("reads a nullable value (anyOf with null, or a type list with null) as its one other type", () => {
    const fields = fieldsOf({
      type: "object",
      properties: {
        note: { anyOf: [{ type: "string" }, { type: "null" }], default: null, title: "Note" },
        size: { type: ["integer", "null"] },
      },
    });
    expect(field(fields, "note")).toMatchObject({ kind: "text", title: "Note", initial: "" });
    expect(field(fields, "size")).toMatchObject({ kind: "number", integer: true });
  });

  it("nests objects as fieldsets, down to a bounded depth, beyond which a property is JSON", () => {
    let deep: Record<string, unknown> = { type: "string" };
    for (let i = 0; i < MAX_NESTING + 2; i++) deep = { type: "object", properties: { inner: deep } };
    const fields = fieldsOf({ type: "object", properties: { outer: deep } });
    let current: Field | undefined = fields[0];
    const kinds: string[] = [];
    while (current) {
      kinds.push(current.kind);
      current = current.kind === "object" ? current.fields[0] : undefined;
    }
    expect(kinds).toEqual([...Array(MAX_NESTING).fill("object"), "json"]);
    const first = fields[0] as ObjectField;
    expect(first.fields[0]).toMatchObject({ path: "outer.inner", key: "0.0" });
  });

  it("makes arrays of simple items lists, and arrays of objects or unknown items JSON", () => {
    const fields = fieldsOf({
      type: "object",
      properties: {
        tags: { type: "array", items: { type: "string" }, minItems: 1, maxItems: 3 },
        sizes: { type: "array", items: { type: "integer", minimum: 0 } },
        flags: { type: "array", items: { type: "boolean" } },
        modes: { type: "array", items: { enum: ["a", "b"] } },
        legs: { type: "array", items: { type: "object", properties: { to: { type: "string" } } } },
        anything: { type: "array" },
      },
    });
    expect(field(fields, "tags")).toMatchObject({
      kind: "list",
      typeLabel: "array of string",
      minItems: 1,
      maxItems: 3,
      item: { kind: "text" },
    });
    expect(field(fields, "sizes")).toMatchObject({
      kind: "list",
      item: { kind: "number", integer: true, minimum: 0 },
    });
    expect(field(fields, "flags")).toMatchObject({ kind: "list", item: { kind: "boolean" } });
    expect(field(fields, "modes")).toMatchObject({ kind: "list", item: { kind: "select" } });
    expect(field(fields, "legs")).toMatchObject({
      kind: "json",
      expect: "array",
      reason: "its items are objects",
    });
    expect(field(fields, "anything")).toMatchObject({
      kind: "json",
      reason: "its items are not of a simple type",
    });
  });

  it("writes as JSON what the form cannot represent, saying why", () => {
    const fields = fieldsOf({
      type: "object",
      properties: {
        ref: { $ref: "#/$defs/thing" },
        either: { anyOf: [{ type: "object", properties: {} }, { type: "array" }] },
        map: { type: "object", additionalProperties: { type: "string" } },
        loose: true,
        nothing: {},
      },
      required: ["undescribed"],
    });
    expect(fields.map((f) => [f.name, f.kind, f.kind === "json" ? f.reason : ""])).toEqual([
      ["ref", "json", "it refers to another schema ($ref)"],
      ["either", "json", "it combines schemas (anyOf)"],
      ["map", "json", "its keys are not listed"],
      ["loose", "json", "any value is allowed"],
      ["nothing", "json", "its type is not given"],
      ["undescribed", "json", "it has no schema"],
    ]);
    expect(field(fields, "undescribed").required).toBe(true);
  });

  it("a schema without properties, or no schema, is a form of no fields", () => {
    expect(formModel({ type: "object", properties: {} })).toEqual({ ok: true, fields: [] });
    expect(formModel({ type: "object" })).toEqual({ ok: true, fields: [] });
    expect(formModel(null)).toEqual({ ok: true, fields: [] });
  });

  it("a schema the form cannot take at all says why, so the dialog starts with raw JSON", () => {
    expect(formModel([1])).toEqual({ ok: false, reason: "its input schema is not an object" });
    expect(formModel({ anyOf: [{ type: "object" }] })).toEqual({
      ok: false,
      reason: "its input schema combines schemas (anyOf)",
    });
    expect(formModel({ type: "string" })).toEqual({
      ok: false,
      reason: "its input schema is not of type object",
    });
    const huge = Object.fromEntries(
      Array.from({ length: MAX_FIELDS + 1 }, (_, i) => [`p${i}`, { type: "string" }]),
    );
    expect(formModel({ type: "object", properties: huge })).toEqual({
      ok: false,
      reason: `its input schema has more than ${MAX_FIELDS} fields`,
    });
  });

  it("keeps 200 properties in order, each its own field", () => {
    const properties = Object.fromEntries(
      Array.from({ length: 200 }, (_, i) => [`p${i}`, { type: "string" }]),
    );
    const fields = fieldsOf({ type: "object", properties });
    expect(fields).toHaveLength(200);
    expect(fields[199]).toMatchObject({ name: "p199", key: "199" });
  });

  it("prefills defaults that fit their field, and ignores those that do not", () => {
    const fields = fieldsOf({
      type: "object",
      properties: {
        name: { type: "string", default: "README.md.gz" },
        count: { type: "number", default: 3 },
        bad: { type: "number", default: "three" },
        kind: { type: "string", enum: ["Text", "Blob"], default: "Blob" },
        off: { type: "string", enum: ["a"], default: "z" },
        image: { type: "boolean", default: false },
        tags: { type: "array", items: { type: "string" }, default: ["x", "y"] },
        blob: { $ref: "#/x", default: { a: 1 } },
        nested: { type: "object", properties: { n: { type: "integer", default: 2 } } },
      },
    });
    expect(initialValues(fields)).toEqual([
      "README.md.gz",
      "3",
      "",
      1,
      null,
      false,
      ["x", "y"],
      '{\n  "a": 1\n}',
      ["2"],
    ]);
  });
});

describe("turning the form's values into arguments", () => {
  it("sends nothing until a required field is filled, and names what is missing", () => {
    const fields = fieldsOf({
      type: "object",
      properties: { text: { type: "string", minLength: 1 } },
      required: ["text"],
    });
    expect(formArguments(fields, initialValues(fields))).toEqual({
      value: {},
      problems: [{ key: "0", message: "Fill in text", missing: true }],
    });
    expect(formArguments(fields, ["ship it"])).toEqual({ value: { text: "ship it" }, problems: [] });
  });

  it("leaves optional fields left empty out of the arguments", () => {
    const fields = fieldsOf(annotatedMessage);
    const values = withValues(fields, { messageType: 1, includeImage: null });
    expect(formArguments(fields, values)).toEqual({ value: { messageType: "success" }, problems: [] });
    // Its default prefills it, so as it starts it is sent.
    expect(formArguments(fields, withValues(fields, { messageType: 0 })).value).toEqual({
      messageType: "error",
      includeImage: false,
    });
    expect(formArguments(fields, initialValues(fields)).problems).toEqual([
      { key: "0", message: "Choose messageType", missing: true },
    ]);
  });

  it("sends numbers as numbers, and refuses ones that are not whole, out of range or not numbers", () => {
    const fields = fieldsOf({
      type: "object",
      properties: {
        count: { type: "integer", minimum: 1, maximum: 10 },
        ratio: { type: "number", exclusiveMinimum: 0, exclusiveMaximum: 1 },
      },
      required: ["count"],
    });
    expect(formArguments(fields, ["4", "0.5"])).toEqual({ value: { count: 4, ratio: 0.5 }, problems: [] });
    const messages = (values: FormValue[]) => formArguments(fields, values).problems.map((p) => p.message);
    expect(messages(["2.5", ""])).toEqual(["count must be a whole number"]);
    expect(messages(["0", "1"])).toEqual(["count must be at least 1", "ratio must be less than 1"]);
    expect(messages(["11", "0"])).toEqual(["count must be at most 10", "ratio must be more than 0"]);
    expect(messages(["0x10", "1e"])).toEqual(["count must be a number", "ratio must be a number"]);
    expect(formArguments(fields, ["abc", ""]).problems[0]?.missing).toBe(false);
  });

  it("checks a string's length in characters as JSON Schema counts them", () => {
    const fields = fieldsOf({
      type: "object",
      properties: { code: { type: "string", minLength: 2, maxLength: 3 } },
    });
    expect(formArguments(fields, ["a"]).problems.map((p) => p.message)).toEqual([
      "code must be at least 2 characters",
    ]);
    expect(formArguments(fields, ["abcd"]).problems.map((p) => p.message)).toEqual([
      "code must be at most 3 characters",
    ]);
    // Two code points, four UTF-16 units.
    expect(formArguments(fields, ["😀😀"]).problems).toEqual([]);
  });

  it("sends a required checkbox as false when unticked, and an optional boolean only when set", () => {
    const fields = fieldsOf({
      type: "object",
      properties: { force: { type: "boolean" }, dry: { type: "boolean" } },
      required: ["force"],
    });
    expect(initialValues(fields)).toEqual([false, null]);
    expect(formArguments(fields, [false, null]).value).toEqual({ force: false });
    expect(formArguments(fields, [true, false]).value).toEqual({ force: true, dry: false });
  });

  it("sends the listed value of a choice, whatever its type", () => {
    const fields = fieldsOf({ type: "object", properties: { level: { enum: [1, "two", null, { x: 1 }] } } });
    expect(formArguments(fields, [3]).value).toEqual({ level: { x: 1 } });
    expect(formArguments(fields, [2]).value).toEqual({ level: null });
    expect(formArguments(fields, [null]).value).toEqual({});
  });

  it("sends a nested object with what was entered in it; an optional one with nothing entered is left out", () => {
    const fields = fieldsOf({
      type: "object",
      properties: {
        traveller: {
          type: "object",
          properties: {
            name: { type: "string" },
            contact: {
              type: "object",
              properties: { email: { type: "string" }, sms: { type: "boolean" } },
              required: ["sms"],
            },
          },
          required: ["name"],
        },
        options: {
          type: "object",
          properties: { fast: { type: "boolean" }, note: { type: "string" } },
          required: ["fast"],
        },
      },
      required: ["traveller"],
    });
    const start = initialValues(fields);
    expect(start).toEqual([
      ["", ["", false]],
      [false, ""],
    ]);
    expect(formArguments(fields, start)).toEqual({
      value: { traveller: {} },
      problems: [{ key: "0.0", message: "Fill in traveller.name", missing: true }],
    });
    expect(
      formArguments(fields, [
        ["Ada", ["", false]],
        [false, ""],
      ]),
    ).toEqual({
      value: { traveller: { name: "Ada" } },
      problems: [],
    });
    expect(
      formArguments(fields, [
        ["Ada", ["a@b.c", false]],
        [false, "hurry"],
      ]).value,
    ).toEqual({
      traveller: { name: "Ada", contact: { email: "a@b.c", sms: false } },
      options: { fast: false, note: "hurry" },
    });
  });

  it("sends a list's items in order, checking each, and its item count", () => {
    const fields = fieldsOf({
      type: "object",
      properties: {
        stops: { type: "array", items: { type: "string" }, minItems: 1, maxItems: 2 },
        nights: { type: "array", items: { type: "integer", minimum: 1 } },
      },
      required: ["stops"],
    });
    expect(formArguments(fields, [[], []])).toEqual({
      value: { stops: [] },
      problems: [{ key: "0", message: "Add at least 1 item to stops", missing: true }],
    });
    expect(
      formArguments(fields, [
        ["Oslo", "Rome"],
        ["2", "3"],
      ]),
    ).toEqual({
      value: { stops: ["Oslo", "Rome"], nights: [2, 3] },
      problems: [],
    });
    expect(formArguments(fields, [["Oslo", "", "Rome"], ["0"]]).problems).toEqual([
      { key: "0#1", message: "Fill in stops item 2 or remove it", missing: true },
      { key: "0", message: "stops takes at most 2 items", missing: false },
      { key: "1#0", message: "nights item 1 must be at least 1", missing: false },
    ]);
    const stops = field(fields, "stops") as ListField;
    expect(emptyItem(stops)).toBe("");
  });

  it("sends a JSON field's parsed value, and refuses broken JSON or the wrong type", () => {
    const fields = fieldsOf({
      type: "object",
      properties: { legs: { type: "array", items: { type: "object" } }, ref: { $ref: "#/x" } },
      required: ["legs"],
    });
    expect(formArguments(fields, ['[{"to": "Oslo"}]', ""])).toEqual({
      value: { legs: [{ to: "Oslo" }] },
      problems: [],
    });
    expect(formArguments(fields, ["[", "{}"]).problems.map((p) => p.message)).toEqual([
      "legs is not valid JSON",
    ]);
    expect(formArguments(fields, ['{"to": 1}', "3"]).problems.map((p) => p.message)).toEqual([
      "legs must be JSON of type array",
    ]);
    expect(formArguments(fields, ["[]", "3"]).value).toEqual({ legs: [], ref: 3 });
  });

  it("keeps a property named like an object's own internals as a plain key", () => {
    const fields = fieldsOf(JSON.parse('{"type":"object","properties":{"__proto__":{"type":"string"}}}'));
    const { value } = formArguments(fields, ["x"]);
    expect(Object.keys(value)).toEqual(["__proto__"]);
    expect(JSON.stringify(value)).toBe('{"__proto__":"x"}');
  });

  it("a form of no fields sends {}", () => {
    expect(formArguments([], [])).toEqual({ value: {}, problems: [] });
  });
});

describe("reading raw JSON back into the form", () => {
  const fields = fieldsOf({
    type: "object",
    properties: {
      text: { type: "string" },
      count: { type: "integer", default: 5 },
      mode: { enum: ["fast", "safe"] },
      force: { type: "boolean" },
      tags: { type: "array", items: { type: "string" } },
      nested: { type: "object", properties: { id: { type: "string" } } },
      blob: { $ref: "#/x" },
    },
    required: ["force"],
  });

  it("fills each field from its property, and leaves the others empty rather than at their defaults", () => {
    const read = valuesFromArguments(fields, {
      text: "hi",
      mode: "safe",
      tags: ["a"],
      nested: { id: "7" },
      blob: [1],
    });
    expect(read).toEqual({ ok: true, values: ["hi", "", 1, false, ["a"], ["7"], "[\n  1\n]"] });
    if (!read.ok) return;
    expect(formArguments(fields, read.values).value).toEqual({
      text: "hi",
      mode: "safe",
      force: false,
      tags: ["a"],
      nested: { id: "7" },
      blob: [1],
    });
  });

  it("goes there and back without losing anything", () => {
    const values = withValues(fields, {
      text: "x",
      count: "2",
      mode: 0,
      force: true,
      tags: ["p", "q"],
      nested: ["i"],
    });
    const sent = formArguments(fields, values).value;
    const back = valuesFromArguments(fields, sent);
    expect(back.ok && formArguments(fields, back.values).value).toEqual(sent);
  });

  it("says why it cannot: an unknown key, a value of the wrong type, a value not among the choices", () => {
    expect(valuesFromArguments(fields, { other: 1 })).toEqual({
      ok: false,
      message: "the form has no field other",
    });
    expect(valuesFromArguments(fields, { nested: { x: 1 } })).toEqual({
      ok: false,
      message: "the form has no field nested.x",
    });
    expect(valuesFromArguments(fields, { count: "5" })).toEqual({
      ok: false,
      message: "count must be a number for the form",
    });
    expect(valuesFromArguments(fields, { mode: "slow" })).toEqual({
      ok: false,
      message: "mode is not one of its choices",
    });
    expect(valuesFromArguments(fields, { tags: ["a", 2] })).toEqual({
      ok: false,
      message: "tags item 2 must be a string for the form",
    });
  });
});

describe("editing values", () => {
  it("replaceAt changes one value and leaves the array it was given alone", () => {
    const before: FormValue[] = ["a", "b"];
    expect(replaceAt(before, 1, "c")).toEqual(["a", "c"]);
    expect(before).toEqual(["a", "b"]);
  });
});
