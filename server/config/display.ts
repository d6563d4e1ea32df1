import "server-only";
import { isAbsolute, relative, sep } from "node:path";
import { redact } from "../log";
import { mentionsVars, writtenForm } from "./expand";
import type { ConfigIssue, ConfigResult, ServerAuthConfig, ServerConfig } from "./types";

/**
 * How config findings and servers are shown to people: issue lines, JSON paths, and targets with
 * every secret left out.
 */

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
 * not); http/sse: origin + pathname. An arg or URL that came from `${VAR}` expansion is shown as
 * written (`--token=${API_TOKEN}`, `https://hooks.example/${HOOK_ID}`), so its expanded parts
 * stay masked; every registered secret is redacted from what is left.
 */
export function describeTarget(s: ServerConfig): string {
  if (s.transport === "stdio") {
    return [s.command ?? "", ...s.args].map((arg) => quoteArg(redact(asWritten(arg)))).join(" ");
  }
  return redact(safeUrl(asWritten(s.url ?? "")));
}

const asWritten = (value: string): string => writtenForm(value) ?? value;

/** A server's `auth` as owners see it: everything but the client secret, of which only whether it is set. */
export interface AuthView {
  type: ServerAuthConfig["type"];
  /** The scopes asked for, in the file's order; [] when the entry names none. */
  scopes: string[];
  /**
   * As written when it came from `${VAR}` expansion (like a target's URL), registered secrets
   * redacted; null when none.
   */
  clientId: string | null;
  /** Whether the client has a secret (a confidential client); the secret itself is never in a view. */
  clientSecret: boolean;
}

/** What {@link AuthView} shows of `s.auth`; null when the server has no `auth`. */
export function describeAuth(s: ServerConfig): AuthView | null {
  if (!s.auth) return null;
  const { type, scopes, clientId, clientSecret } = s.auth;
  return {
    type,
    scopes: scopes.map(redact),
    clientId: clientId === null ? null : redact(asWritten(clientId)),
    clientSecret: clientSecret !== null,
  };
}

/** origin + pathname of a URL; for text that does not parse (a dark server's unexpanded `${VAR}`), the same cut by hand. */
export function safeUrl(url: string): string {
  // The URL parser would accept "https://${HOST}/mcp" and lowercase the reference; show it as written.
  if (!mentionsVars(url)) {
    try {
      const u = new URL(url);
      return `${u.origin}${u.pathname}`;
    } catch {
      // fall through to the cut by hand
    }
  }
  return url.replace(/[?#].*$/s, "").replace(/^([^:/?#]+:\/\/)?[^/?#]*@/, "$1");
}

/**
 * An SMTP URL (as written or expanded) safe to show anywhere: the password as "***", no query
 * string or fragment: `smtps://gatehouse:***@smtp.example.com:465`. Everything before the last
 * "@" is treated as user-info, so a password holding "@", "/" or "?" is still hidden.
 */
export function safeSmtpUrl(url: string): string {
  const at = url.lastIndexOf("@");
  if (at < 0) return url.replace(/[?#].*$/s, "");
  const schemeEnd = url.indexOf("://");
  const start = schemeEnd >= 0 && schemeEnd < at ? schemeEnd + 3 : 0;
  const userInfo = url.slice(start, at);
  const colon = userInfo.indexOf(":");
  const user = colon >= 0 ? `${userInfo.slice(0, colon)}:***` : userInfo;
  return `${url.slice(0, start)}${user}${url.slice(at).replace(/[?#].*$/s, "")}`;
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

/**
 * A config file's path as people are shown it: relative to `cwd` (default the working directory)
 * when the file is inside it, absolute otherwise; "" stays "" (a config validated from no file).
 */
export function shownConfigPath(file: string, cwd: string = process.cwd()): string {
  if (file === "") return "";
  const inside = relative(cwd, file);
  const outside = inside === ".." || inside.startsWith(`..${sep}`) || isAbsolute(inside);
  return inside !== "" && !outside ? inside : file;
}
