/**
 * The "Try" dialog's form, as data: a tool's input schema (JSON Schema from an untrusted MCP
 * server) read into fields, the values a person typed turned into the call's arguments, and what
 * stops the call while something is missing or wrong. No React here; components/schema-form.tsx
 * renders it.
 *
 * The form covers the shapes people meet in practice (strings, numbers, booleans, choices, nested
 * objects, lists of simple items); any part it cannot represent faithfully becomes a JSON text
 * field of its own, so nothing a schema allows is out of reach and nothing is guessed. The server
 * still checks the arguments against the whole schema (`POST /api/calls`): the form's own checks
 * only keep an attempt that is sure to be refused from being sent.
 */

/** Levels of fieldsets at most; an object nested deeper is written as JSON. */
export const MAX_NESTING = 4;
/** Fields at most in one form (nested ones counted); a bigger schema is written as raw JSON. */
export const MAX_FIELDS = 1000;
/** Choices at most in one select; a longer `enum` is written as JSON. */
export const MAX_OPTIONS = 500;

interface FieldBase {
  /** The property's name exactly as listed: the key its value is sent under. */
  name: string;
  /** Where it sits, for messages: the names from the top, joined by "." ("traveller.name"). */
  path: string;
  /** A key unique in the form: the field's position from the top ("3", "3.0"). */
  key: string;
  /** The schema's `title`, when it gives a non-empty one. */
  title: string | null;
  /** The schema's `description`, as plain text, when it gives a non-empty one. */
  description: string | null;
  /** Listed in its object's `required`: the call cannot be sent without it. */
  required: boolean;
  /** The type as a person reads it next to the label: "string", "integer", "array of string", "JSON". */
  typeLabel: string;
  /** The value the field starts with: the schema's `default` when it fits, else empty. */
  initial: FormValue;
}

export interface TextField extends FieldBase {
  kind: "text";
  /** The input type its `format` suggests: `uri` → url, `email` → email, `date` → date. */
  inputType: "text" | "url" | "email" | "date";
  minLength: number | null;
  maxLength: number | null;
}

export interface NumberField extends FieldBase {
  kind: "number";
  /** `type: "integer"`: whole numbers only. */
  integer: boolean;
  minimum: number | null;
  maximum: number | null;
  exclusiveMinimum: number | null;
  exclusiveMaximum: number | null;
}

/** A required boolean is a checkbox (always sent); an optional one is unset, true or false. */
export interface BooleanField extends FieldBase {
  kind: "boolean";
}

export interface SelectOption {
  /** What the person reads: the value itself for a string, its JSON otherwise, or the branch's title. */
  label: string;
  /** The value sent, exactly as listed. */
  value: unknown;
}

/** `enum`, `const`, or `oneOf`/`anyOf` whose every branch is a `const`. */
export interface SelectField extends FieldBase {
  kind: "select";
  options: SelectOption[];
}

export interface ObjectField extends FieldBase {
  kind: "object";
  fields: Field[];
}

/** The fields a list's items can be. */
export type ItemField = TextField | NumberField | BooleanField | SelectField;

export interface ListField extends FieldBase {
  kind: "list";
  /** What each item is; its `name` is "" and its `required` is true (an item is there or removed). */
  item: ItemField;
  minItems: number | null;
  maxItems: number | null;
}

/** A value the form cannot take apart, written as JSON. */
export interface JsonField extends FieldBase {
  kind: "json";
  /** Why it is JSON rather than a control, as the form says it ("uses $ref"). */
  reason: string;
  /** The JSON type the value must have, when the schema says one. */
  expect: JsonType | null;
}

export type Field =
  | TextField
  | NumberField
  | BooleanField
  | SelectField
  | ObjectField
  | ListField
  | JsonField;

type JsonType = "object" | "array" | "string" | "number" | "integer" | "boolean" | "null";

/**
 * What a field holds while a person edits it: the text typed (text, number and JSON fields), a
 * boolean (null: not set), the index of the chosen option (null: none), one value per child field
 * in order (object), or one value per item (list).
 */
export type FormValue = string | number | boolean | null | readonly FormValue[];

/** The form for one schema: its fields, or why it cannot be a form (then it is written as JSON). */
export type FormModel = { ok: true; fields: Field[] } | { ok: false; reason: string };

/** A reason the call cannot be sent yet. */
export interface FieldProblem {
  /** The {@link FieldBase.key} of the field it is about (an item's: the list's key, "#", its index). */
  key: string;
  message: string;
  /** Nothing was entered where something must be (rather than something wrong entered). */
  missing: boolean;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function text(value: unknown): string | null {
  return typeof value === "string" && value.trim() !== "" ? value : null;
}

function finite(value: unknown): number | null {
  return typeof value === "number" && Number.isFinite(value) ? value : null;
}

function count(value: unknown): number | null {
  return typeof value === "number" && Number.isInteger(value) && value >= 0 ? value : null;
}

const JSON_TYPES: readonly string[] = ["object", "array", "string", "number", "integer", "boolean", "null"];

/**
 * The one type a schema declares, ignoring "null" beside another (a nullable value is written
 * without its null here: "not sent" covers it for optional fields); null when it declares none or
 * several.
 */
function singleType(schema: Record<string, unknown>): string | null {
  if (typeof schema.type === "string") return schema.type;
  if (!Array.isArray(schema.type)) return null;
  const types = schema.type.filter((t) => t !== "null");
  return types.length === 1 && typeof types[0] === "string" ? types[0] : null;
}

/**
 * `anyOf: [X, {type: "null"}]` (how pydantic and zod write an optional value) read as X, with the
 * outer schema's title, description and default.
 */
function unwrapNullable(schema: Record<string, unknown>): Record<string, unknown> {
  for (const keyword of ["anyOf", "oneOf"] as const) {
    const branches = schema[keyword];
    if (!Array.isArray(branches)) continue;
    const others = branches.filter((b) => !(isObject(b) && b.type === "null" && Object.keys(b).length === 1));
    if (others.length !== 1 || others.length === branches.length || !isObject(others[0])) return schema;
    const { [keyword]: _dropped, ...outer } = schema;
    return { ...others[0], ...outer };
  }
  return schema;
}

function optionLabel(value: unknown): string {
  return typeof value === "string" ? value : JSON.stringify(value);
}

/** The choices a schema offers: its `enum`, its `const`, or branches that are each a `const`. */
function optionsOf(schema: Record<string, unknown>): SelectOption[] | null {
  if (Array.isArray(schema.enum)) return schema.enum.map((value) => ({ label: optionLabel(value), value }));
  if ("const" in schema) return [{ label: optionLabel(schema.const), value: schema.const }];
  for (const keyword of ["oneOf", "anyOf"] as const) {
    const branches = schema[keyword];
    if (!Array.isArray(branches) || branches.length === 0) continue;
    if (!branches.every((b) => isObject(b) && "const" in b)) return null;
    return branches.map((b) => {
      const branch = b as Record<string, unknown>;
      const title = text(branch.title);
      return { label: title ?? optionLabel(branch.const), value: branch.const };
    });
  }
  return null;
}

/** Structural equality of JSON values, for finding a listed choice again. */
function sameJson(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a) && Array.isArray(b))
    return a.length === b.length && a.every((x, i) => sameJson(x, b[i]));
  if (isObject(a) && isObject(b)) {
    const keys = Object.keys(a);
    return (
      keys.length === Object.keys(b).length && keys.every((k) => Object.hasOwn(b, k) && sameJson(a[k], b[k]))
    );
  }
  return false;
}

function optionIndex(options: readonly SelectOption[], value: unknown): number | null {
  const i = options.findIndex((o) => sameJson(o.value, value));
  return i === -1 ? null : i;
}

interface Place {
  name: string;
  path: string;
  key: string;
  required: boolean;
  /** Fieldsets around the field. */
  nesting: number;
}

/** Counts the fields built, so a schema of millions of properties stops early. */
interface Budget {
  left: number;
}

class TooManyFields extends Error {}

function prettyJsonText(value: unknown): string {
  return JSON.stringify(value, null, 2) ?? "";
}

function jsonField(
  base: Omit<FieldBase, "initial" | "typeLabel">,
  schema: unknown,
  reason: string,
): JsonField {
  const declared = isObject(schema) ? singleType(schema) : null;
  const expect = declared !== null && JSON_TYPES.includes(declared) ? (declared as JsonType) : null;
  const initial = isObject(schema) && "default" in schema ? prettyJsonText(schema.default) : "";
  return { ...base, kind: "json", reason, expect, typeLabel: expect ? `${expect} as JSON` : "JSON", initial };
}

/** The control for one value of a schema, or null when it is not one a list item can be. */
function leafField(
  base: Omit<FieldBase, "initial" | "typeLabel">,
  schema: Record<string, unknown>,
): ItemField | null {
  const type = singleType(schema);
  const options = optionsOf(schema);
  if (options !== null && options.length > 0 && options.length <= MAX_OPTIONS) {
    const initial = "default" in schema ? optionIndex(options, schema.default) : null;
    return { ...base, kind: "select", options, typeLabel: type ?? "choice", initial };
  }
  if (options !== null) return null;
  switch (type) {
    case "string": {
      const format = typeof schema.format === "string" ? schema.format : null;
      const inputType =
        format === "uri" || format === "url"
          ? "url"
          : format === "email" || format === "date"
            ? format
            : "text";
      return {
        ...base,
        kind: "text",
        inputType,
        minLength: count(schema.minLength),
        maxLength: count(schema.maxLength),
        typeLabel: format ? `string (${format})` : "string",
        initial: typeof schema.default === "string" ? schema.default : "",
      };
    }
    case "number":
    case "integer": {
      const fallback = finite(schema.default);
      const bounds = {
        minimum: finite(schema.minimum),
        maximum: finite(schema.maximum),
        // Draft 4 wrote these as booleans beside minimum/maximum.
        exclusiveMinimum:
          schema.exclusiveMinimum === true ? finite(schema.minimum) : finite(schema.exclusiveMinimum),
        exclusiveMaximum:
          schema.exclusiveMaximum === true ? finite(schema.maximum) : finite(schema.exclusiveMaximum),
      };
      const range = rangeText(bounds);
      return {
        ...base,
        kind: "number",
        integer: type === "integer",
        ...bounds,
        typeLabel: range ? `${type}, ${range}` : type,
        initial: fallback === null ? "" : String(fallback),
      };
    }
    case "boolean":
      return {
        ...base,
        kind: "boolean",
        typeLabel: "boolean",
        initial: typeof schema.default === "boolean" ? schema.default : base.required ? false : null,
      };
    default:
      return null;
  }
}

function fieldOf(raw: unknown, place: Place, budget: Budget): Field {
  budget.left -= 1;
  if (budget.left < 0) throw new TooManyFields();
  const schema = isObject(raw) ? unwrapNullable(raw) : null;
  const base = {
    name: place.name,
    path: place.path,
    key: place.key,
    required: place.required,
    title: schema ? text(schema.title) : null,
    description: schema ? text(schema.description) : null,
  };
  if (schema === null)
    return jsonField(base, raw, raw === true ? "any value is allowed" : "it has no schema");
  if ("$ref" in schema) return jsonField(base, schema, "it refers to another schema ($ref)");

  const leaf = leafField(base, schema);
  if (leaf !== null) return leaf;
  const options = optionsOf(schema);
  if (options !== null) {
    return jsonField(base, schema, options.length === 0 ? "it lists no choices" : "it has too many choices");
  }
  for (const keyword of ["anyOf", "oneOf", "allOf", "not", "if"] as const) {
    if (keyword in schema) return jsonField(base, schema, `it combines schemas (${keyword})`);
  }

  const type =
    singleType(schema) ?? (isObject(schema.properties) ? "object" : "items" in schema ? "array" : null);
  if (type === "object") {
    if (!isObject(schema.properties) || Object.keys(schema.properties).length === 0) {
      return jsonField(base, schema, "its keys are not listed");
    }
    if (place.nesting >= MAX_NESTING) return jsonField(base, schema, "it is nested too deeply for the form");
    const fields = fieldsOf(schema, place.path, place.key, place.nesting + 1, budget);
    return { ...base, kind: "object", typeLabel: "object", fields, initial: fields.map((f) => f.initial) };
  }
  if (type === "array") {
    const items = schema.items;
    const item = isObject(items)
      ? leafField(
          {
            name: "",
            path: place.path,
            key: `${place.key}#`,
            required: true,
            title: text(items.title),
            description: text(items.description),
          },
          unwrapNullable(items),
        )
      : null;
    if (item === null) {
      return jsonField(
        base,
        schema,
        isObject(items) && singleType(items) === "object"
          ? "its items are objects"
          : "its items are not of a simple type",
      );
    }
    const list: ListField = {
      ...base,
      kind: "list",
      item,
      minItems: count(schema.minItems),
      maxItems: count(schema.maxItems),
      typeLabel: `array of ${item.typeLabel}`,
      initial: [],
    };
    if (Array.isArray(schema.default)) {
      const read = schema.default.map((v) => readValue(item, v, ""));
      if (read.every((r) => r.ok)) list.initial = read.map((r) => (r.ok ? r.value : null));
    }
    return list;
  }
  return jsonField(base, schema, type === null ? "its type is not given" : `its type is ${type}`);
}

function fieldsOf(
  schema: Record<string, unknown>,
  parentPath: string,
  parentKey: string,
  nesting: number,
  budget: Budget,
): Field[] {
  const properties = isObject(schema.properties) ? schema.properties : {};
  const required = new Set(
    Array.isArray(schema.required) ? schema.required.filter((r) => typeof r === "string") : [],
  );
  const names = Object.keys(properties);
  // A required name the schema does not describe still has to be sent: as JSON.
  for (const name of required) if (!Object.hasOwn(properties, name)) names.push(name);
  const fields: Field[] = [];
  for (const [i, name] of names.entries()) {
    fields.push(
      fieldOf(
        Object.hasOwn(properties, name) ? properties[name] : undefined,
        {
          name,
          path: parentPath === "" ? name : `${parentPath}.${name}`,
          key: parentKey === "" ? String(i) : `${parentKey}.${i}`,
          required: required.has(name),
          nesting,
        },
        budget,
      ),
    );
  }
  return fields;
}

/**
 * The form for a tool's input schema. A schema that is not an object with listed `properties`
 * (or none, which means no arguments) cannot be a form, nor can one of more than
 * {@link MAX_FIELDS} fields; each property the form cannot represent becomes a {@link JsonField}.
 */
export function formModel(schema: unknown): FormModel {
  if (schema === undefined || schema === null) return { ok: true, fields: [] };
  if (!isObject(schema)) return { ok: false, reason: "its input schema is not an object" };
  if ("$ref" in schema) return { ok: false, reason: "its input schema refers to another schema ($ref)" };
  for (const keyword of ["anyOf", "oneOf", "allOf"] as const) {
    if (keyword in schema) return { ok: false, reason: `its input schema combines schemas (${keyword})` };
  }
  if (schema.type !== undefined && schema.type !== "object") {
    return { ok: false, reason: "its input schema is not of type object" };
  }
  if (schema.properties !== undefined && !isObject(schema.properties)) {
    return { ok: false, reason: "its input schema's properties are not an object" };
  }
  try {
    return { ok: true, fields: fieldsOf(schema, "", "", 0, { left: MAX_FIELDS }) };
  } catch (err) {
    if (err instanceof TooManyFields)
      return { ok: false, reason: `its input schema has more than ${MAX_FIELDS} fields` };
    throw err;
  }
}

/** The fields' starting values (their defaults), one per field in order. */
export function initialValues(fields: readonly Field[]): FormValue[] {
  return fields.map((f) => f.initial);
}

function asText(value: FormValue | undefined): string {
  return typeof value === "string" ? value : "";
}

function asList(value: FormValue | undefined): readonly FormValue[] {
  return Array.isArray(value) ? value : [];
}

/** Something was entered: what decides whether an optional object is sent. */
function entered(field: Field, value: FormValue | undefined): boolean {
  switch (field.kind) {
    case "text":
      return asText(value) !== "";
    case "number":
    case "json":
      return asText(value).trim() !== "";
    case "boolean":
      // A required checkbox always holds a value; only a ticked one counts as entered.
      return field.required ? value === true : typeof value === "boolean";
    case "select":
      return typeof value === "number";
    case "list":
      return asList(value).length > 0;
    case "object": {
      const values = asList(value);
      return field.fields.some((f, i) => entered(f, values[i]));
    }
  }
}

const DECIMAL = /^-?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$/;

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? "" : "s"}`;
}

type Read = { ok: true; value: unknown } | { ok: false; message: string; missing: boolean };

const skipped: Read = { ok: false, message: "", missing: true };

/** One leaf value as it would be sent, or what is wrong with it; `label` names it in messages. */
function leafValue(field: ItemField | JsonField, value: FormValue | undefined, label: string): Read {
  switch (field.kind) {
    case "text": {
      const s = asText(value);
      if (s === "") return { ok: false, message: `Fill in ${label}`, missing: true };
      const length = [...s].length;
      if (field.minLength !== null && length < field.minLength) {
        return {
          ok: false,
          message: `${label} must be at least ${plural(field.minLength, "character")}`,
          missing: false,
        };
      }
      if (field.maxLength !== null && length > field.maxLength) {
        return {
          ok: false,
          message: `${label} must be at most ${plural(field.maxLength, "character")}`,
          missing: false,
        };
      }
      return { ok: true, value: s };
    }
    case "number": {
      const s = asText(value).trim();
      if (s === "") return { ok: false, message: `Fill in ${label}`, missing: true };
      const n = Number(s);
      if (!DECIMAL.test(s) || !Number.isFinite(n))
        return { ok: false, message: `${label} must be a number`, missing: false };
      if (field.integer && !Number.isInteger(n)) {
        return { ok: false, message: `${label} must be a whole number`, missing: false };
      }
      if (field.minimum !== null && n < field.minimum) {
        return { ok: false, message: `${label} must be at least ${field.minimum}`, missing: false };
      }
      if (field.maximum !== null && n > field.maximum) {
        return { ok: false, message: `${label} must be at most ${field.maximum}`, missing: false };
      }
      if (field.exclusiveMinimum !== null && n <= field.exclusiveMinimum) {
        return { ok: false, message: `${label} must be more than ${field.exclusiveMinimum}`, missing: false };
      }
      if (field.exclusiveMaximum !== null && n >= field.exclusiveMaximum) {
        return { ok: false, message: `${label} must be less than ${field.exclusiveMaximum}`, missing: false };
      }
      return { ok: true, value: n };
    }
    case "boolean":
      if (typeof value === "boolean") return { ok: true, value };
      return { ok: false, message: `Choose true or false for ${label}`, missing: true };
    case "select": {
      const option = typeof value === "number" ? field.options[value] : undefined;
      if (option === undefined) return { ok: false, message: `Choose ${label}`, missing: true };
      return { ok: true, value: option.value };
    }
    case "json": {
      const s = asText(value);
      if (s.trim() === "") return { ok: false, message: `Fill in ${label}`, missing: true };
      let parsed: unknown;
      try {
        parsed = JSON.parse(s);
      } catch {
        return { ok: false, message: `${label} is not valid JSON`, missing: false };
      }
      if (field.expect !== null && jsonTypeOf(parsed, field.expect) !== field.expect) {
        return { ok: false, message: `${label} must be JSON of type ${field.expect}`, missing: false };
      }
      return { ok: true, value: parsed };
    }
  }
}

function jsonTypeOf(value: unknown, expected: JsonType): JsonType {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  if (typeof value === "number")
    return expected === "integer" && Number.isInteger(value) ? "integer" : "number";
  return typeof value as JsonType;
}

/** `value` of `field`, to be sent under its name; `skipped` when an optional field is left empty. */
function fieldValue(field: Field, value: FormValue | undefined, problems: FieldProblem[]): Read {
  const label = field.path;
  if (!field.required && !entered(field, value)) return skipped;
  if (field.kind === "object") {
    return { ok: true, value: objectValue(field.fields, asList(value), problems) };
  }
  if (field.kind === "list") {
    const items = asList(value);
    const out: unknown[] = [];
    for (const [i, item] of items.entries()) {
      const read = leafValue(field.item, item, `${label} item ${i + 1}`);
      if (read.ok) out.push(read.value);
      else {
        const message = read.missing ? `${read.message} or remove it` : read.message;
        problems.push({ key: `${field.key}#${i}`, message, missing: read.missing });
      }
    }
    if (field.minItems !== null && items.length < field.minItems) {
      problems.push({
        key: field.key,
        message: `Add at least ${plural(field.minItems, "item")} to ${label}`,
        missing: items.length === 0,
      });
    }
    if (field.maxItems !== null && items.length > field.maxItems) {
      problems.push({
        key: field.key,
        message: `${label} takes at most ${plural(field.maxItems, "item")}`,
        missing: false,
      });
    }
    return { ok: true, value: out };
  }
  const read = leafValue(field, value, label);
  if (!read.ok) problems.push({ key: field.key, message: read.message, missing: read.missing });
  return read;
}

function objectValue(fields: readonly Field[], values: readonly FormValue[], problems: FieldProblem[]) {
  const entries: [string, unknown][] = [];
  for (const [i, field] of fields.entries()) {
    const read = fieldValue(field, values[i], problems);
    if (read.ok) entries.push([field.name, read.value]);
  }
  // fromEntries defines own properties, so a property named "__proto__" stays a plain key.
  return Object.fromEntries(entries);
}

/**
 * The arguments the form's values make, and why they cannot be sent yet (in field order; empty
 * when they can). Optional fields left empty are left out, as is an optional object nothing was
 * entered in; a required object is sent even when empty. `value` holds every valid part even
 * when there are problems: it is what the raw JSON view starts from.
 */
export function formArguments(
  fields: readonly Field[],
  values: readonly FormValue[],
): { value: Record<string, unknown>; problems: FieldProblem[] } {
  const problems: FieldProblem[] = [];
  const value = objectValue(fields, values, problems);
  return { value, problems };
}

/** A JSON value read back into `field`'s form value, or why it does not fit. */
function readValue(
  field: Field,
  value: unknown,
  label: string,
): { ok: true; value: FormValue } | { ok: false; message: string } {
  const wrong = (what: string) => ({ ok: false as const, message: `${label} must be ${what} for the form` });
  switch (field.kind) {
    case "text":
      return typeof value === "string" ? { ok: true, value } : wrong("a string");
    case "number":
      if (typeof value !== "number" || !Number.isFinite(value)) return wrong("a number");
      return { ok: true, value: String(value) };
    case "boolean":
      return typeof value === "boolean" ? { ok: true, value } : wrong("true or false");
    case "select": {
      const i = optionIndex(field.options, value);
      return i === null
        ? { ok: false, message: `${label} is not one of its choices` }
        : { ok: true, value: i };
    }
    case "json":
      return { ok: true, value: prettyJsonText(value) };
    case "list": {
      if (!Array.isArray(value)) return wrong("an array");
      const out: FormValue[] = [];
      for (const [i, item] of value.entries()) {
        const read = readValue(field.item, item, `${label} item ${i + 1}`);
        if (!read.ok) return read;
        out.push(read.value);
      }
      return { ok: true, value: out };
    }
    case "object":
      if (!isObject(value)) return wrong("an object");
      return readObject(field.fields, value, `${label}.`);
  }
}

function emptyValue(field: Field): FormValue {
  switch (field.kind) {
    case "boolean":
      return field.required ? false : null;
    case "select":
      return null;
    case "list":
      return [];
    case "object":
      return field.fields.map(emptyValue);
    default:
      return "";
  }
}

function readObject(
  fields: readonly Field[],
  args: Record<string, unknown>,
  prefix: string,
): { ok: true; value: FormValue[] } | { ok: false; message: string } {
  const known = new Set(fields.map((f) => f.name));
  const unknown = Object.keys(args).find((k) => !known.has(k));
  if (unknown !== undefined) return { ok: false, message: `the form has no field ${prefix}${unknown}` };
  const out: FormValue[] = [];
  for (const field of fields) {
    if (!Object.hasOwn(args, field.name)) {
      out.push(emptyValue(field));
      continue;
    }
    const read = readValue(field, args[field.name], field.path);
    if (!read.ok) return read;
    out.push(read.value);
  }
  return { ok: true, value: out };
}

/**
 * Arguments (raw JSON, parsed) read back into the form: a property left out is an empty field
 * (not its default: the JSON says what is sent). Fails, saying why, when a key has no field or a
 * value does not fit its field (a string where a number goes, a value not among the choices).
 */
export function valuesFromArguments(
  fields: readonly Field[],
  args: Record<string, unknown>,
): { ok: true; values: FormValue[] } | { ok: false; message: string } {
  const read = readObject(fields, args, "");
  return read.ok ? { ok: true, values: read.value } : read;
}

/** `values` with the one at `index` replaced: how a field's edit reaches its parent. */
export function replaceAt(values: readonly FormValue[], index: number, value: FormValue): FormValue[] {
  const next = [...values];
  next[index] = value;
  return next;
}

/** A new, empty item for a list: what "Add item" appends. */
export function emptyItem(field: ListField): FormValue {
  return field.item.kind === "boolean" ? false : field.item.kind === "select" ? null : "";
}

/**
 * A number field's range as its label shows it ("1 to 10", "at least 0", "below 1"), or null
 * for none: the field is a text box, so the label is where the user learns the bounds.
 */
function rangeText(b: {
  minimum: number | null;
  maximum: number | null;
  exclusiveMinimum: number | null;
  exclusiveMaximum: number | null;
}): string | null {
  const low =
    b.exclusiveMinimum !== null ? `above ${b.exclusiveMinimum}` : b.minimum !== null ? `${b.minimum}` : null;
  const high =
    b.exclusiveMaximum !== null ? `below ${b.exclusiveMaximum}` : b.maximum !== null ? `${b.maximum}` : null;
  if (b.minimum !== null && b.maximum !== null && b.exclusiveMinimum === null && b.exclusiveMaximum === null)
    return `${b.minimum} to ${b.maximum}`;
  if (low && high)
    return `${b.exclusiveMinimum !== null ? low : `at least ${low}`}, ${b.exclusiveMaximum !== null ? high : `at most ${high}`}`;
  if (low) return b.exclusiveMinimum !== null ? low : `at least ${low}`;
  if (high) return b.exclusiveMaximum !== null ? high : `at most ${high}`;
  return null;
}
