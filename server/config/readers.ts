import "server-only";
import { childPath } from "./display";
import type { Expansion } from "./expand";
import { expandVars } from "./expand";
import type { ConfigIssue } from "./types";

/**
 * The readers every part of validation shares: one value in, a typed value out, and any problem
 * written to {@link Issues} with its JSON path and a fix. Secret values (header and env values)
 * never reach a message: each reader names a value only by its type unless it is known not to be
 * secret.
 */

export type Json = Record<string, unknown>;

/** The findings of one validation, in the order they were found. */
export class Issues {
  readonly errors: ConfigIssue[] = [];
  readonly warnings: ConfigIssue[] = [];
  error(path: string, message: string): void {
    this.errors.push({ path, message });
  }
  warn(path: string, message: string): void {
    this.warnings.push({ path, message });
  }
}

interface IntRule {
  readonly default: number;
  readonly min: number;
  readonly max: number;
  /** 0 is accepted as "off" even though it is below `min`. */
  readonly zeroDisables?: boolean;
}

/** Defaults and bounds of every numeric setting. */
export const LIMITS = {
  maxTools: { default: 12, min: 1, max: 200 },
  timeoutMs: { default: 15_000, min: 100, max: 600_000 },
  minIntervalMs: { default: 0, min: 0, max: 60_000 },
  maxFrameBytes: { default: 4 * 1024 * 1024, min: 1024, max: 256 * 1024 * 1024 },
  expireAfterSeconds: { default: 900, min: 10, max: 604_800 },
  waitSeconds: { default: 60, min: 0, max: 3600 },
  descriptionMaxChars: { default: 1024, min: 64, max: 65_536 },
  refreshSeconds: { default: 300, min: 10, max: 86_400, zeroDisables: true },
  callsPerMinute: { default: 0, min: 1, max: 100_000, zeroDisables: true },
  maxPendingCalls: { default: 20, min: 1, max: 10_000, zeroDisables: true },
  maxConcurrentCalls: { default: 0, min: 1, max: 10_000, zeroDisables: true },
} as const satisfies Record<string, IntRule>;

/** Expands one string found at JSON path `where`, reporting what is wrong with its references. */
export type Expander = (text: string, where: string) => Expansion;

/**
 * An {@link Expander} over `env`: a malformed reference is an error; unset names are handed to
 * `onUnset` (after the malformed error, if any), because whether they are an error or a warning
 * depends on the field.
 */
export function reportingExpander(
  env: Record<string, string | undefined>,
  issues: Issues,
  onUnset: (where: string, unset: string[]) => void,
): Expander {
  return (text, where) => {
    const result = expandVars(text, env);
    if (result.malformed) {
      issues.error(
        where,
        `has a malformed "\${...}" reference; write \${NAME} (letters, digits and "_") or \${NAME:-default}`,
      );
    }
    if (result.unset.length > 0) onUnset(where, result.unset);
    return result;
  };
}

/** What {@link readUrl} says about one kind of URL field. */
export interface UrlRules {
  /** A URL of the right shape, shown in fixes. */
  readonly example: string;
  /** The fix for a URL with a user:password part: where credentials go instead. */
  readonly credentials: string;
  /**
   * The path and query may hold a secret (a webhook's token): a message then echoes the text as
   * written only up to its host. Otherwise it is echoed up to its query string.
   */
  readonly secretPath: boolean;
}

/** `mcpServers.*.url`. */
export const SERVER_URL: UrlRules = {
  example: "https://host/mcp",
  credentials: 'send credentials in "headers" instead, e.g. "Authorization": "Bearer ${TOKEN}"',
  secretPath: false,
};

/**
 * An absolute http(s) URL without user-info, `${VAR}`-expanded; null when it is not one. With a
 * reference unset or malformed the text comes back as written (the expander has reported it).
 */
export function readUrl(
  value: unknown,
  where: string,
  expand: Expander,
  issues: Issues,
  rules: UrlRules = SERVER_URL,
): string | null {
  if (typeof value !== "string" || value.trim() === "") {
    issues.error(
      where,
      `must be an absolute http(s) URL like ${show(rules.example)}, not ${describeGiven(value)}`,
    );
    return null;
  }
  const echo = echoUrl(value, rules.secretPath);
  const expanded = expand(value, where);
  // With a reference unset or malformed the real URL is unknown; that has been reported already.
  if (expanded.unset.length > 0 || expanded.malformed) return value;
  let parsed: URL | null = null;
  try {
    parsed = new URL(expanded.value);
  } catch {
    parsed = null;
  }
  if (
    parsed === null ||
    (parsed.protocol !== "http:" && parsed.protocol !== "https:") ||
    parsed.hostname === ""
  ) {
    issues.error(where, `${echo} is not an absolute http(s) URL; use e.g. ${rules.example}`);
    return null;
  }
  if (parsed.username !== "" || parsed.password !== "") {
    issues.error(where, `must not contain a user:password part; ${rules.credentials}`);
    return null;
  }
  return parsed.href;
}

/**
 * Echo only what is safe of a URL as written (variable names, not their values): nothing when it
 * may carry a user:password part, never its query string, and with `secretPath` nothing after
 * its host.
 */
function echoUrl(text: string, secretPath: boolean): string {
  if (text.includes("@")) return "the URL";
  const cut = text.replace(/[?#].*$/s, "");
  if (!secretPath) return show(cut);
  const head = /^(?:[A-Za-z][A-Za-z0-9+.-]*:\/\/)?[^/]*/.exec(cut)?.[0] ?? "";
  return show(head.length < text.length ? `${head}/...` : head);
}

/** `raw[key]` as an integer within `LIMITS[key]`; the default when absent, or when wrong (reported). */
export function readInt(raw: Json, key: keyof typeof LIMITS, parent: string, issues: Issues): number {
  const rule: IntRule = LIMITS[key];
  const value = raw[key];
  if (value === undefined) return rule.default;
  const range = rule.zeroDisables
    ? `0 (off) or an integer from ${rule.min} to ${rule.max}`
    : `an integer from ${rule.min} to ${rule.max}`;
  const where = childPath(parent, key);
  if (typeof value !== "number") {
    const unquote = typeof value === "string" && /^\s*-?\d+(\.\d+)?\s*$/.test(value);
    issues.error(
      where,
      `must be ${range}, not ${typeName(value)}${unquote ? `; write ${value.trim()} without quotes` : ""}`,
    );
    return rule.default;
  }
  const inRange = (rule.zeroDisables && value === 0) || (value >= rule.min && value <= rule.max);
  if (!Number.isInteger(value) || !inRange) {
    issues.error(where, `${value} is not allowed; use ${range} (default ${rule.default})`);
    return rule.default;
  }
  return value;
}

/** `raw[key]` as a boolean; `fallback` when absent, or when wrong (reported). */
export function readBool(raw: Json, key: string, parent: string, fallback: boolean, issues: Issues): boolean {
  const value = raw[key];
  if (value === undefined) return fallback;
  if (typeof value === "boolean") return value;
  const unquote = value === "true" || value === "false";
  issues.error(
    childPath(parent, key),
    `must be true or false, not ${typeName(value)}${unquote ? `; write ${value} without quotes` : ""}`,
  );
  return fallback;
}

/**
 * The object at `raw[key]` (JSON path `parent.key`); {} when absent, or when not an object (an
 * error reported, naming `example` as the shape wanted).
 */
export function readSection(raw: Json, key: string, parent: string, example: string, issues: Issues): Json {
  const value = raw[key];
  if (value === undefined) return {};
  if (isObject(value)) return value;
  issues.error(childPath(parent, key), `must be an object like ${example}, not ${typeName(value)}`);
  return {};
}

/** Reports every key of `raw` not in `known`, with its hint, a "did you mean", or the known keys. */
export function checkKeys(
  raw: Json,
  known: readonly string[],
  parent: string,
  hints: Record<string, string>,
  issues: Issues,
): void {
  for (const key of Object.keys(raw)) {
    if (known.includes(key)) continue;
    const hint = Object.hasOwn(hints, key) ? hints[key] : undefined;
    const close = closestKey(key, known);
    const fix =
      hint ??
      (close !== null ? `did you mean ${show(close)}?` : `remove it (known keys: ${known.join(", ")})`);
    issues.error(childPath(parent, key), `unknown key ${show(key)}; ${fix}`);
  }
}

/** The known key nearest to a typo, if it is near enough to be a plausible slip of the finger. */
export function closestKey(key: string, known: readonly string[]): string | null {
  const typed = key.toLowerCase();
  let best: string | null = null;
  let bestDistance = Number.POSITIVE_INFINITY;
  for (const candidate of known) {
    const d = editDistance(typed, candidate.toLowerCase());
    if (d < bestDistance) {
      best = candidate;
      bestDistance = d;
    }
  }
  const allowed = Math.min(3, Math.max(1, Math.floor(Math.max(typed.length, best?.length ?? 0) / 4)));
  return bestDistance <= allowed ? best : null;
}

/** Optimal-string-alignment distance: Levenshtein plus adjacent swaps, the commonest typo. */
function editDistance(a: string, b: string): number {
  const rows: number[][] = [];
  for (let i = 0; i <= a.length; i++) {
    const row: number[] = [];
    for (let j = 0; j <= b.length; j++) {
      if (i === 0 || j === 0) {
        row.push(i + j);
        continue;
      }
      const prev = rows[i - 1] ?? [];
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let d = Math.min((prev[j] ?? 0) + 1, (row[j - 1] ?? 0) + 1, (prev[j - 1] ?? 0) + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) {
        d = Math.min(d, (rows[i - 2]?.[j - 2] ?? 0) + 1);
      }
      row.push(d);
    }
    rows.push(row);
  }
  return rows[a.length]?.[b.length] ?? 0;
}

/** A plain JSON object (not an array, not a class instance). */
export function isObject(value: unknown): value is Json {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return false;
  const proto: unknown = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

/** How a value is named in a message without showing it: "a string", "an array", "null"... */
export function typeName(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  switch (typeof value) {
    case "string":
      return "a string";
    case "number":
      return "a number";
    case "boolean":
      return "a boolean";
    case "object":
      return "an object";
    default:
      return typeof value;
  }
}

/** For non-secret fields only: an empty string is named as such, anything else by its type. */
export function describeGiven(value: unknown): string {
  return value === "" || (typeof value === "string" && value.trim() === "")
    ? "an empty string"
    : typeName(value);
}

/** A JSON-quoted, length-capped echo of user text that is not a secret (keys, names, tool names). */
export function show(text: string): string {
  return JSON.stringify(text.length > 80 ? `${text.slice(0, 77)}...` : text);
}
