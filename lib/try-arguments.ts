/**
 * A starting point for the "Try" form's JSON arguments, from a tool's input schema: every
 * required property with an empty value of its type (its default or first enum value when the
 * schema gives one). Optional properties are left out, so the skeleton never sends more than asked.
 */
export function argumentsSkeleton(schema: unknown): Record<string, unknown> {
  if (!isObject(schema) || !isObject(schema.properties)) return {};
  const required = Array.isArray(schema.required) ? schema.required.filter((r) => typeof r === "string") : [];
  const out: Record<string, unknown> = {};
  for (const name of required) {
    const prop = schema.properties[name];
    out[name] = emptyValue(isObject(prop) ? prop : {});
  }
  return out;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function emptyValue(prop: Record<string, unknown>): unknown {
  if ("default" in prop) return prop.default;
  if (Array.isArray(prop.enum) && prop.enum.length > 0) return prop.enum[0];
  const type = Array.isArray(prop.type) ? prop.type[0] : prop.type;
  switch (type) {
    case "number":
    case "integer":
      return 0;
    case "boolean":
      return false;
    case "array":
      return [];
    case "object":
      return argumentsSkeleton(prop);
    case "null":
      return null;
    default:
      return "";
  }
}

/** The arguments a person typed, parsed: a JSON object, or a message saying what is wrong. */
export function parseArguments(
  text: string,
): { ok: true; value: Record<string, unknown> } | { ok: false; message: string } {
  if (text.trim() === "") return { ok: true, value: {} };
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    return { ok: false, message: `Not valid JSON: ${err instanceof Error ? err.message : String(err)}` };
  }
  if (!isObject(value)) return { ok: false, message: "The arguments must be a JSON object, like {}." };
  return { ok: true, value };
}
