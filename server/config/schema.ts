import "server-only";
import { resolve as resolvePath } from "node:path";

/**
 * Validation of gatehouse.json (PRODUCT.md §2).
 *
 * A hand-written walker rather than a zod schema: every message must carry the JSON path and a
 * fix, unknown keys need "did you mean" suggestions, and secret values (header and env values)
 * must never reach a message — all easier to guarantee when each check writes its own text.
 */

/** How Gatehouse talks to a server: a child process, streamable HTTP, or legacy HTTP+SSE. */
export type Transport = "stdio" | "http" | "sse";

/** One entry of `mcpServers`, validated, with defaults applied and `${VAR}` references expanded. */
export interface ServerConfig {
  /** The key in `mcpServers`; matches {@link SERVER_NAME_PATTERN}. */
  name: string;
  /** "stdio" when the entry has `command`; "http" when it has `url` ("sse" when `type: "sse"`). */
  transport: Transport;
  /** stdio only: the program to run (not run through a shell); null for HTTP servers. */
  command: string | null;
  /** stdio only: arguments, `${VAR}`-expanded; [] otherwise. */
  args: string[];
  /** stdio only: the child's environment, values `${VAR}`-expanded (secrets); {} otherwise. */
  env: Record<string, string>;
  /** stdio only: absolute working directory, resolved against the config file's folder (default: that folder); null for HTTP servers. */
  cwd: string | null;
  /** http/sse only: the absolute http(s) URL, `${VAR}`-expanded; null for stdio servers. */
  url: string | null;
  /** http/sse only: headers sent on every request, values `${VAR}`-expanded (secrets); {} otherwise. */
  headers: Record<string, string>;
  /** May the server's address be loopback / private / link-local. Default false. */
  allowPrivate: boolean;
  /** Only these remote tool names are ever considered; null (the default) = all. */
  allowTools: string[] | null;
  /** Most tools admitted to the catalogue. Default 12, integer 1..200. */
  maxTools: number;
  /** One request's deadline. Default 15000, integer 100..600000. */
  timeoutMs: number;
  /** Least gap between two requests. Default 0, integer 0..60000. */
  minIntervalMs: number;
  /** Largest single message accepted. Default 4 MiB, integer 1024..256 MiB. */
  maxFrameBytes: number;
  /** Dial this server at all. Default false: a described server stays dark until switched on. */
  enabled: boolean;
}

/** The `approvals` section. */
export interface ApprovalsConfig {
  /** A pending call expires after this long. Default 900, integer 10..604800. */
  expireAfterSeconds: number;
  /** How long a held MCP call waits for a decision. Default 60, integer 0..3600. */
  waitSeconds: number;
  /** May a user approve a call they requested. Default false. */
  selfApproval: boolean;
}

/** The `catalogue` section. */
export interface CatalogueConfig {
  /** Tool descriptions are cut to this length. Default 1024, integer 64..65536. */
  descriptionMaxChars: number;
  /** Periodic refresh interval. Default 300; 0 disables, otherwise integer 10..86400. */
  refreshSeconds: number;
  /**
   * `catalogue.webhook` (issue 5): an absolute http(s) URL each refresh's changes are POSTed to
   * as JSON, `${VAR}`-expanded; absent when the file has none. Its path and query may hold a
   * secret: never shown or logged, only its origin.
   */
  webhook?: string;
  /** May the webhook's address be loopback / private / link-local. Absent means false. */
  webhookAllowPrivate?: boolean;
}

/** The whole validated file. */
export interface GatehouseConfig {
  /** Absolute path of the file read; "" when validated from an object. */
  path: string;
  /** Every server, enabled or dark, sorted by name. */
  servers: ServerConfig[];
  approvals: ApprovalsConfig;
  catalogue: CatalogueConfig;
  /** `agentEndpoint`: extra Host/Origin values `/mcp` accepts; absent when the file has none. */
  agentEndpoint?: AgentEndpointConfig;
}

/**
 * The `agentEndpoint` section (issue 7). `/mcp` always accepts 127.0.0.1, localhost and [::1] on
 * PORT, and GATEHOUSE_PUBLIC_ORIGIN; these lists add names it is reached under (DNS-rebinding
 * protection refuses every other Host and Origin).
 */
export interface AgentEndpointConfig {
  /** `Host` header values, `name[:port]`, e.g. "gatehouse.lan:3000". */
  allowedHosts: string[];
  /** `Origin` header values, `http(s)://name[:port]`, e.g. "https://gatehouse.example.com". */
  allowedOrigins: string[];
}

/** One finding. `path` is a JSON path like "mcpServers.files.url" ("" for the file itself); `message` includes a fix. */
export interface ConfigIssue {
  path: string;
  message: string;
}

/** `config` is null whenever there is at least one error. Messages never contain secret values. */
export interface ConfigResult {
  config: GatehouseConfig | null;
  errors: ConfigIssue[];
  warnings: ConfigIssue[];
}

/** Server names: no "_" because a local tool name is `<server>_<tool>` and must split unambiguously. */
export const SERVER_NAME_PATTERN = /^[a-z][a-z0-9-]{0,30}$/;

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
} as const satisfies Record<string, IntRule>;

/** Thrown by callers that cannot continue with an invalid configuration (boot, the CLI). */
export class ConfigError extends Error {
  readonly issues: ConfigIssue[];
  constructor(issues: ConfigIssue[], options?: { cause?: unknown }) {
    const lines = issues.map((issue) => formatIssue("error", issue));
    const count = issues.length === 1 ? "1 error" : `${issues.length} errors`;
    super(`invalid configuration (${count}):\n${lines.join("\n")}`, options);
    this.name = "ConfigError";
    this.issues = issues;
  }
}

/** Human text, one line per issue, errors first: `error: mcpServers.files.url: "srv/mcp" is not ...`. */
export function formatIssues(result: ConfigResult): string {
  return [
    ...result.errors.map((issue) => formatIssue("error", issue)),
    ...result.warnings.map((issue) => formatIssue("warning", issue)),
  ].join("\n");
}

function formatIssue(level: "error" | "warning", issue: ConfigIssue): string {
  return issue.path === "" ? `${level}: ${issue.message}` : `${level}: ${issue.path}: ${issue.message}`;
}

/**
 * A view of a server safe to show anywhere: no header values, no env values, URL without
 * user-info, query string or fragment. stdio: the command and its args (args are shown, env is
 * not); http/sse: origin + pathname.
 */
export function describeTarget(s: ServerConfig): string {
  if (s.transport === "stdio") return [s.command ?? "", ...s.args].map(quoteArg).join(" ");
  return safeUrl(s.url ?? "");
}

/** origin + pathname of a URL; for text that does not parse (a dark server's unexpanded `${VAR}`), the same cut by hand. */
export function safeUrl(url: string): string {
  // The URL parser would accept "https://${HOST}/mcp" and lowercase the reference; show it as written.
  if (!url.includes("${")) {
    try {
      const u = new URL(url);
      return `${u.origin}${u.pathname}`;
    } catch {
      // fall through to the cut by hand
    }
  }
  return url.replace(/[?#].*$/s, "").replace(/^([^:/?#]+:\/\/)?[^/?#]*@/, "$1");
}

function quoteArg(arg: string): string {
  return /^[\w\-./:=@%+,]+$/.test(arg) ? arg : JSON.stringify(arg);
}

/**
 * JSON path of a child: `parent.key`, or `parent["odd key"]` when the key would not read back
 * unambiguously (dots, spaces, a leading digit).
 */
export function childPath(parent: string, key: string | number): string {
  if (typeof key === "number") return `${parent}[${key}]`;
  if (/^[A-Za-z_$][\w$-]*$/.test(key)) return parent === "" ? key : `${parent}.${key}`;
  return `${parent}[${JSON.stringify(key)}]`;
}

/** Result of expanding `${VAR}` references in one string. */
export interface Expansion {
  value: string;
  /** Names referenced but unset (their references are left as written). */
  unset: string[];
  /** A `${` without a valid `NAME}` / `NAME:-default}` after it. */
  malformed: boolean;
  /** Every name referenced. */
  names: string[];
}

const REFERENCE = /^([A-Za-z_][A-Za-z0-9_]*)(?::-(.*))?$/s;

/**
 * Expands `${NAME}` and `${NAME:-default}` (the default applies when NAME is unset or empty, as
 * in the shell and in other MCP clients' config files). An unset reference without a default is
 * left as written so a dark server's record still shows what it needs, never an empty credential.
 */
export function expandVars(text: string, env: Record<string, string | undefined>): Expansion {
  const unset: string[] = [];
  const names: string[] = [];
  let malformed = false;
  let value = "";
  let at = 0;
  for (;;) {
    const start = text.indexOf("${", at);
    if (start < 0) {
      value += text.slice(at);
      break;
    }
    value += text.slice(at, start);
    const end = text.indexOf("}", start + 2);
    if (end < 0) {
      malformed = true;
      value += text.slice(start);
      break;
    }
    const written = text.slice(start, end + 1);
    at = end + 1;
    const match = REFERENCE.exec(text.slice(start + 2, end));
    const name = match?.[1];
    if (match === null || name === undefined) {
      malformed = true;
      value += written;
      continue;
    }
    if (!names.includes(name)) names.push(name);
    const fallback = match[2];
    // Object.hasOwn: a plain-object env must not answer "constructor" from its prototype.
    const current = Object.hasOwn(env, name) ? env[name] : undefined;
    if (current !== undefined && !(fallback !== undefined && current === "")) value += current;
    else if (fallback !== undefined) value += fallback;
    else {
      if (!unset.includes(name)) unset.push(name);
      value += written;
    }
  }
  return { value, unset, malformed, names };
}

// ---------------------------------------------------------------------------------------------
// The walker

const TOP_KEYS = ["mcpServers", "approvals", "catalogue", "agentEndpoint"] as const;
const APPROVAL_KEYS = ["expireAfterSeconds", "waitSeconds", "selfApproval"] as const;
const CATALOGUE_KEYS = ["descriptionMaxChars", "refreshSeconds", "webhook", "webhookAllowPrivate"] as const;
const STDIO_KEYS = ["command", "args", "env", "cwd"] as const;
const HTTP_KEYS = ["url", "headers"] as const;
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
] as const;

/** Keys other MCP clients use, so a pasted entry gets a real fix rather than a bare "unknown". */
const TOP_HINTS: Record<string, string> = {
  servers: 'Gatehouse reads servers from "mcpServers"; rename "servers" to "mcpServers"',
};
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

const SECRET_LOOKING_NAME = /TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|CREDENTIAL|AUTH/i;
const HEADER_NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

type Json = Record<string, unknown>;

class Issues {
  readonly errors: ConfigIssue[] = [];
  readonly warnings: ConfigIssue[] = [];
  error(path: string, message: string): void {
    this.errors.push({ path, message });
  }
  warn(path: string, message: string): void {
    this.warnings.push({ path, message });
  }
}

/** Options of {@link validateConfig}. */
export interface ValidateOptions {
  /** Where `${VAR}` references are looked up (usually process.env). */
  env: Record<string, string | undefined>;
  /** Folder a relative `cwd` is resolved against (the config file's folder). */
  baseDir: string;
  /** Absolute path of the file the object came from; "" (the default) when there is none. */
  path?: string;
}

/**
 * Validates a parsed configuration. Every server is checked, enabled or dark, and every problem
 * is reported at once; `config` is null when there is any error. Never throws for bad input.
 */
export function validateConfig(raw: unknown, opts: ValidateOptions): ConfigResult {
  const issues = new Issues();
  if (!isObject(raw)) {
    issues.error(
      "",
      `the configuration must be a JSON object like {"mcpServers": {...}}, not ${typeName(raw)}`,
    );
    return { config: null, errors: issues.errors, warnings: issues.warnings };
  }
  checkKeys(raw, TOP_KEYS, "", TOP_HINTS, issues);

  const servers: ServerConfig[] = [];
  const rawServers = raw.mcpServers;
  if (rawServers === undefined) {
    issues.error(
      "mcpServers",
      'is required; add "mcpServers": {} with one entry per server, e.g. {"files": {"command": "npx", "args": ["..."]}}',
    );
  } else if (!isObject(rawServers)) {
    issues.error(
      "mcpServers",
      `must be an object mapping server names to their settings, e.g. {"files": {"command": "npx"}}, not ${typeName(rawServers)}`,
    );
  } else {
    for (const [name, entry] of Object.entries(rawServers)) {
      const server = validateServer(name, entry, childPath("mcpServers", name), opts, issues);
      if (server) servers.push(server);
    }
  }
  servers.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));

  const approvalsRaw = section(raw, "approvals", '{"expireAfterSeconds": 900, "waitSeconds": 60}', issues);
  checkKeys(approvalsRaw, APPROVAL_KEYS, "approvals", {}, issues);
  const approvals: ApprovalsConfig = {
    expireAfterSeconds: readInt(approvalsRaw, "expireAfterSeconds", "approvals", issues),
    waitSeconds: readInt(approvalsRaw, "waitSeconds", "approvals", issues),
    selfApproval: readBool(approvalsRaw, "selfApproval", "approvals", false, issues),
  };

  const catalogueRaw = section(
    raw,
    "catalogue",
    '{"descriptionMaxChars": 1024, "refreshSeconds": 300}',
    issues,
  );
  checkKeys(catalogueRaw, CATALOGUE_KEYS, "catalogue", {}, issues);
  const catalogue: CatalogueConfig = {
    descriptionMaxChars: readInt(catalogueRaw, "descriptionMaxChars", "catalogue", issues),
    refreshSeconds: readInt(catalogueRaw, "refreshSeconds", "catalogue", issues),
  };
  const webhook = readWebhook(catalogueRaw, opts, issues);
  if (webhook !== undefined) catalogue.webhook = webhook;
  if (catalogueRaw.webhookAllowPrivate !== undefined) {
    catalogue.webhookAllowPrivate = readBool(catalogueRaw, "webhookAllowPrivate", "catalogue", false, issues);
  }

  const agentEndpoint = readAgentEndpoint(raw, issues);

  const config: GatehouseConfig | null =
    issues.errors.length === 0 ? { path: opts.path ?? "", servers, approvals, catalogue } : null;
  if (config && agentEndpoint) config.agentEndpoint = agentEndpoint;
  return { config, errors: issues.errors, warnings: issues.warnings };
}

const AGENT_ENDPOINT_KEYS = ["allowedHosts", "allowedOrigins"] as const;
const HOST_VALUE = /^(?:[a-z0-9](?:[a-z0-9.-]*[a-z0-9])?|\[[0-9a-f:.]+\])(?::\d{1,5})?$/i;

/** `agentEndpoint` (issue 7), or undefined when the file has none. */
function readAgentEndpoint(raw: Json, issues: Issues): AgentEndpointConfig | undefined {
  if (raw.agentEndpoint === undefined) return undefined;
  const value = section(raw, "agentEndpoint", '{"allowedHosts": ["gatehouse.lan:3000"]}', issues);
  checkKeys(value, AGENT_ENDPOINT_KEYS, "agentEndpoint", {}, issues);
  const list = (key: (typeof AGENT_ENDPOINT_KEYS)[number], ok: (v: string) => string | null): string[] => {
    const where = childPath("agentEndpoint", key);
    const items = value[key];
    if (items === undefined) return [];
    if (!Array.isArray(items)) {
      issues.error(where, `must be an array of strings, not ${typeName(items)}`);
      return [];
    }
    const out: string[] = [];
    items.forEach((item: unknown, i) => {
      const problem = typeof item === "string" ? ok(item) : `must be a string, not ${typeName(item)}`;
      if (problem) issues.error(childPath(where, i), problem);
      else out.push(item as string);
    });
    return out;
  };
  const allowedHosts = list("allowedHosts", (v) =>
    HOST_VALUE.test(v)
      ? null
      : `${show(v)} is not a Host value; write a name with an optional port, e.g. "gatehouse.lan:3000" (no scheme, no path)`,
  );
  const allowedOrigins = list("allowedOrigins", (v) => {
    let u: URL | null = null;
    try {
      u = new URL(v);
    } catch {
      u = null;
    }
    const ok = u && (u.protocol === "http:" || u.protocol === "https:") && u.origin === v.replace(/\/$/, "");
    return ok
      ? null
      : `${show(v)} is not an origin; write scheme, name and optional port, e.g. "https://gatehouse.example.com" (no path)`;
  });
  return { allowedHosts, allowedOrigins };
}

/** `catalogue.webhook` (issue 5): an http(s) URL; a `${VAR}` in it must be set (it is always dialled). */
function readWebhook(raw: Json, opts: ValidateOptions, issues: Issues): string | undefined {
  if (raw.webhook === undefined) return undefined;
  const expand = (text: string, where: string): Expansion => {
    const result = expandVars(text, opts.env);
    if (result.malformed) {
      issues.error(
        where,
        `has a malformed "\${...}" reference; write \${NAME} (letters, digits and "_") or \${NAME:-default}`,
      );
    }
    if (result.unset.length > 0) {
      const refs = result.unset.map((n) => `\${${n}}`).join(", ");
      issues.error(
        where,
        `refers to ${refs}, which ${result.unset.length === 1 ? "is" : "are"} not set; set ${result.unset.join(", ")} in Gatehouse's environment or remove "webhook"`,
      );
    }
    return result;
  };
  return readUrl(raw.webhook, "catalogue.webhook", expand, issues) ?? undefined;
}

function section(raw: Json, key: string, example: string, issues: Issues): Json {
  const value = raw[key];
  if (value === undefined) return {};
  if (isObject(value)) return value;
  issues.error(key, `must be an object like ${example}, not ${typeName(value)}`);
  return {};
}

function validateServer(
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
  const expand = (text: string, where: string): Expansion => {
    const result = expandVars(text, opts.env);
    if (result.malformed) {
      issues.error(
        where,
        `has a malformed "\${...}" reference; write \${NAME} (letters, digits and "_") or \${NAME:-default}`,
      );
    }
    if (result.unset.length > 0) {
      const refs = result.unset.map((n) => `\${${n}}`).join(", ");
      const names = result.unset.join(", ");
      const one = result.unset.length === 1;
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
    }
    return result;
  };

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
    if (kind === "stdio" && key === "headers") {
      issues.error(
        at(key),
        'is only for HTTP servers (with "url"); pass credentials to a stdio server through "env"',
      );
      return false;
    }
    return true;
  };

  let command: string | null = null;
  if (allowed("command")) {
    const value = raw.command;
    if (typeof value !== "string" || value.trim() === "") {
      issues.error(
        at("command"),
        `must be a non-empty string naming the program to run, e.g. "npx", not ${describeGiven(value)}`,
      );
    } else {
      command = value;
      if (/\s/.test(value.trim()) && raw.args === undefined) {
        // The command is spawned without a shell, so "npx -y pkg" looks for a program with that whole name.
        issues.warn(
          at("command"),
          'contains spaces and there are no "args"; the command is not run through a shell, so put its arguments in "args", e.g. "command": "npx", "args": ["-y", "..."]',
        );
      }
    }
  }

  const args: string[] = [];
  if (allowed("args")) {
    const value = raw.args;
    if (!Array.isArray(value)) {
      issues.error(at("args"), `must be an array of strings, e.g. ["-y", "pkg"], not ${typeName(value)}`);
    } else {
      value.forEach((arg: unknown, i) => {
        const where = childPath(at("args"), i);
        if (typeof arg !== "string") {
          issues.error(where, `must be a string, not ${typeName(arg)}; put it in double quotes`);
          return;
        }
        const expanded = expand(arg, where);
        const secretish = expanded.names.filter((n) => SECRET_LOOKING_NAME.test(n));
        if (secretish.length > 0) {
          issues.warn(
            where,
            `uses ${secretish.map((n) => `\${${n}}`).join(", ")}; arguments are shown to owners and in logs, so pass secrets through "env" instead`,
          );
        }
        args.push(expanded.value);
      });
    }
  }

  const env: Record<string, string> = {};
  if (allowed("env")) {
    const value = raw.env;
    if (!isObject(value)) {
      issues.error(
        at("env"),
        `must be an object of strings, e.g. {"LOG_LEVEL": "warn"}, not ${typeName(value)}`,
      );
    } else {
      for (const [key, v] of Object.entries(value)) {
        const where = childPath(at("env"), key);
        if (key === "" || key.includes("=") || key.includes("\0")) {
          issues.error(where, 'is not a usable variable name; a name must be non-empty, without "=" or NUL');
        }
        // Never describe the value itself: env values are secrets.
        if (typeof v !== "string") {
          issues.error(where, `must be a string, not ${typeName(v)}; put the value in double quotes`);
          continue;
        }
        const expanded = expand(v, where);
        if (expanded.value.includes("\0")) {
          issues.error(where, `contains a NUL character (after \${VAR} expansion); remove it`);
        }
        env[key] = expanded.value;
      }
    }
  }

  let cwd: string | null = kind === "stdio" ? opts.baseDir : null;
  if (allowed("cwd")) {
    const value = raw.cwd;
    if (typeof value !== "string" || value.trim() === "") {
      issues.error(
        at("cwd"),
        `must be a non-empty string (a folder, relative to the config file's folder or absolute), not ${describeGiven(value)}`,
      );
    } else if (value === "~" || value.startsWith("~/")) {
      issues.error(
        at("cwd"),
        '"~" is not expanded; write an absolute path or one relative to the config file\'s folder',
      );
    } else {
      cwd = resolvePath(opts.baseDir, value);
    }
  }

  let url: string | null = null;
  if (allowed("url")) url = readUrl(raw.url, at("url"), expand, issues);

  const headers: Record<string, string> = {};
  if (allowed("headers")) {
    const value = raw.headers;
    if (!isObject(value)) {
      issues.error(
        at("headers"),
        `must be an object of strings, e.g. {"Authorization": "Bearer \${TOKEN}"}, not ${typeName(value)}`,
      );
    } else {
      const seen = new Map<string, string>();
      for (const [key, v] of Object.entries(value)) {
        const where = childPath(at("headers"), key);
        if (!HEADER_NAME.test(key)) {
          issues.error(where, "is not a valid header name; use letters, digits and -, e.g. X-Api-Key");
        } else {
          const first = seen.get(key.toLowerCase());
          if (first !== undefined) {
            issues.error(where, `repeats ${show(first)} (header names ignore case); keep one of them`);
          } else {
            seen.set(key.toLowerCase(), key);
          }
        }
        // Never describe the value itself: header values are secrets.
        if (typeof v !== "string") {
          issues.error(where, `must be a string, not ${typeName(v)}; put the value in double quotes`);
          continue;
        }
        const expanded = expand(v, where);
        if (/[\r\n\0]/.test(expanded.value)) {
          issues.error(
            where,
            `contains a line break or NUL character (after \${VAR} expansion), which cannot be sent in a header; remove it`,
          );
        }
        headers[key] = expanded.value;
      }
    }
  }

  const allowPrivate = readBool(raw, "allowPrivate", path, false, issues);
  const maxTools = readInt(raw, "maxTools", path, issues);
  const allowTools = readAllowTools(raw, path, maxTools, issues);

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
  };
}

function readUrl(
  value: unknown,
  where: string,
  expand: (text: string, where: string) => Expansion,
  issues: Issues,
): string | null {
  if (typeof value !== "string" || value.trim() === "") {
    issues.error(
      where,
      `must be an absolute http(s) URL like "https://host/mcp", not ${describeGiven(value)}`,
    );
    return null;
  }
  // Echo only what is safe: the text as written (variable names, not their values), cut before
  // any query string, and not at all when it may carry a user:password part.
  const echo = value.includes("@") ? "the URL" : show(value.replace(/[?#].*$/s, ""));
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
    issues.error(where, `${echo} is not an absolute http(s) URL; use e.g. https://host/mcp`);
    return null;
  }
  if (parsed.username !== "" || parsed.password !== "") {
    issues.error(
      where,
      `must not contain a user:password part; send credentials in "headers" instead, e.g. "Authorization": "Bearer \${TOKEN}"`,
    );
    return null;
  }
  return parsed.href;
}

function readAllowTools(raw: Json, path: string, maxTools: number, issues: Issues): string[] | null {
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

function readInt(raw: Json, key: keyof typeof LIMITS, parent: string, issues: Issues): number {
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

function readBool(raw: Json, key: string, parent: string, fallback: boolean, issues: Issues): boolean {
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

function checkKeys(
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

function suggestServerName(name: string): string | null {
  const candidate = name
    .toLowerCase()
    .replace(/[^a-z0-9-]+/g, "-")
    .replace(/^[^a-z]+/, "")
    .slice(0, 31)
    .replace(/-+$/, "");
  return candidate !== name && SERVER_NAME_PATTERN.test(candidate) ? candidate : null;
}

function isObject(value: unknown): value is Json {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return false;
  const proto: unknown = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

function typeName(value: unknown): string {
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
function describeGiven(value: unknown): string {
  return value === "" || (typeof value === "string" && value.trim() === "")
    ? "an empty string"
    : typeName(value);
}

/** A JSON-quoted, length-capped echo of user text that is not a secret (keys, names, tool names). */
function show(text: string): string {
  return JSON.stringify(text.length > 80 ? `${text.slice(0, 77)}...` : text);
}
