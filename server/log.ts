import "server-only";

type Level = "debug" | "info" | "warn" | "error";
const order: Record<Level, number> = { debug: 10, info: 20, warn: 30, error: 40 };

// Next.js evaluates server modules more than once (instrumentation, each route, server/main.ts),
// so the registry lives on globalThis: a secret registered by one copy is redacted by every copy.
const SECRETS = Symbol.for("gatehouse.log.secrets");
const CHANGES = Symbol.for("gatehouse.log.secret-changes");
const holder = globalThis as { [SECRETS]?: Set<string>; [CHANGES]?: { n: number } };
holder[SECRETS] ??= new Set<string>();
holder[CHANGES] ??= { n: 0 };
const secrets: Set<string> = holder[SECRETS];
/** Counts changes of the registry, shared like it, so every module copy rebuilds its pattern after one. */
const registry: { n: number } = holder[CHANGES];

/**
 * Below this length a secret is redacted only where it stands as a value (see {@link redact}):
 * replacing every "1" or "on" in a line would make the line unreadable.
 */
export const SHORT_SECRET_CHARS = 4;

const REDACTED = "[redacted]";

/** Authorization schemes whose credential is registered on its own as well as with the scheme. */
const AUTH_SCHEME = /^(Bearer|Basic|Token|Bot|ApiKey|Key)\s+(\S.*)$/is;

/**
 * Registers values (header and env values from the config) that must never be written to a log
 * line or shown. The empty string is ignored. For a header value such as `Bearer abc` the
 * credential `abc` is registered too (a server may echo the token alone), and for `Basic` the
 * decoded `user:password` and its password.
 */
export function registerSecrets(values: Iterable<string>): void {
  for (const v of values) {
    if (v.length === 0) continue;
    if (!secrets.has(v)) registry.n++;
    secrets.add(v);
    const scheme = AUTH_SCHEME.exec(v.trim());
    const credential = scheme?.[2]?.trim();
    if (!scheme || !credential) continue;
    if (!secrets.has(credential)) registry.n++;
    secrets.add(credential);
    if (scheme[1]?.toLowerCase() === "basic" && /^[A-Za-z0-9+/]+=*$/.test(credential)) {
      const decoded = Buffer.from(credential, "base64").toString("utf8");
      const colon = decoded.indexOf(":");
      if (colon > 0 && !decoded.includes("\uFFFD")) {
        secrets.add(decoded);
        if (colon < decoded.length - 1) secrets.add(decoded.slice(colon + 1));
        registry.n++;
      }
    }
  }
}

/**
 * Takes values out of the registry that no longer need hiding: a credential that stopped being
 * one (an OAuth access token two renewals old), so that a long-running process's registry, and
 * the pattern built from it, does not grow without end. What is not registered is let be.
 */
export function forgetSecrets(values: Iterable<string>): void {
  for (const v of values) if (secrets.delete(v)) registry.n++;
}

/**
 * `c` percent-encoded as UTF-8 bytes, upper-case hex, as the URL parser writes it (a lone
 * surrogate, which has no UTF-8 form, as U+FFFD). Unlike encodeURIComponent it encodes every
 * character it is given: the URL parser's query set includes `'`.
 */
const percent = (c: string): string =>
  [...Buffer.from(c, "utf8")].map((b) => `%${b.toString(16).toUpperCase().padStart(2, "0")}`).join("");

/**
 * The forms a secret takes in text: as is, JSON-escaped (a server's JSON log line, our own
 * fields), with non-ASCII as `\uXXXX` (other JSON writers), percent-encoded as a URL component,
 * as a form value (as URLSearchParams writes it), in a URL path and in a URL query (the URL
 * parser's own encode sets), and escaped the way log lines escape control characters.
 */
function formsOf(secret: string): string[] {
  const json = JSON.stringify(secret).slice(1, -1);
  const component = secret.replace(/[^A-Za-z0-9\-_.!~*'()]/gu, percent);
  const forms = [
    secret,
    json,
    json.replace(/[\u007f-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`),
    component,
    component.replace(/%20/g, "+"),
    secret.replace(/[^A-Za-z0-9*\-._ ]/gu, percent).replace(/ /g, "+"),
    // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are percent-encoded in URLs.
    secret.replace(/[\u0000-\u0020"#<>?`{}\u007f-\u{10ffff}]/gu, percent),
    // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are percent-encoded in URLs.
    secret.replace(/[\u0000-\u0020"#<>'\u007f-\u{10ffff}]/gu, percent),
    escapeControls(secret),
  ];
  return [...new Set(forms)];
}

const escapeRegExp = (s: string): string => s.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&");

/**
 * Where a short secret counts as a value: after `=` or `:` (not a clock's `10:30`), optionally
 * spaced and quoted; after an authorization scheme; as URL user-info (`//user:pw@`). It must end
 * there too: at a space, a quote, `&`, `;`, `,`, a closing bracket, `@`, `#`, a backslash (a JSON
 * escape), a full stop ending the text or a word, or the end of the text.
 */
// Every repeat is bounded: a lookbehind with `\s*` scans back over a whole run of spaces at each
// position in it, so a server's "Bearer" followed by 200,000 spaces took minutes.
const VALUE_BEFORE = String.raw`(?:(?:^|[^0-9])[=:]\s{0,8}["']?|\b[Bb]earer\s{1,8}|\b[Bb]asic\s{1,8}|\b[Tt]oken\s{1,8}|:\/\/(?:[^\s/@:]{0,256}:)?)`;
const VALUE_AFTER = String.raw`(?=$|[\s"'&;,)}\]@#\\]|\.(?:\s|$))`;

/** One pattern for the whole registry, rebuilt when it changes. */
let compiled: { changes: number; pattern: RegExp | null } = { changes: -1, pattern: null };

function registryPattern(): RegExp | null {
  if (compiled.changes === registry.n) return compiled.pattern;
  const long = new Set<string>();
  const short = new Set<string>();
  for (const s of secrets)
    for (const form of formsOf(s)) (s.length >= SHORT_SECRET_CHARS ? long : short).add(form);
  // Longest first: a secret that contains another is replaced whole, not around the shorter one.
  const alternatives = [...long].sort((a, b) => b.length - a.length).map(escapeRegExp);
  for (const form of [...short].sort((a, b) => b.length - a.length)) {
    const f = escapeRegExp(form);
    // A quoted string that is the secret alone (`"k"` in JSON, `'k'`), even inside escaped JSON.
    alternatives.push(`(?<=${VALUE_BEFORE})${f}${VALUE_AFTER}`, `(?<=")${f}(?=\\\\*")`, `(?<=')${f}(?=')`);
  }
  const pattern = alternatives.length > 0 ? new RegExp(alternatives.join("|"), "g") : null;
  compiled = { changes: registry.n, pattern };
  return pattern;
}

/**
 * Replaces every registered secret in `text` with `[redacted]`, in each of the forms it may take
 * (raw, JSON-escaped, percent-encoded, log-escaped). A secret shorter than
 * {@link SHORT_SECRET_CHARS} is replaced only where it stands as a value: `key=v`, `key: v`,
 * `"key":"v"`, `'v'`, `Bearer v`, `//user:v@host`, `?q=v&`; elsewhere ("v1.0", "10:30") it stays.
 */
export function redact(text: string): string {
  const pattern = registryPattern();
  return pattern === null ? text : text.replace(pattern, REDACTED);
}

/**
 * Control characters, line and paragraph separators, and bidi controls: each would let a line
 * pose as more than it is (end it, redraw it, or reorder what a terminal shows).
 */
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what this escapes.
const CONTROL = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;
const NAMED: Record<string, string> = { "\n": "\\n", "\r": "\\r", "\t": "\\t" };

/**
 * `text` with every control character written as an escape (`\n`, `\r`, `\t`, `\u001b`, ...), so
 * that text from a server (its stderr, its error messages) written into a log line can never end
 * that line and start a forged one, nor move the cursor or reorder what a terminal shows.
 */
export function escapeControls(text: string): string {
  return text.replace(CONTROL, (c) => NAMED[c] ?? `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
}

/** A run of line breaks (LF or CRLF) with the spaces and tabs around them. */
const LINE_BREAKS = /[ \t]*(?:\r?\n[ \t]*)+/g;
/** What a line break inside one log entry reads as: a mark, never a `\n` escape or a real break. */
export const SHOWN_LINE_BREAK = " ⏎ ";

/**
 * `text` on one line: each run of line breaks (a multi-line message, a stack trace, CRLF output)
 * becomes {@link SHOWN_LINE_BREAK}, and breaks at either end are dropped. Other control
 * characters are left to {@link escapeControls}.
 */
export function oneLine(text: string): string {
  return text.replace(LINE_BREAKS, (run, offset: number) =>
    offset === 0 || offset + run.length === text.length ? "" : SHOWN_LINE_BREAK,
  );
}

/**
 * The fields as JSON on one line: a string with a line break is redacted as written (a secret
 * holding a newline is found whole) and then put on one line, so JSON's `\n` never appears.
 */
function fieldsJson(fields: Record<string, unknown>): string {
  return JSON.stringify(fields, (_key, value: unknown) =>
    typeof value === "string" && /[\r\n]/.test(value) ? oneLine(redact(value)) : value,
  );
}

function threshold(): number {
  const l = (process.env.GATEHOUSE_LOG_LEVEL ?? "info") as Level;
  return order[l] ?? order.info;
}

function write(level: Level, scope: string, message: string, fields?: Record<string, unknown>): void {
  if (order[level] < threshold()) return;
  // Redacted before anything is rewritten, so a secret holding a newline is still found as
  // written; the fields' JSON carries its secrets JSON-escaped, a form redact() knows.
  const extra =
    fields && Object.keys(fields).length > 0 ? ` ${escapeControls(redact(fieldsJson(fields)))}` : "";
  const text = escapeControls(oneLine(redact(message)));
  const line = `${new Date().toISOString()} ${level.toUpperCase()} [${escapeControls(scope)}] ${text}${extra}`;
  (level === "error" || level === "warn" ? process.stderr : process.stdout).write(`${line}\n`);
}

export interface Logger {
  debug(message: string, fields?: Record<string, unknown>): void;
  info(message: string, fields?: Record<string, unknown>): void;
  warn(message: string, fields?: Record<string, unknown>): void;
  error(message: string, fields?: Record<string, unknown>): void;
}

/**
 * A logger whose lines are `<ISO time> <LEVEL> [scope] message {fields}`, one line each: the
 * message and fields pass through {@link redact}, then {@link oneLine} (a line break reads as
 * ` ⏎ `) and {@link escapeControls}, so nothing in them can end the line or forge another.
 */
export function logger(scope: string): Logger {
  return {
    debug: (m, f) => write("debug", scope, m, f),
    info: (m, f) => write("info", scope, m, f),
    warn: (m, f) => write("warn", scope, m, f),
    error: (m, f) => write("error", scope, m, f),
  };
}
