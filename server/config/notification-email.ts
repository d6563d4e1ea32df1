import "server-only";
import { childPath, safeSmtpUrl } from "./display";
import type { EventRules } from "./notification-fields";
import { readEvents, strictExpander } from "./notification-fields";
import type { Expander, Issues, Json } from "./readers";
import { checkKeys, describeGiven, readBool, readSection, show } from "./readers";
import type { EmailConfig, NotificationEvent, ValidateOptions } from "./types";
import { NOTIFICATION_EVENTS } from "./types";

/**
 * `notifications.email`: the SMTP server reviewers are mailed through. Its URL carries the
 * password: a message shows it only as `safeSmtpUrl` does (`smtps://user:***@host:465`), written
 * as in the file, so a `${VAR}` shows as its name and never as its value.
 */

const KEYS = ["smtp", "from", "events", "allowPrivate"] as const;
const SMTP_EXAMPLE = '"smtps://gatehouse:${SMTP_PASSWORD}@smtp.example.com:465"';
const EXAMPLE = `{"smtp": ${SMTP_EXAMPLE}, "from": "gatehouse@example.com"}`;
const IN_SMTP = `put it in "smtp" as a URL, e.g. ${SMTP_EXAMPLE}`;

/** Keys of nodemailer's transport options and other tools' mail settings, answered with where they go. */
const HINTS: Record<string, string> = {
  host: IN_SMTP,
  port: IN_SMTP,
  secure: `${IN_SMTP} ("smtps://" for TLS from the start, "smtp://" for STARTTLS)`,
  user: IN_SMTP,
  username: IN_SMTP,
  pass: IN_SMTP,
  password: IN_SMTP,
  auth: IN_SMTP,
  url: 'use "smtp" instead',
  to: "mail goes to reviewers with an email address; set it on each user, not here",
};

const DEFAULT_EVENTS: readonly NotificationEvent[] = ["call.pending"];
const EMAIL_EVENTS: EventRules = {
  allowed: NOTIFICATION_EVENTS.filter((e) => e.startsWith("call.")),
  orNone: 'leave "events" out for the default ["call.pending"], or remove "email"',
  notAllowed: "cannot be mailed; email sends call events only",
};

/** The same rule as a user's email address (lib/api-types.ts `userEmail`). */
const ADDRESS = /^[^\s@<>(),;:"]+@[^\s@<>(),;:"]+\.[^\s@<>(),;:"]+$/;
/** `Display Name <address>`; the name may not hold what would split or end a header. */
const NAMED_ADDRESS = /^([^<>",;\r\n]*|"[^"\r\n]*")\s*<([^<>]*)>$/;

/** `parent.email`, or null when absent. */
export function readEmail(
  raw: Json,
  parent: string,
  opts: ValidateOptions,
  issues: Issues,
): EmailConfig | null {
  if (raw.email === undefined) return null;
  const where = childPath(parent, "email");
  const value = readSection(raw, "email", parent, EXAMPLE, issues);
  checkKeys(value, KEYS, where, HINTS, issues);
  const at = (key: (typeof KEYS)[number]) => childPath(where, key);

  let smtp = "";
  if (value.smtp === undefined) {
    issues.error(at("smtp"), `is required; add the SMTP server as a URL, e.g. "smtp": ${SMTP_EXAMPLE}`);
  } else {
    smtp = readSmtp(value.smtp, at("smtp"), strictExpander(opts, issues, 'or remove "email"'), issues) ?? "";
  }
  let from = "";
  if (value.from === undefined) {
    issues.error(at("from"), 'is required; add the sender address, e.g. "from": "gatehouse@example.com"');
  } else {
    from = readFrom(value.from, at("from"), issues) ?? "";
  }
  const events =
    value.events === undefined
      ? [...DEFAULT_EVENTS]
      : readEvents(value.events, at("events"), EMAIL_EVENTS, issues);
  return { smtp, from, events, allowPrivate: readBool(value, "allowPrivate", where, false, issues) };
}

/**
 * `smtp`: an smtp:// or smtps:// URL with a host, `${VAR}`-expanded (an unset reference is an
 * error: mail is always sent). Returned expanded, as written otherwise (nodemailer parses it).
 */
function readSmtp(value: unknown, where: string, expand: Expander, issues: Issues): string | null {
  if (typeof value !== "string" || value.trim() === "") {
    issues.error(
      where,
      `must be an smtp:// or smtps:// URL like ${SMTP_EXAMPLE}, not ${describeGiven(value)}`,
    );
    return null;
  }
  const echo = show(safeSmtpUrl(value));
  const expanded = expand(value, where);
  if (expanded.unset.length > 0 || expanded.malformed) return null;
  const afterExpansion = expanded.names.length > 0 ? " (after ${VAR} expansion)" : "";
  const encode = 'percent-encode "@", "/", "?", "#" and ":" in the user and password (e.g. %40 for "@")';
  let parsed: URL | null = null;
  try {
    parsed = new URL(expanded.value.trim());
  } catch {
    parsed = null;
  }
  if (parsed === null || (parsed.protocol !== "smtp:" && parsed.protocol !== "smtps:")) {
    issues.error(
      where,
      `${echo} is not an smtp:// or smtps:// URL${afterExpansion}; write e.g. ${SMTP_EXAMPLE}, and ${encode}`,
    );
    return null;
  }
  if (parsed.hostname === "") {
    issues.error(where, `${echo} has no host${afterExpansion}; write e.g. ${SMTP_EXAMPLE}`);
    return null;
  }
  // A "/" in an unencoded password ends the host early: the mail (and the password) would go to
  // the wrong server, so a path is refused rather than ignored.
  if (parsed.pathname !== "" && parsed.pathname !== "/") {
    issues.error(where, `${echo} has a path${afterExpansion}, which an SMTP URL does not take; ${encode}`);
    return null;
  }
  return expanded.value.trim();
}

/** `from`: `name@example.com` or `Name <name@example.com>`. Not a secret: echoed in messages. */
function readFrom(value: unknown, where: string, issues: Issues): string | null {
  const fix = 'write e.g. "gatehouse@example.com" or "Gatehouse <gatehouse@example.com>"';
  if (typeof value !== "string" || value.trim() === "") {
    issues.error(where, `must be an email address like "gatehouse@example.com", not ${describeGiven(value)}`);
    return null;
  }
  const text = value.trim();
  const named = NAMED_ADDRESS.exec(text);
  const address = named ? (named[2] ?? "") : text;
  if (!ADDRESS.test(address) || address.length > 254) {
    issues.error(where, `${show(text)} is not an email address; ${fix}`);
    return null;
  }
  return text;
}
