import "server-only";

/**
 * `${VAR}` references in config text: the one place that knows their syntax. Validation expands
 * through {@link expandVars}, display asks {@link mentionsVars} and {@link writtenForm}, and
 * messages write names back as references with {@link writeRefs}.
 */

const OPEN = "${";

// What each expansion was written as, so display can show `--token=${API_TOKEN}` where the config
// holds the expanded value. On globalThis: Next.js evaluates server modules more than once, and the
// copy that validated the config at boot is not the one a route's display code runs in.
const EXPANDED = Symbol.for("gatehouse.config.expanded");
const shared = globalThis as { [EXPANDED]?: Map<string, string> };
shared[EXPANDED] ??= new Map<string, string>();
const expansions: Map<string, string> = shared[EXPANDED];
/** Expansions remembered at most; the oldest is forgotten first (a process validates a handful of configs). */
const MAX_REMEMBERED = 10_000;

function remember(value: string, written: string): void {
  while (expansions.size >= MAX_REMEMBERED) {
    const oldest = expansions.keys().next().value;
    if (oldest === undefined) break;
    expansions.delete(oldest);
  }
  expansions.set(value, written);
  // A URL field keeps the parser's href of the expanded text ("https://h" becomes "https://h/").
  if (URL.canParse(value)) {
    const href = new URL(value).href;
    if (href !== value) expansions.set(href, written);
  }
}

// What each referenced variable was replaced with, by name: the runtime registers those that look
// like credentials as secrets (a `${API_KEY}` in a stdio arg, printed back in the server's stderr).
const SUBSTITUTED = Symbol.for("gatehouse.config.substituted");
const sharedSubstituted = globalThis as { [SUBSTITUTED]?: Map<string, string> };
sharedSubstituted[SUBSTITUTED] ??= new Map<string, string>();
const substituted: Map<string, string> = sharedSubstituted[SUBSTITUTED];

/** Every variable an expansion replaced, with the value it put in (not defaults). */
export function substitutedValues(): ReadonlyMap<string, string> {
  return substituted;
}

/**
 * How a string that came out of {@link expandVars} (or the parser's href of one) was written,
 * references and all; undefined for a string no expansion produced. Display shows this form, so
 * the expanded parts of args and URLs stay masked behind their references.
 */
export function writtenForm(value: string): string | undefined {
  return expansions.get(value);
}
const REFERENCE = /^([A-Za-z_][A-Za-z0-9_]*)(?::-(.*))?$/s;

/**
 * Names of variables that hold a credential, whatever their value looks like: the one reading
 * of "this name says secret", for the warning on `${VAR}` in args and for what is redacted.
 */
export const CREDENTIAL_NAME = /key|token|secret|pass|auth|credential|cookie|session|private|signature/i;

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

/**
 * Expands `${NAME}` and `${NAME:-default}` (the default applies when NAME is unset or empty, as
 * in the shell and in other MCP clients' config files). An unset reference without a default is
 * left as written so a dark server's record still shows what it needs, never an empty credential.
 * Every expansion that changed the text is remembered for {@link writtenForm}.
 */
export function expandVars(text: string, env: Record<string, string | undefined>): Expansion {
  const unset: string[] = [];
  const names: string[] = [];
  let malformed = false;
  let value = "";
  let at = 0;
  for (;;) {
    const start = text.indexOf(OPEN, at);
    if (start < 0) {
      value += text.slice(at);
      break;
    }
    value += text.slice(at, start);
    const end = text.indexOf("}", start + OPEN.length);
    if (end < 0) {
      malformed = true;
      value += text.slice(start);
      break;
    }
    const written = text.slice(start, end + 1);
    at = end + 1;
    const match = REFERENCE.exec(text.slice(start + OPEN.length, end));
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
    if (current !== undefined && !(fallback !== undefined && current === "")) {
      value += current;
      if (substituted.size < MAX_REMEMBERED) substituted.set(name, current);
    } else if (fallback !== undefined) value += fallback;
    else {
      if (!unset.includes(name)) unset.push(name);
      value += written;
    }
  }
  if (value !== text) remember(value, text);
  return { value, unset, malformed, names };
}

/** Whether `text` holds a `${` that {@link expandVars} would look at (a reference, or a malformed one). */
export function mentionsVars(text: string): boolean {
  return text.includes(OPEN);
}

/** Names written back as references for a message: `${A}, ${B}`. */
export function writeRefs(names: readonly string[]): string {
  return names.map((name) => `${OPEN}${name}}`).join(", ");
}
