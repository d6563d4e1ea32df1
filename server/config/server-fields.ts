import "server-only";
import { resolve as resolvePath } from "node:path";
import { childPath } from "./display";
import { CREDENTIAL_NAME, writeRefs } from "./expand";
import type { Expander, Issues, Json } from "./readers";
import { checkKeys, describeGiven, isObject, show, typeName } from "./readers";
import type { ServerResourcesConfig } from "./types";

/**
 * The fields of one `mcpServers` entry that need more than a number or a boolean: what a stdio
 * server runs (command, args, env, cwd), what an HTTP server is sent (headers), `allowTools`,
 * `resources` and `maxArgumentBytes` (`roots` has server-roots.ts).
 * Each reader gets the value as written and its JSON path, and reports every problem it finds.
 */

const HEADER_NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

/** `command`: a non-empty program name; null when it is not one. `hasArgs`: whether the entry has "args". */
export function readCommand(value: unknown, where: string, hasArgs: boolean, issues: Issues): string | null {
  if (typeof value !== "string" || value.trim() === "") {
    issues.error(
      where,
      `must be a non-empty string naming the program to run, e.g. "npx", not ${describeGiven(value)}`,
    );
    return null;
  }
  if (/\s/.test(value.trim()) && !hasArgs) {
    // The command is spawned without a shell, so "npx -y pkg" looks for a program with that whole name.
    issues.warn(
      where,
      'contains spaces and there are no "args"; the command is not run through a shell, so put its arguments in "args", e.g. "command": "npx", "args": ["-y", "..."]',
    );
  }
  return value;
}

/** `args`: strings, each `${VAR}`-expanded; elements that are not strings are reported and left out. */
export function readArgs(value: unknown, where: string, expand: Expander, issues: Issues): string[] {
  const args: string[] = [];
  if (!Array.isArray(value)) {
    issues.error(where, `must be an array of strings, e.g. ["-y", "pkg"], not ${typeName(value)}`);
    return args;
  }
  value.forEach((arg: unknown, i) => {
    const at = childPath(where, i);
    if (typeof arg !== "string") {
      issues.error(at, `must be a string, not ${typeName(arg)}; put it in double quotes`);
      return;
    }
    const expanded = expand(arg, at);
    const secretish = expanded.names.filter((n) => CREDENTIAL_NAME.test(n));
    if (secretish.length > 0) {
      issues.warn(
        at,
        `uses ${writeRefs(secretish)}; arguments are shown to owners and in logs, so pass secrets through "env" instead`,
      );
    }
    args.push(expanded.value);
  });
  return args;
}

/** `env`: the child's variables, values `${VAR}`-expanded. Values are secrets: no message describes one. */
export function readEnv(
  value: unknown,
  where: string,
  expand: Expander,
  issues: Issues,
): Record<string, string> {
  const env: Record<string, string> = {};
  if (!isObject(value)) {
    issues.error(where, `must be an object of strings, e.g. {"LOG_LEVEL": "warn"}, not ${typeName(value)}`);
    return env;
  }
  for (const [key, v] of Object.entries(value)) {
    const at = childPath(where, key);
    if (key === "" || key.includes("=") || key.includes("\0")) {
      issues.error(at, 'is not a usable variable name; a name must be non-empty, without "=" or NUL');
    }
    // Never describe the value itself: env values are secrets.
    if (typeof v !== "string") {
      issues.error(at, `must be a string, not ${typeName(v)}; put the value in double quotes`);
      continue;
    }
    const expanded = expand(v, at);
    if (expanded.value.includes("\0")) {
      issues.error(at, `contains a NUL character (after \${VAR} expansion); remove it`);
    }
    env[key] = expanded.value;
  }
  return env;
}

/** `cwd`: resolved against `baseDir` (the config file's folder); null when it is not usable. */
export function readCwd(value: unknown, where: string, baseDir: string, issues: Issues): string | null {
  if (typeof value !== "string" || value.trim() === "") {
    issues.error(
      where,
      `must be a non-empty string (a folder, relative to the config file's folder or absolute), not ${describeGiven(value)}`,
    );
    return null;
  }
  if (value === "~" || value.startsWith("~/")) {
    issues.error(
      where,
      '"~" is not expanded; write an absolute path or one relative to the config file\'s folder',
    );
    return null;
  }
  return resolvePath(baseDir, value);
}

/**
 * `headers`: sent on every request, values `${VAR}`-expanded. Names are unique ignoring case;
 * values are secrets: no message describes one.
 */
export function readHeaders(
  value: unknown,
  where: string,
  expand: Expander,
  issues: Issues,
): Record<string, string> {
  const headers: Record<string, string> = {};
  if (!isObject(value)) {
    issues.error(
      where,
      `must be an object of strings, e.g. {"Authorization": "Bearer \${TOKEN}"}, not ${typeName(value)}`,
    );
    return headers;
  }
  const seen = new Map<string, string>();
  for (const [key, v] of Object.entries(value)) {
    const at = childPath(where, key);
    if (!HEADER_NAME.test(key)) {
      issues.error(at, "is not a valid header name; use letters, digits and -, e.g. X-Api-Key");
    } else {
      const first = seen.get(key.toLowerCase());
      if (first !== undefined) {
        issues.error(at, `repeats ${show(first)} (header names ignore case); keep one of them`);
      } else {
        seen.set(key.toLowerCase(), key);
      }
    }
    // Never describe the value itself: header values are secrets.
    if (typeof v !== "string") {
      issues.error(at, `must be a string, not ${typeName(v)}; put the value in double quotes`);
      continue;
    }
    const expanded = expand(v, at);
    if (/[\r\n\0]/.test(expanded.value)) {
      issues.error(
        at,
        `contains a line break or NUL character (after \${VAR} expansion), which cannot be sent in a header; remove it`,
      );
    }
    headers[key] = expanded.value;
  }
  return headers;
}

/** `allowTools`: unique non-empty names, at most `maxTools` of them; null when absent (all tools). */
export function readAllowTools(raw: Json, path: string, maxTools: number, issues: Issues): string[] | null {
  const value = raw.allowTools;
  const where = childPath(path, "allowTools");
  if (value === undefined) return null;
  if (!Array.isArray(value)) {
    issues.error(
      where,
      `must be an array of tool names, e.g. ["get_task"], not ${typeName(value)}; leave it out to consider all tools`,
    );
    return null;
  }
  const tools: string[] = [];
  value.forEach((tool: unknown, i) => {
    const at = childPath(where, i);
    if (typeof tool !== "string" || tool === "") {
      issues.error(at, `must be a non-empty tool name, not ${describeGiven(tool)}`);
    } else if (tools.includes(tool)) {
      issues.error(at, `${show(tool)} is listed twice; remove one`);
    } else {
      tools.push(tool);
    }
  });
  if (value.length > maxTools) {
    issues.error(
      where,
      `lists ${value.length} tools but maxTools is ${maxTools}; raise "maxTools" to at least ${value.length} or shorten the list`,
    );
  }
  return tools;
}

/**
 * The bounds of `maxArgumentBytes`: bytes of JSON a call to the server may send as arguments.
 * At most 1 MiB, the global bound every call keeps (`ARGUMENT_LIMITS.maxBytes` in
 * server/calls/argument-size.ts; a test keeps the two equal): a server's bound may only lower it,
 * because the global bound is what the rest is sized for (a request body's 4 MiB cap at the edge,
 * a call's row, the reviewer's page, a rule's view of the arguments). At least 1 KiB, like
 * `maxFrameBytes`: an ordinary call (a path and a few fields) is a few hundred bytes, and a
 * smaller value is more likely a unit slip (64 meant as KiB) than a bound anyone wants.
 */
export const ARGUMENT_BYTES = { min: 1024, max: 1024 * 1024 } as const;

/**
 * `maxArgumentBytes`: an integer within {@link ARGUMENT_BYTES}; undefined when absent (the global
 * 1 MiB applies) or wrong (reported).
 */
export function readMaxArgumentBytes(raw: Json, path: string, issues: Issues): number | undefined {
  const value = raw.maxArgumentBytes;
  if (value === undefined) return undefined;
  const where = childPath(path, "maxArgumentBytes");
  const range = `an integer from ${ARGUMENT_BYTES.min} to ${ARGUMENT_BYTES.max} (1 KiB to 1 MiB; a server's bound can only lower the global 1 MiB)`;
  if (typeof value !== "number") {
    const unquote = typeof value === "string" && /^\s*-?\d+(\.\d+)?\s*$/.test(value);
    issues.error(
      where,
      `must be ${range}, not ${typeName(value)}${unquote ? `; write ${value.trim()} without quotes` : ""}`,
    );
    return undefined;
  }
  if (!Number.isInteger(value) || value < ARGUMENT_BYTES.min || value > ARGUMENT_BYTES.max) {
    issues.error(where, `${value} is not allowed; use ${range}, or leave it out to keep 1 MiB`);
    return undefined;
  }
  return value;
}

/** Most globs in one server's `resources.allow`. */
export const MAX_RESOURCE_GLOBS = 100;
/** Longest glob in `resources.allow`. */
const MAX_RESOURCE_GLOB_CHARS = 1024;
const URI_SCHEME = /^[a-z][a-z0-9+.-]*:/;
/** A glob whose wildcard comes right after the scheme (and its slashes) admits every URI of it. */
const WHOLE_SCHEME = /^[a-z][a-z0-9+.-]*:\/*$/;

/**
 * `resources`: `{"allow": [globs on resource URIs]}`; absent when the entry has none. A glob
 * must be written in the canonical form URL parsing gives back, because the agent's URI must be
 * in that form to match (server/agent-mcp/resources.ts): a glob with `..`, a space or an encoded
 * dot or slash could never match, and is an error rather than a rule that silently does nothing.
 */
export function readResources(raw: Json, path: string, issues: Issues): ServerResourcesConfig | undefined {
  const value = raw.resources;
  const where = childPath(path, "resources");
  if (value === undefined) return undefined;
  if (!isObject(value)) {
    issues.error(
      where,
      `must be an object like {"allow": ["file:///srv/docs/*"]}, not ${typeName(value)}; leave it out to let agents read only the resources the server lists`,
    );
    return undefined;
  }
  checkKeys(
    value,
    ["allow"],
    where,
    {
      templates:
        'resource templates are not passed to agents; list the URIs agents may read as globs in "allow"',
      deny: 'agents read only what the server lists and what "allow" adds; remove "deny"',
    },
    issues,
  );
  const allowAt = childPath(where, "allow");
  const list = value.allow;
  if (list === undefined) return { allow: [] };
  if (!Array.isArray(list)) {
    issues.error(
      allowAt,
      `must be an array of URI globs, e.g. ["file:///srv/docs/*"], not ${typeName(list)}`,
    );
    return { allow: [] };
  }
  if (list.length > MAX_RESOURCE_GLOBS) {
    issues.error(
      allowAt,
      `lists ${list.length} globs; at most ${MAX_RESOURCE_GLOBS} are allowed, so merge some with "*"`,
    );
  }
  const allow: string[] = [];
  list.forEach((glob: unknown, i) => {
    const at = childPath(allowAt, i);
    const problem = resourceGlobProblem(glob);
    if (problem) {
      issues.error(at, problem);
      return;
    }
    const text = glob as string;
    if (allow.includes(text)) {
      issues.error(at, `${show(text)} is listed twice; remove one`);
      return;
    }
    const wildcard = text.search(/[*?]/);
    const fixed = wildcard < 0 ? text : text.slice(0, wildcard);
    if (wildcard >= 0 && WHOLE_SCHEME.test(fixed)) {
      issues.warn(
        at,
        `${show(text)} lets agents read every ${show(fixed.slice(0, fixed.indexOf(":") + 1))} URI this server will answer, listed or not; name a folder or a host, e.g. "file:///srv/docs/*"`,
      );
    }
    allow.push(text);
  });
  return { allow };
}

/** Why `glob` cannot be a `resources.allow` entry, or null when it can. */
function resourceGlobProblem(glob: unknown): string | null {
  if (typeof glob !== "string" || glob === "") {
    return `must be a glob on resource URIs like "file:///srv/docs/*", not ${describeGiven(glob)}`;
  }
  if (glob.length > MAX_RESOURCE_GLOB_CHARS) {
    return `is ${glob.length} characters long; at most ${MAX_RESOURCE_GLOB_CHARS} are allowed`;
  }
  if (!URI_SCHEME.test(glob)) {
    return `${show(glob)} does not start with a lowercase URI scheme; write the whole URI, e.g. "file:///srv/docs/*"`;
  }
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what is refused here.
  if (/[\u0000-\u0020\u007f-\u009f\\]/.test(glob) || /%(2e|2f|5c|00)/i.test(glob)) {
    return `${show(glob)} holds a space, a control character, a backslash or an encoded ".", "/", "\\" or NUL, which no URI an agent may read can hold; write spaces as %20 and leave out the rest`;
  }
  // With its wildcards filled in, the glob must be a URL that parses back to itself.
  const sample = glob.replace(/[*?]/g, "x");
  let href: string;
  try {
    href = new URL(sample).href;
  } catch {
    return `${show(glob)} is not a URI; write it like "file:///srv/docs/*"`;
  }
  if (href !== sample) {
    return `${show(glob)} is not written as URL parsing gives it back (${show(href)}: no ".." or "." segments, non-ASCII percent-encoded), so no URI could match it; write it in that form`;
  }
  return null;
}
