import "server-only";
import { resolve as resolvePath } from "node:path";
import { childPath } from "./display";
import { writeRefs } from "./expand";
import type { Expander, Issues, Json } from "./readers";
import { describeGiven, isObject, show, typeName } from "./readers";

/**
 * The fields of one `mcpServers` entry that need more than a number or a boolean: what a stdio
 * server runs (command, args, env, cwd), what an HTTP server is sent (headers), and `allowTools`.
 * Each reader gets the value as written and its JSON path, and reports every problem it finds.
 */

const SECRET_LOOKING_NAME = /TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|CREDENTIAL|AUTH/i;
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
    const secretish = expanded.names.filter((n) => SECRET_LOOKING_NAME.test(n));
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
