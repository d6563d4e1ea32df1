import "server-only";
import { createHash } from "node:crypto";
import type { Tool } from "@modelcontextprotocol/client";
import type { ToolIconView } from "@/lib/api-types";
import { codePointLabel, HIDDEN_CHARACTER_CLASS } from "@/lib/hidden-text";

/**
 * The parts of a tool that an enabled tool is pinned to, as Gatehouse keeps them: cleaned (see
 * {@link definitionOf}), so what is stored, hashed, pinned, diffed and served is one text.
 *
 * `title` and `icons` are absent (never null) when the tool has none: the hash skips absent keys,
 * so a definition without them hashes exactly as it did before Gatehouse kept them, and an
 * upgrade changes no pin but those of tools that have a title or an icon that passes.
 */
export interface ToolDefinition {
  name: string;
  /** The display name (MCP 2025-06-18), cleaned and capped at {@link TITLE_MAX_CHARS}. */
  title?: string;
  description: string;
  inputSchema: unknown;
  outputSchema: unknown;
  annotations: Record<string, unknown> | null;
  /** The icons that pass {@link iconsOf}, in the server's order. */
  icons?: ToolIconView[];
}

/** Longest title kept (or `descriptionMaxChars`, when that is shorter). */
export const TITLE_MAX_CHARS = 200;

/**
 * A listed tool's definition with its texts made safe to show, each capped at `maxChars`
 * (default: no cap): hidden characters ({@link cleanDescription}) removed from the name, the
 * title, the description, the annotations' strings and the texts of both schemas
 * ({@link cleanSchema}); its icons only as {@link iconsOf} lets them through.
 *
 * Its hash is the hash of this cleaned form, so a server that only adds or removes hidden
 * characters, or changes a text past the cap, changes nothing anyone is shown and does not
 * change the definition either; a change an owner or agent could see always does. (Changing
 * `catalogue.descriptionMaxChars` changes the definition of every tool it cuts differently.)
 * The name here is only shown: the row keeps the remote name as listed, to call the tool by.
 */
export function definitionOf(tool: Tool, maxChars = Number.POSITIVE_INFINITY): ToolDefinition {
  return cleanDefinition(
    {
      name: typeof tool.name === "string" ? tool.name : "",
      ...(typeof tool.title === "string" ? { title: tool.title } : {}),
      description: typeof tool.description === "string" ? tool.description : "",
      inputSchema: tool.inputSchema ?? null,
      outputSchema: tool.outputSchema ?? null,
      annotations: (tool.annotations as Record<string, unknown> | undefined) ?? null,
      // As listed, unchecked: cleanDefinition keeps only what iconsOf lets through.
      ...(tool.icons !== undefined ? { icons: tool.icons as unknown as ToolIconView[] } : {}),
    },
    maxChars,
  );
}

/**
 * `def` cleaned as {@link definitionOf} cleans a listed tool; a clean definition comes back
 * equal. Views apply it (without a cap) to what they read, so rows written before the cleaning
 * was what it is now are served clean too.
 */
export function cleanDefinition(def: ToolDefinition, maxChars = Number.POSITIVE_INFINITY): ToolDefinition {
  // An empty title (or one of hidden characters only) shows nothing: it is no title.
  const title =
    typeof def.title === "string" ? cleanDescription(def.title, Math.min(TITLE_MAX_CHARS, maxChars)) : "";
  const icons = iconsOf(def.icons);
  return {
    name: cleanDescription(def.name),
    ...(title !== "" ? { title } : {}),
    description: cleanDescription(def.description, maxChars),
    inputSchema: cleanSchema(def.inputSchema, maxChars),
    outputSchema: cleanSchema(def.outputSchema, maxChars),
    annotations:
      def.annotations === null ? null : (cleanStrings(def.annotations, maxChars) as Record<string, unknown>),
    ...(icons.length > 0 ? { icons } : {}),
  };
}

/** Longest icon `src` kept, in characters (a `data:` URI is ASCII: bytes too). */
export const ICON_MAX_CHARS = 16 * 1024;
/** Icons kept per tool; the rest are dropped. */
export const ICON_MAX_COUNT = 4;
/** `sizes` entries kept per icon. */
const ICON_MAX_SIZES = 8;

const ascii = (bytes: Buffer, from: number, to: number) => bytes.subarray(from, to).toString("latin1");

/**
 * The image types an icon may have, each with the check that its bytes are of that type. SVG is
 * not among them: an `<img>` would render it safely (no script, no fetches), but an agent's
 * client may put it in its page some other way, where its script runs and its `<image href>`
 * fetches from any URL — which is what icons must never make anyone do.
 */
const ICON_TYPES: Record<string, (bytes: Buffer) => boolean> = {
  "image/png": (b) => ascii(b, 0, 8) === "\x89PNG\r\n\x1a\n",
  "image/jpeg": (b) => b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff,
  "image/gif": (b) => ascii(b, 0, 6) === "GIF87a" || ascii(b, 0, 6) === "GIF89a",
  "image/webp": (b) => ascii(b, 0, 4) === "RIFF" && ascii(b, 8, 12) === "WEBP",
};
/** The spec's own spelling of JPEG's type beside the registered one. */
const ICON_TYPE_ALIASES: Record<string, string> = { "image/jpg": "image/jpeg" };

const DATA_URI = /^data:([a-z]+\/[a-z0-9.+-]+);base64,([A-Za-z0-9+/]+={0,2})$/i;
const ICON_SIZE = /^(?:[1-9][0-9]{0,4}x[1-9][0-9]{0,4}|any)$/i;

function iconTypeOf(mimeType: string): string | undefined {
  const type = mimeType.toLowerCase();
  const canonical = ICON_TYPE_ALIASES[type] ?? type;
  return Object.hasOwn(ICON_TYPES, canonical) ? canonical : undefined;
}

/** The image type of `src` when it is a base64 `data:` URI of an allowed type whose bytes say so. */
function dataUriType(src: string): string | undefined {
  if (src.length > ICON_MAX_CHARS) return undefined;
  const match = DATA_URI.exec(src);
  const type = match?.[1] ? iconTypeOf(match[1]) : undefined;
  const payload = match?.[2] ?? "";
  if (!type || payload.length % 4 !== 0) return undefined;
  // The first 16 characters are the first 12 bytes: enough for every signature above.
  return ICON_TYPES[type]?.(Buffer.from(payload.slice(0, 16), "base64")) ? type : undefined;
}

/**
 * The icons of a listed tool that may be shown and served, at most {@link ICON_MAX_COUNT}, in
 * the server's order: each a base64 `data:` URI of a PNG, JPEG, GIF or WebP image (its first
 * bytes checked against the type it claims), at most {@link ICON_MAX_CHARS} long. A URL of any
 * scheme never passes: a browser or agent shown it would fetch from the tool server (or from
 * wherever it points). Of the rest of an icon, `mimeType` is kept when it names the URI's own
 * type, `sizes` keeps its `WxH` / `any` strings, `theme` is kept when `light` or `dark`; anything
 * else is dropped. Applied to its own output, it changes nothing.
 */
export function iconsOf(listed: unknown): ToolIconView[] {
  if (!Array.isArray(listed)) return [];
  const out: ToolIconView[] = [];
  for (const icon of listed) {
    if (out.length >= ICON_MAX_COUNT) break;
    if (!isRecord(icon) || typeof icon.src !== "string") continue;
    const type = dataUriType(icon.src);
    if (!type) continue;
    const kept: ToolIconView = { src: icon.src };
    if (typeof icon.mimeType === "string" && iconTypeOf(icon.mimeType) === type)
      kept.mimeType = icon.mimeType;
    if (Array.isArray(icon.sizes)) {
      const sizes = icon.sizes
        .filter((s): s is string => typeof s === "string" && ICON_SIZE.test(s))
        .slice(0, ICON_MAX_SIZES);
      if (sizes.length > 0) kept.sizes = sizes;
    }
    if (icon.theme === "light" || icon.theme === "dark") kept.theme = icon.theme;
    out.push(kept);
  }
  return out;
}

/** JSON with object keys sorted at every level, so equal definitions hash equally. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (value !== null && typeof value === "object") {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(",")}}`;
  }
  return JSON.stringify(value) ?? "null";
}

export function definitionHash(def: ToolDefinition): string {
  return createHash("sha256").update(canonicalJson(def)).digest("hex");
}

// C0 controls but tab and newline, the hidden characters of lib/hidden-text.ts (tag characters,
// variation selectors, bidirectional controls, zero-width and other invisible characters, line
// separators, C1), and unpaired surrogates, which no encoder can send as they are.
const UNSAFE_CHARS = new RegExp(
  `[\\u0000-\\u0008\\u000B-\\u001F${HIDDEN_CHARACTER_CLASS}\\uD800-\\uDFFF]`,
  "gu",
);

/** A line or paragraph separator becomes the newline it stands for; anything else unsafe goes. */
const replacementOf = (ch: string): string => (ch === "\u2028" || ch === "\u2029" ? "\n" : "");

/**
 * A text from a tool server made safe to show (a description, a title, a schema's texts): unsafe
 * characters removed (U+2028 and U+2029 become newlines), then capped at `maxChars` UTF-16 units
 * with "…" (default: no cap), never cutting a character in two.
 */
export function cleanDescription(text: string, maxChars = Number.POSITIVE_INFINITY): string {
  const clean = text.replace(UNSAFE_CHARS, replacementOf);
  if (clean.length <= maxChars) return clean;
  let end = Math.max(0, maxChars - 1);
  const last = clean.charCodeAt(end - 1);
  if (last >= 0xd800 && last <= 0xdbff) end--;
  return `${clean.slice(0, end)}…`;
}

/**
 * Keywords whose value is, or is compared with, what an agent sends, or names a schema or a
 * format: kept exactly as listed, so the schema the broker validates against means the same.
 * (An `enum` value with a hidden character is what the server expects to receive.) `default` and
 * `examples` are not among them: no validator reads them (Ajv runs without `useDefaults`), and they
 * are text a model reads, so their strings are cleaned and capped like a description.
 */
const VERBATIM_KEYWORDS = new Set([
  "enum",
  "const",
  "required",
  "dependentRequired",
  "type",
  "format",
  "pattern",
  "contentEncoding",
  "contentMediaType",
  "discriminator",
  "$ref",
  "$id",
  "id",
  "$schema",
  "$anchor",
  "$dynamicRef",
  "$dynamicAnchor",
  "$recursiveRef",
  "$recursiveAnchor",
  "$vocabulary",
]);

/** Keywords whose value maps names (property names, patterns, definition names) to subschemas. */
const SCHEMA_MAP_KEYWORDS = new Set([
  "properties",
  "patternProperties",
  "$defs",
  "definitions",
  "dependentSchemas",
  "dependencies",
]);

function isRecord(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

/**
 * A JSON schema from a tool server with every text in it that people and agents read cleaned
 * and capped like a description: `title`, `description`, `$comment`, and the strings of keywords
 * JSON Schema does not know (`x-…`), at any depth, in subschemas and definitions alike. Left
 * exactly as listed: object keys (property names are what an agent sends), the keywords of
 * {@link VERBATIM_KEYWORDS} (`enum`, `const`, `default`, `examples`, `pattern`, `type`,
 * `required`, `$ref`, ...), and numbers and booleans — so the cleaned schema accepts and refuses
 * the same arguments: only texts no validator reads change.
 */
export function cleanSchema(schema: unknown, maxChars = Number.POSITIVE_INFINITY): unknown {
  if (typeof schema === "string") return cleanDescription(schema, maxChars);
  if (Array.isArray(schema)) return schema.map((s) => cleanSchema(s, maxChars));
  if (!isRecord(schema)) return schema;
  // fromEntries, not assignment: a property named "__proto__" stays a property.
  return Object.fromEntries(
    Object.entries(schema).map(([key, value]) => {
      if (VERBATIM_KEYWORDS.has(key)) return [key, value];
      if (SCHEMA_MAP_KEYWORDS.has(key) && isRecord(value)) {
        // Only objects are subschemas here. Anything else stays: `dependencies` may map a name to
        // the names it requires, and a string here is no description of anything.
        const entries = Object.entries(value).map(([name, sub]) => [
          name,
          isRecord(sub) ? cleanSchema(sub, maxChars) : sub,
        ]);
        return [key, Object.fromEntries(entries)];
      }
      return [key, cleanSchema(value, maxChars)];
    }),
  );
}

/** Every string in `value` cleaned and capped, at any depth; keys, numbers and booleans kept. */
function cleanStrings(value: unknown, maxChars: number): unknown {
  if (typeof value === "string") return cleanDescription(value, maxChars);
  if (Array.isArray(value)) return value.map((v) => cleanStrings(v, maxChars));
  if (!isRecord(value)) return value;
  return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, cleanStrings(v, maxChars)]));
}

export const LOCAL_NAME = /^[A-Za-z0-9_-]{1,64}$/;

/** Why `<server>_<tool>` cannot be used as a local name, or null when it can. */
export function localNameProblem(server: string, tool: string): string | null {
  if (tool === "") return "the tool has an empty name";
  const hidden = [...new Set(tool.match(UNSAFE_CHARS) ?? [])];
  if (hidden.length > 0) {
    const shown = hidden.slice(0, 5).map(codePointLabel).join(", ");
    return `the tool name has hidden characters (${shown}${hidden.length > 5 ? ", ..." : ""})`;
  }
  const localName = `${server}_${tool}`;
  if (localName.length > 64) return `the local name is ${localName.length} characters long (at most 64)`;
  if (!LOCAL_NAME.test(localName)) return "the tool name has characters outside A-Z, a-z, 0-9, '_' and '-'";
  return null;
}

/** Destructive unless the server says `readOnlyHint: true`. */
export function isReadOnly(def: ToolDefinition): boolean {
  return def.annotations?.readOnlyHint === true;
}
