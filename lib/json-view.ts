/**
 * Pure helpers for showing untrusted JSON (a call's arguments, a tool's result) to a person who
 * must decide on it: every string as an escaped JSON literal, with the characters that hide text
 * or make it read differently from what it is (lib/hidden-text.ts: tag characters, variation
 * selectors, bidirectional controls, zero-width characters, line separators, C1 controls) shown
 * as visible escapes; long values folded with a count of what is hidden, never cut silently.
 */
import { countHiddenIn, describeHidden, HIDDEN_CHARACTERS } from "./hidden-text";

/**
 * A run of a rendered string: `hidden` runs are the escapes of hidden characters, and say in
 * `title` which character each one is.
 */
export type StringPart = { text: string; hidden: false } | { text: string; hidden: true; title: string };

/**
 * The visible escape of one hidden character: `\u202e` inside the BMP (JSON's own escape), and
 * `\u{e0041}` beyond it, where JSON has only a surrogate pair (`\udb40\udc41`) that would not
 * say which character it is.
 */
function escapeOf(ch: string): string {
  const cp = ch.codePointAt(0) ?? 0;
  const hex = cp.toString(16);
  return cp > 0xffff ? `\\u{${hex}}` : `\\u${hex.padStart(4, "0")}`;
}

/**
 * `value` as a JSON string literal (quotes included) in runs, with each hidden character
 * escaped in a run of its own, so that a view can make it stand out. Only the rendering
 * changes: the value itself is never altered.
 */
export function jsonStringParts(value: string): StringPart[] {
  const literal = JSON.stringify(value);
  const parts: StringPart[] = [];
  let last = 0;
  for (const m of literal.matchAll(HIDDEN_CHARACTERS)) {
    if (m.index > last) parts.push({ text: literal.slice(last, m.index), hidden: false });
    parts.push({ text: escapeOf(m[0]), hidden: true, title: describeHidden(m[0]) });
    last = m.index + m[0].length;
  }
  if (last < literal.length) parts.push({ text: literal.slice(last), hidden: false });
  return parts;
}

/** `value` as a JSON string literal (quotes included) with hidden characters escaped. */
export function jsonString(value: string): string {
  return jsonStringParts(value)
    .map((p) => p.text)
    .join("");
}

/** How many hidden characters the strings (and object keys) of `value` hold. */
export function countHidden(value: unknown): number {
  if (typeof value === "string") return countHiddenIn(value);
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
