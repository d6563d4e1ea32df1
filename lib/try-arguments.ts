function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * The arguments a person typed in the "Try" dialog's raw JSON view, parsed: a JSON object, or a
 * message saying what is wrong. Empty text is `{}`.
 */
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
