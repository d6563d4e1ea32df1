/**
 * A failed call's own words: the text a tool put in its `isError` result, as the console shows
 * it beside the call (Approvals, Activity). The text is the tool server's, so untrusted: it is
 * shown on one line, without the characters that hide or reorder text, and capped.
 */
import { HIDDEN_CHARACTERS } from "@/lib/hidden-text";

/** Most characters (code points, the ellipsis included) of a tool's error text as shown. */
export const TOOL_ERROR_MAX_CHARS = 300;

// Line breaks of every kind, tabs and other white space: one space each run.
const WHITESPACE_RUN = /[\s\u0085\u2028\u2029]+/gu;
// C0 controls other than white space (a bell, an escape that starts a terminal sequence, ...).
// biome-ignore lint/suspicious/noControlCharactersInRegex: removing control characters is the point.
const C0_CONTROLS = /[\u0000-\u0008\u000E-\u001F]/g;

/**
 * `text` cleaned for one line of the console: white space of every kind (newlines, tabs, the
 * Unicode line separators) folded to single spaces, controls and the hidden characters of
 * lib/hidden-text.ts (bidi overrides, zero-width marks, tag characters, ...) removed, trimmed,
 * and cut to `max` code points (default {@link TOOL_ERROR_MAX_CHARS}) ending in "…" when longer.
 * A cut never splits a character.
 */
export function oneLineText(text: string, max = TOOL_ERROR_MAX_CHARS): string {
  const clean = text
    .replace(WHITESPACE_RUN, " ")
    .replace(C0_CONTROLS, "")
    .replace(HIDDEN_CHARACTERS, "")
    .replace(/ {2,}/g, " ")
    .trim();
  const chars = Array.from(clean);
  if (chars.length <= max) return clean;
  return `${chars
    .slice(0, Math.max(0, max - 1))
    .join("")
    .trimEnd()}…`;
}

/** How the store keeps a result over its cap (`capResult` in server/calls/call-row.ts). */
interface StoredPreview {
  truncated: true;
  preview: string;
}

function isPreview(result: unknown): result is StoredPreview {
  const r = result as Partial<StoredPreview> | null;
  return typeof r === "object" && r !== null && r.truncated === true && typeof r.preview === "string";
}

/** The text parts of a whole `CallToolResult` that says `isError: true`. */
function textParts(result: unknown): string[] {
  if (typeof result !== "object" || result === null) return [];
  const { isError, content } = result as { isError?: unknown; content?: unknown };
  if (isError !== true || !Array.isArray(content)) return [];
  return content.flatMap((part: unknown) => {
    const p = part as { type?: unknown; text?: unknown } | null;
    return p && p.type === "text" && typeof p.text === "string" ? [p.text] : [];
  });
}

const TEXT_KEY = '"text":"';

/**
 * The text parts that start within the first bytes of a result's JSON (a stored preview): each
 * `"text":"…"` string after `"content":[`, the last one possibly cut short (a cut escape is
 * dropped). Escaped quotes inside a string never look like the key, so a scan from string to
 * string cannot start inside one.
 */
function previewTextParts(preview: string): string[] {
  if (preview.includes('"isError":false')) return [];
  const start = preview.indexOf('"content":[');
  if (start === -1) return [];
  const parts: string[] = [];
  let at = preview.indexOf(TEXT_KEY, start);
  while (at !== -1) {
    const from = at + TEXT_KEY.length;
    let end = from;
    while (end < preview.length && preview[end] !== '"') end += preview[end] === "\\" ? 2 : 1;
    let raw = preview.slice(from, Math.min(end, preview.length));
    if (end >= preview.length) raw = raw.replace(/\\(u[0-9a-fA-F]{0,3})?$/, "");
    try {
      parts.push((JSON.parse(`"${raw}"`) as string).replace(/[\uD800-\uDBFF]$/, ""));
    } catch {
      break;
    }
    if (end >= preview.length) break;
    at = preview.indexOf(TEXT_KEY, end + 1);
  }
  return parts;
}

/**
 * The tool's own error text in a call's stored result, on one line and capped (see
 * {@link oneLineText}), or null when the result is no `isError` result or holds no text. A result
 * stored truncated gives the start of its text parts (a preview that says `"isError":false`
 * gives none; the caller knows the call failed as a `tool_error`).
 */
export function toolErrorText(result: unknown, max = TOOL_ERROR_MAX_CHARS): string | null {
  const parts = isPreview(result) ? previewTextParts(result.preview) : textParts(result);
  const text = oneLineText(parts.join(" "), max);
  return text === "" ? null : text;
}
