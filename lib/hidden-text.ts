/**
 * The characters that hide text, or change how the text around them reads, in one list for
 * both sides: the catalogue strips them from what a tool server says (names, descriptions,
 * schema texts: server/catalogue/definition.ts), and the console marks them where text must be
 * shown exactly as it is (a call's arguments: lib/json-view.ts).
 *
 * - Unicode tag characters U+E0000–E007F: an invisible copy of ASCII, enough to smuggle a
 *   whole instruction past a person into a model's input
 * - variation selectors U+FE00–FE0F and U+E0100–E01EF (256 of them: enough to encode bytes)
 * - bidirectional controls: the marks U+200E, U+200F, U+061C, the embeddings and overrides
 *   U+202A–202E and the isolates U+2066–2069
 * - invisible characters: zero-width U+200B–200D and U+FEFF, U+2060–2064 (word joiner,
 *   invisible operators) with the deprecated format controls U+2065–206F, the Mongolian vowel
 *   separator U+180E, the soft hyphen U+00AD, the interlinear annotation marks U+FFF9–FFFB
 * - the line and paragraph separators U+2028, U+2029
 * - DEL and the C1 controls U+007F–009F (JSON leaves them unescaped, unlike C0)
 */

/** The list above as the inside of a regular expression's character class (for the `u` flag). */
export const HIDDEN_CHARACTER_CLASS =
  // Every default-ignorable code point too (Hangul fillers, Mongolian variation selectors, U+034F,
  // U+E0080–E0FFF, …): characters a renderer shows as nothing.
  "\\p{Default_Ignorable_Code_Point}\\u007F-\\u009F\\u00AD\\u061C\\u180E\\u200B-\\u200F\\u2028\\u2029\\u202A-\\u202E\\u2060-\\u206F" +
  "\\uFE00-\\uFE0F\\uFEFF\\uFFF9-\\uFFFB\\u{E0000}-\\u{E007F}\\u{E0100}-\\u{E01EF}";

/**
 * One hidden character per match, whole (a tag character is two UTF-16 units and one match).
 * Global: use it with `replace`, `match` or `matchAll`, never with `test` or `exec`, which keep
 * state between calls.
 */
export const HIDDEN_CHARACTERS = new RegExp(`[${HIDDEN_CHARACTER_CLASS}]`, "gu");

/** How many hidden characters `text` holds. */
export function countHiddenIn(text: string): number {
  return text.match(HIDDEN_CHARACTERS)?.length ?? 0;
}

/** `U+E0041`: a character's code point as people write it. */
export function codePointLabel(ch: string): string {
  return `U+${(ch.codePointAt(0) ?? 0).toString(16).toUpperCase().padStart(4, "0")}`;
}

const NAMES: Record<number, string> = {
  173: "soft hyphen",
  1564: "Arabic letter mark",
  6158: "Mongolian vowel separator",
  8203: "zero-width space",
  8204: "zero-width non-joiner",
  8205: "zero-width joiner",
  8206: "left-to-right mark",
  8207: "right-to-left mark",
  8232: "line separator",
  8233: "paragraph separator",
  8234: "left-to-right embedding",
  8235: "right-to-left embedding",
  8236: "pop directional formatting",
  8237: "left-to-right override",
  8238: "right-to-left override",
  8288: "word joiner",
  8289: "invisible function application",
  8290: "invisible times",
  8291: "invisible separator",
  8292: "invisible plus",
  8294: "left-to-right isolate",
  8295: "right-to-left isolate",
  8296: "first strong isolate",
  8297: "pop directional isolate",
  65279: "zero-width no-break space",
  917505: "language tag",
  917631: "cancel tag",
};

/**
 * What a hidden character is, for a tooltip: `U+202E right-to-left override`, and for a tag
 * character the ASCII character it stands for (`U+E0041 tag character, an invisible "A"`), so
 * that a reviewer can read a smuggled text.
 */
export function describeHidden(ch: string): string {
  const cp = ch.codePointAt(0) ?? 0;
  const label = codePointLabel(ch);
  const name = NAMES[cp];
  if (name) return `${label} ${name}`;
  if (cp >= 0xe0020 && cp <= 0xe007e)
    return `${label} tag character, an invisible "${String.fromCodePoint(cp - 0xe0000)}"`;
  if (cp >= 0xe0000 && cp <= 0xe007f) return `${label} tag character`;
  if ((cp >= 0xfe00 && cp <= 0xfe0f) || (cp >= 0xe0100 && cp <= 0xe01ef))
    return `${label} variation selector`;
  if (cp >= 0x7f && cp <= 0x9f) return `${label} control character`;
  if (cp >= 0xfff9 && cp <= 0xfffb) return `${label} interlinear annotation mark`;
  return `${label} invisible format character`;
}
