import "server-only";
import { childPath } from "./display";
import { writeRefs } from "./expand";
import type { Issues } from "./readers";
import {
  checkKeys,
  isObject,
  readBool,
  readInt,
  readUrl,
  reportingExpander,
  show,
  typeName,
} from "./readers";
import { readAuth } from "./server-auth";
import {
  readAllowTools,
  readArgs,
  readCommand,
  readCwd,
  readEnv,
  readHeaders,
  readMaxArgumentBytes,
  readResources,
} from "./server-fields";
import { readRoots } from "./server-roots";
import type { ServerConfig, Transport, ValidateOptions } from "./types";

/**
 * One entry of `mcpServers`: its name, which kind of server it is (stdio or HTTP), which keys
 * apply to that kind, and the record with every default applied.
 */

/** Server names: no "_" because a local tool name is `<server>_<tool>` and must split unambiguously. */
export const SERVER_NAME_PATTERN = /^[a-z][a-z0-9-]{0,30}$/;

const STDIO_KEYS = ["command", "args", "env", "cwd"] as const;
const HTTP_KEYS = ["url", "headers", "auth"] as const;
const SERVER_KEYS = [
  ...STDIO_KEYS,
  ...HTTP_KEYS,
  "type",
  "allowPrivate",
  "allowTools",
  "maxTools",
  "timeoutMs",
  "minIntervalMs",
  "maxFrameBytes",
  "enabled",
  "resources",
  "maxArgumentBytes",
  "roots",
] as const;

/** Keys other MCP clients use, so a pasted entry gets a real fix rather than a bare "unknown". */
const SERVER_HINTS: Record<string, string> = {
  disabled: 'Gatehouse uses "enabled" instead (servers stay dark unless "enabled": true); remove "disabled"',
  autoApprove:
    'tools are enabled one by one in the browser, and "allowTools" limits which are considered; remove it',
  alwaysAllow:
    'tools are enabled one by one in the browser, and "allowTools" limits which are considered; remove it',
  timeout: 'use "timeoutMs" (milliseconds) instead',
  transportType: 'use "type" ("stdio", "http" or "sse") instead, or leave it out',
  serverUrl: 'use "url" instead',
  httpUrl: 'use "url" instead',
  // Without this, edit distance would suggest "cwd".
  cmd: 'use "command" instead',
};

/**
 * Validates one entry; every problem is reported to `issues`. Returns the record (meaningful only
 * when no error was reported), or null when the entry is not an object at all.
 */
export function validateServer(
  name: string,
  raw: unknown,
  path: string,
  opts: ValidateOptions,
  issues: Issues,
): ServerConfig | null {
  if (!SERVER_NAME_PATTERN.test(name)) {
    const suggestion = suggestServerName(name);
    issues.error(
      path,
      `server name ${show(name)} is not allowed; use a lowercase letter, then up to 30 lowercase letters, digits or "-" (^[a-z][a-z0-9-]{0,30}$; no "_", because local tool names are <server>_<tool>)` +
        (suggestion ? `, e.g. ${show(suggestion)}` : ""),
    );
  }
  if (!isObject(raw)) {
    issues.error(
      path,
      `must be an object like {"command": "npx", "args": ["..."]} or {"url": "https://host/mcp"}, not ${typeName(raw)}`,
    );
    return null;
  }
  checkKeys(raw, SERVER_KEYS, path, SERVER_HINTS, issues);
  const at = (key: string) => childPath(path, key);

  // Read first: whether an unset ${VAR} is an error or a warning depends on it.
  const enabled = readBool(raw, "enabled", path, false, issues);
  const unsetVars: { path: string; names: string[] }[] = [];
  const expand = reportingExpander(opts.env, issues, (where, unset) => {
    const refs = writeRefs(unset);
    unsetVars.push({ path: where, names: unset });
    const names = unset.join(", ");
    const one = unset.length === 1;
    if (enabled) {
      issues.error(
        where,
        `uses ${refs}, which ${one ? "is" : "are"} not set; set ${names} in Gatehouse's environment, or set "enabled": false`,
      );
    } else {
      issues.warn(
        where,
        `uses ${refs}, which ${one ? "is" : "are"} not set; this dark server cannot be enabled until ${one ? "it is" : "they are"} set`,
      );
    }
  });

  const hasCommand = raw.command !== undefined;
  const hasUrl = raw.url !== undefined;
  let kind: "stdio" | "http" | null = null;
  if (hasCommand && hasUrl) {
    issues.error(
      path,
      'has both "command" and "url"; keep "command" for a local stdio server or "url" for a remote HTTP server',
    );
  } else if (hasCommand) {
    kind = "stdio";
  } else if (hasUrl) {
    kind = "http";
  } else {
    issues.error(
      path,
      'needs "command" (a local stdio server) or "url" (a remote streamable-HTTP server); add one of them',
    );
  }

  let transport: Transport = kind === "http" ? "http" : "stdio";
  const type = raw.type;
  if (type !== undefined) {
    if (type !== "stdio" && type !== "http" && type !== "sse") {
      issues.error(
        at("type"),
        `${typeof type === "string" ? show(type) : typeName(type)} is not a transport type; use "stdio", "http" or "sse"` +
          (type === "streamable-http" ? ' ("http" means streamable HTTP)' : ""),
      );
    } else if (kind === "stdio" && type !== "stdio") {
      issues.error(at("type"), `${show(type)} does not agree with "command"; use "stdio" or remove "type"`);
    } else if (kind === "http" && type === "stdio") {
      issues.error(
        at("type"),
        '"stdio" does not agree with "url"; use "http" (or "sse" for a legacy SSE server), or remove "type"',
      );
    } else if (kind === "http" && type === "sse") {
      transport = "sse";
    }
  }

  // Keys of the other kind are errors; their contents are then not checked, one message is enough.
  const allowed = (key: (typeof STDIO_KEYS)[number] | (typeof HTTP_KEYS)[number]): boolean => {
    if (raw[key] === undefined) return false;
    if (kind === "http" && key !== "command" && (STDIO_KEYS as readonly string[]).includes(key)) {
      issues.error(
        at(key),
        key === "env"
          ? 'is only for stdio servers (with "command"); send an HTTP server its credentials in "headers"'
          : `is only for stdio servers (with "command"); remove it from this "url" server`,
      );
      return false;
    }
    if (kind === "stdio" && (key === "headers" || key === "auth")) {
      issues.error(
        at(key),
        key === "auth"
          ? 'is only for HTTP servers (with "url"); a stdio server signs in by itself, or takes its credentials through "env"'
          : 'is only for HTTP servers (with "url"); pass credentials to a stdio server through "env"',
      );
      return false;
    }
    return true;
  };

  const command = allowed("command")
    ? readCommand(raw.command, at("command"), raw.args !== undefined, issues)
    : null;
  const args = allowed("args") ? readArgs(raw.args, at("args"), expand, issues) : [];
  const env = allowed("env") ? readEnv(raw.env, at("env"), expand, issues) : {};
  let cwd: string | null = kind === "stdio" ? opts.baseDir : null;
  if (allowed("cwd")) cwd = readCwd(raw.cwd, at("cwd"), opts.baseDir, issues) ?? cwd;
  const url = allowed("url") ? readUrl(raw.url, at("url"), expand, issues) : null;
  const headers = allowed("headers") ? readHeaders(raw.headers, at("headers"), expand, issues) : {};
  const headerNames = isObject(raw.headers) ? Object.keys(raw.headers) : [];
  const auth = allowed("auth") ? readAuth(raw, path, headerNames, expand, issues) : undefined;

  const allowPrivate = readBool(raw, "allowPrivate", path, false, issues);
  const maxTools = readInt(raw, "maxTools", path, issues);
  const allowTools = readAllowTools(raw, path, maxTools, issues);
  const resources = readResources(raw, path, issues);
  const maxArgumentBytes = readMaxArgumentBytes(raw, path, issues);
  const roots = readRoots(raw, path, expand, issues);

  return {
    name,
    transport,
    command: kind === "stdio" ? command : null,
    args: kind === "stdio" ? args : [],
    env: kind === "stdio" ? env : {},
    cwd: kind === "stdio" ? cwd : null,
    url: kind === "http" ? url : null,
    headers: kind === "http" ? headers : {},
    allowPrivate,
    allowTools,
    maxTools,
    timeoutMs: readInt(raw, "timeoutMs", path, issues),
    minIntervalMs: readInt(raw, "minIntervalMs", path, issues),
    maxFrameBytes: readInt(raw, "maxFrameBytes", path, issues),
    enabled,
    source: {
      file: opts.path ?? "",
      line: opts.serverLines?.get(name) ?? null,
      enabled: typeof raw.enabled === "boolean" ? raw.enabled : null,
      ...(unsetVars.length > 0 ? { unset: unsetVars } : {}),
    },
    // Absent rather than empty when the entry has none, like the file.
    ...(resources ? { resources } : {}),
    ...(maxArgumentBytes !== undefined ? { maxArgumentBytes } : {}),
    ...(roots ? { roots } : {}),
    ...(auth && kind === "http" ? { auth } : {}),
  };
}

/** A name like `name` that matches {@link SERVER_NAME_PATTERN} (webhook names follow the same rule), if one is near. */
export function suggestServerName(name: string): string | null {
  const candidate = name
    .toLowerCase()
    .replace(/[^a-z0-9-]+/g, "-")
    .replace(/^[^a-z]+/, "")
    .slice(0, 31)
    .replace(/-+$/, "");
  return candidate !== name && SERVER_NAME_PATTERN.test(candidate) ? candidate : null;
}
