import "server-only";
import { readFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { ConfigError, childPath } from "./display";
import type { ConfigIssue, ConfigResult, GatehouseConfig, ServerConfig } from "./types";
import { validateConfig } from "./validate";

/** The config file's path: `GATEHOUSE_CONFIG`, else "gatehouse.json", resolved against process.cwd(). */
export function configPathFromEnv(env: Record<string, string | undefined> = process.env): string {
  const configured = env.GATEHOUSE_CONFIG?.trim();
  return resolve(/*turbopackIgnore: true*/ process.cwd(), configured ? configured : "gatehouse.json");
}

/**
 * Reads, parses and validates a config file. Never throws for bad input: an unreadable file, a
 * JSON syntax error (with line:column) or a duplicated key all come back as errors with path "".
 * `env` (default process.env) is where `${VAR}` references are looked up; a relative `cwd` is
 * resolved against the file's folder.
 */
export function loadConfigFile(
  path: string,
  env: Record<string, string | undefined> = process.env,
): ConfigResult {
  const absolute = resolve(path);
  let text: string;
  try {
    text = readFileSync(absolute, "utf8");
  } catch (err) {
    return fileError(`cannot read ${absolute}: ${readFailure(err)}`);
  }
  // Editors on Windows like to save a byte-order mark; JSON.parse would reject it.
  if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);

  const scanned = scanJson(text);
  if (!scanned.ok) {
    const { line, column } = lineColumn(text, scanned.offset);
    return fileError(`${absolute}:${line}:${column}: ${scanned.message}`);
  }
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    // The scanner accepts only valid JSON, so this is unreachable; JSON.parse's own message would
    // quote the surrounding text (possibly a secret), so it is not passed on.
    return fileError(`${absolute}: is not valid JSON`);
  }
  const result = validateConfig(raw, {
    env,
    baseDir: dirname(absolute),
    path: absolute,
    serverLines: scanned.serverLines,
  });
  if (scanned.duplicates.length > 0) {
    const errors = [...scanned.duplicates, ...result.errors];
    return { config: null, errors, warnings: result.warnings };
  }
  const dark = result.config ? darkServersWarning(result.config.servers) : null;
  return dark ? { ...result, warnings: [...result.warnings, dark] } : result;
}

/**
 * The warning that some servers will not be dialled: the default is off, and a desktop client's
 * pasted `mcpServers` never says `enabled`, so a whole pasted file starts dark without a word
 * otherwise. Names each with the line of its entry, and says which ones are switched off on
 * purpose (`"enabled": false`). Null when every server is switched on.
 */
function darkServersWarning(servers: readonly ServerConfig[]): ConfigIssue | null {
  const dark = servers.filter((s) => !s.enabled);
  if (dark.length === 0) return null;
  const named = dark.map((s) => {
    const line = s.source?.line;
    const notes = [
      ...(line ? [`line ${line}`] : []),
      ...(s.source?.enabled === false ? ['"enabled": false'] : []),
    ];
    return notes.length > 0 ? `${s.name} (${notes.join(", ")})` : s.name;
  });
  const many = dark.length > 1;
  return {
    path: "mcpServers",
    message:
      `${dark.length} ${many ? "servers are" : "server is"} dark (no "enabled": true): ${named.join(", ")}; ` +
      `Gatehouse does not dial ${many ? "them until their entries have" : "it until its entry has"} "enabled": true ` +
      `(an entry without "enabled" can also be switched on from its card on Servers)`,
  };
}

/**
 * {@link loadConfigFile} for callers that cannot go on without a valid config (boot, the CLI):
 * returns the config or throws a {@link ConfigError} carrying every error.
 */
export function loadConfig(
  path: string,
  env: Record<string, string | undefined> = process.env,
): { config: GatehouseConfig; warnings: ConfigIssue[] } {
  const result = loadConfigFile(path, env);
  if (result.config === null || result.errors.length > 0) throw new ConfigError(result.errors);
  return { config: result.config, warnings: result.warnings };
}

function fileError(message: string): ConfigResult {
  return { config: null, errors: [{ path: "", message }], warnings: [] };
}

function readFailure(err: unknown): string {
  const code = err instanceof Error && "code" in err ? String(err.code) : "";
  switch (code) {
    case "ENOENT":
      return "no such file; create it, or point GATEHOUSE_CONFIG at your config file";
    case "EACCES":
    case "EPERM":
      return "permission denied; make it readable by the user running Gatehouse";
    case "EISDIR":
      return "it is a directory; give the path of the JSON file itself";
    default:
      return code !== "" ? `${code}; check the path and the file` : "unreadable; check the path and the file";
  }
}

function lineColumn(text: string, offset: number): { line: number; column: number } {
  let line = 1;
  let lineStart = 0;
  for (let i = 0; i < offset && i < text.length; i++) {
    if (text.charCodeAt(i) === 10) {
      line++;
      lineStart = i + 1;
    }
  }
  return { line, column: offset - lineStart + 1 };
}

// ---------------------------------------------------------------------------------------------
// A strict JSON scanner. JSON.parse alone is not enough: its messages quote the text around the
// mistake (which may be a header token), not every Node version gives a position, and it keeps
// the last of two equal keys silently — a pasted server entry would vanish without a word.

type Scan =
  | { ok: true; duplicates: ConfigIssue[]; serverLines: Map<string, number> }
  | { ok: false; offset: number; message: string };

class SyntaxFailure {
  constructor(
    readonly offset: number,
    readonly message: string,
  ) {}
}

const MAX_DEPTH = 64;
const NUMBER = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y;

/**
 * Checks `text` is one JSON value, lists keys that appear twice in the same object, and finds the
 * line of each key of the top-level `mcpServers` object (the first, for a key written twice).
 */
export function scanJson(text: string): Scan {
  const duplicates: ConfigIssue[] = [];
  const serverLines = new Map<string, number>();
  let pos = 0;

  const fail = (message: string, at = pos): never => {
    throw new SyntaxFailure(at, message);
  };
  const skipSpace = (): void => {
    for (;;) {
      const c = text[pos];
      if (c === " " || c === "\t" || c === "\n" || c === "\r") pos++;
      else if (c === "/" && (text[pos + 1] === "/" || text[pos + 1] === "*"))
        fail("JSON does not allow comments; remove it");
      else return;
    }
  };
  const endedEarly = (what: string): never =>
    fail(`the file ends early; ${what} is missing (check for a missing "}" or "]")`);

  const readString = (): string => {
    const start = pos;
    pos++; // the opening quote
    for (;;) {
      const c = text.charCodeAt(pos);
      if (Number.isNaN(c)) fail('a string is not closed; add the closing "', start);
      if (c === 0x22) break;
      if (c < 0x20)
        fail("a string contains a raw line break or control character; close the string or write \\n");
      if (c === 0x5c) {
        const e = text[pos + 1];
        if (e === "u") {
          if (!/^[0-9a-fA-F]{4}$/.test(text.slice(pos + 2, pos + 6)))
            fail("\\u must be followed by 4 hex digits");
          pos += 6;
          continue;
        }
        if (e === undefined || !'"\\/bfnrt'.includes(e)) {
          fail('a string contains an invalid escape; write a backslash as \\\\ (e.g. "C:\\\\path")');
        }
        pos += 2;
        continue;
      }
      pos++;
    }
    pos++; // the closing quote
    return JSON.parse(text.slice(start, pos)) as string;
  };

  const readValue = (path: string, depth: number): void => {
    if (depth > MAX_DEPTH) fail(`nesting is deeper than ${MAX_DEPTH} levels`);
    skipSpace();
    const c = text[pos];
    if (c === undefined) endedEarly("a value");
    if (c === "{") {
      readObject(path, depth);
      return;
    }
    if (c === "[") {
      readArray(path, depth);
      return;
    }
    if (c === '"') {
      readString();
      return;
    }
    if (c === "'") fail("strings must use double quotes, not single quotes");
    if (c === "-" || (c !== undefined && c >= "0" && c <= "9")) {
      NUMBER.lastIndex = pos;
      if (!NUMBER.test(text)) fail("invalid number");
      pos = NUMBER.lastIndex;
      return;
    }
    for (const literal of ["true", "false", "null"]) {
      if (text.startsWith(literal, pos)) {
        pos += literal.length;
        return;
      }
    }
    fail("expected a value: a string in double quotes, a number, true, false, null, {...} or [...]");
  };

  const readObject = (path: string, depth: number): void => {
    pos++; // {
    const seen = new Map<string, number>();
    skipSpace();
    if (text[pos] === "}") {
      pos++;
      return;
    }
    for (;;) {
      skipSpace();
      const c = text[pos];
      if (c === undefined) endedEarly('a "}"');
      if (c === "}") fail('a trailing comma before "}" is not allowed in JSON; remove the comma');
      if (c === "'") fail("property names must use double quotes, not single quotes");
      if (c !== '"') fail("expected a property name in double quotes");
      const keyAt = pos;
      const key = readString();
      const keyPath = childPath(path, key);
      const first = seen.get(key);
      if (first !== undefined) {
        const lines = `${lineColumn(text, first).line} and ${lineColumn(text, keyAt).line}`;
        duplicates.push({
          path: keyPath,
          message: `appears twice in the same object (lines ${lines}); JSON keeps only the last one, so rename or remove one`,
        });
      } else {
        seen.set(key, keyAt);
        // Only the keys of this one object are server entries: the same name as a string value,
        // or as a key deeper down (an env variable, a header), is something else.
        if (depth === 1 && path === "mcpServers") serverLines.set(key, lineColumn(text, keyAt).line);
      }
      skipSpace();
      if (text[pos] !== ":") {
        if (text[pos] === undefined) endedEarly('a ":"');
        fail('expected ":" after the property name');
      }
      pos++;
      readValue(keyPath, depth + 1);
      skipSpace();
      const next = text[pos];
      if (next === ",") {
        pos++;
        continue;
      }
      if (next === "}") {
        pos++;
        return;
      }
      if (next === undefined) endedEarly('a "}"');
      fail('expected "," or "}" after a property value (is a comma missing?)');
    }
  };

  const readArray = (path: string, depth: number): void => {
    pos++; // [
    skipSpace();
    if (text[pos] === "]") {
      pos++;
      return;
    }
    for (let index = 0; ; index++) {
      skipSpace();
      if (text[pos] === "]") fail('a trailing comma before "]" is not allowed in JSON; remove the comma');
      readValue(childPath(path, index), depth + 1);
      skipSpace();
      const next = text[pos];
      if (next === ",") {
        pos++;
        continue;
      }
      if (next === "]") {
        pos++;
        return;
      }
      if (next === undefined) endedEarly('a "]"');
      fail('expected "," or "]" after an array element (is a comma missing?)');
    }
  };

  try {
    skipSpace();
    if (pos >= text.length) fail('the file is empty; it needs at least {"mcpServers": {}}');
    readValue("", 0);
    skipSpace();
    if (pos < text.length) fail("unexpected text after the end of the JSON value; remove it");
    return { ok: true, duplicates, serverLines };
  } catch (err) {
    if (err instanceof SyntaxFailure) return { ok: false, offset: err.offset, message: err.message };
    throw err;
  }
}
