/**
 * Pure helpers for showing untrusted JSON (a call's arguments, a tool's result) to a person who
 * must decide on it: every string as an escaped JSON literal, with the characters that make text
 * read differently from what it is (bidirectional overrides, zero-width characters, line
 * separators, C1 controls) shown as visible `\uXXXX` escapes; long values folded with a count of
 * what is hidden, never cut silently.
 */

/** Characters JSON.stringify leaves alone that could hide or reorder what a reviewer reads. */
const DECEPTIVE =
  /[\u007F-\u009F\u00AD\u061C\u180E\u200B-\u200F\u2028\u2029\u202A-\u202E\u2060-\u2064\u2066-\u206F\uFEFF\uFFF9-\uFFFB]/g;

/** A run of a rendered string: `hidden` runs are the escapes of deceptive characters. */
export interface StringPart {
  text: string;
  hidden: boolean;
}

/**
 * `value` as a JSON string literal (quotes included) in runs, with each deceptive character
 * escaped as `\uXXXX` in a run of its own, so that a view can make it stand out.
 */
export function jsonStringParts(value: string): StringPart[] {
  const literal = JSON.stringify(value);
  const parts: StringPart[] = [];
  let last = 0;
  for (const m of literal.matchAll(DECEPTIVE)) {
    if (m.index > last) parts.push({ text: literal.slice(last, m.index), hidden: false });
    parts.push({ text: `\\u${(m[0].codePointAt(0) ?? 0).toString(16).padStart(4, "0")}`, hidden: true });
    last = m.index + m[0].length;
  }
  if (last < literal.length) parts.push({ text: literal.slice(last), hidden: false });
  return parts;
}

/** `value` as a JSON string literal (quotes included) with deceptive characters escaped. */
export function jsonString(value: string): string {
  return jsonStringParts(value)
    .map((p) => p.text)
    .join("");
}

/** How many deceptive characters the strings (and object keys) of `value` hold. */
export function countHidden(value: unknown): number {
  if (typeof value === "string") return value.match(DECEPTIVE)?.length ?? 0;
  if (Array.isArray(value)) return value.reduce((n: number, v) => n + countHidden(v), 0);
  if (value !== null && typeof value === "object") {
    return Object.entries(value).reduce((n, [k, v]) => n + countHidden(k) + countHidden(v), 0);
  }
  return 0;
}

/** Strings longer than this many characters are folded. */
export const FOLD_CHARS = 240;
/** Arrays and objects with more entries than this are folded after this many. */
export const FOLD_ENTRIES = 50;

export interface StringFold {
  /** The first {@link FOLD_CHARS} characters (never half a surrogate pair). */
  head: string;
  /** How many characters are hidden behind the fold. */
  hidden: number;
  /** The whole string's length in characters. */
  total: number;
}

/** Where to fold a long string, or null when it is short enough to show whole. */
export function foldString(value: string, max = FOLD_CHARS): StringFold | null {
  // Counting code points, so that an emoji is one character and is never split.
  const chars = Array.from(value);
  if (chars.length <= max) return null;
  return { head: chars.slice(0, max).join(""), hidden: chars.length - max, total: chars.length };
}

/** `1,834` */
export function formatCount(n: number): string {
  return n.toLocaleString("en-US");
}
