import "server-only";
import { childPath } from "./display";
import { mentionsVars, writeRefs } from "./expand";
import { readEmail } from "./notification-email";
import type { EventRules } from "./notification-fields";
import { readEvents, strictExpander } from "./notification-fields";
import type { Issues, Json, UrlRules } from "./readers";
import {
  checkKeys,
  describeGiven,
  isObject,
  readBool,
  readSection,
  readUrl,
  show,
  typeName,
} from "./readers";
import { SERVER_NAME_PATTERN, suggestServerName } from "./servers";
import type {
  CatalogueConfig,
  NotificationEvent,
  NotificationsConfig,
  ValidateOptions,
  WebhookConfig,
} from "./types";
import { NOTIFICATION_EVENTS } from "./types";

/**
 * The `notifications` section (PRODUCT.md §10): the origin links start with, the webhooks (the
 * `catalogue.webhook` shorthand among them as the one named "catalogue") and email
 * (notification-email.ts). A webhook's URL and secret are secrets: a message shows a webhook URL
 * as written up to its host at most, and a secret never, not even its length.
 */

/** Webhook names follow the server name rule: they name a row on the Settings page and in logs. */
export const WEBHOOK_NAME_PATTERN = SERVER_NAME_PATTERN;
/** Most entries `notifications.webhooks` may list (the `catalogue.webhook` shorthand not counted). */
export const MAX_WEBHOOKS = 20;
/** The name the `catalogue.webhook` shorthand is listed under; taken while that key is set. */
export const CATALOGUE_WEBHOOK_NAME = "catalogue";

const KEYS = ["publicUrl", "webhooks", "email"] as const;
const WEBHOOK_KEYS = [
  "name",
  "url",
  "format",
  "events",
  "secret",
  "includeArguments",
  "allowPrivate",
] as const;
const EXAMPLE =
  '{"publicUrl": "https://gatehouse.example.com", "webhooks": [{"name": "ops-chat", "url": "https://...", "events": ["call.pending"]}]}';
const WEBHOOK_EXAMPLE =
  '{"name": "ops-chat", "url": "https://hooks.example.com/...", "events": ["call.pending"]}';

/** A webhook URL (and `catalogue.webhook`): its path and query may be the receiver's token. */
export const WEBHOOK_URL: UrlRules = {
  example: "https://hooks.example.com/...",
  credentials:
    'put the receiver\'s token in the path or query instead (${VAR} allowed), or sign deliveries with "secret"',
  secretPath: true,
};

/** `catalogue.webhook`: the same, without a "secret" to point at. */
export const CATALOGUE_WEBHOOK_URL: UrlRules = {
  ...WEBHOOK_URL,
  credentials: "put the receiver's token in the path or query instead (${VAR} allowed)",
};

const WEBHOOK_EVENTS: EventRules = {
  allowed: NOTIFICATION_EVENTS,
  orNone: "remove the webhook to send nothing",
  notAllowed: "cannot be sent to a webhook",
};

const WEBHOOK_HINTS: Record<string, string> = {
  type: 'use "format" ("json" or "slack") instead',
  headers:
    'webhooks send no custom headers; put a token in the URL (${VAR} allowed) or sign deliveries with "secret"',
  signingSecret: 'use "secret" instead',
};

/**
 * Validates `raw.notifications` (absent: no public URL, no webhooks, no email) and lists the
 * `catalogue.webhook` shorthand, when `catalogue` has one, as the webhook named "catalogue".
 * `shorthandGiven`: the file has a `catalogue.webhook` key (valid or not), so "catalogue" is taken.
 */
export function readNotifications(
  raw: Json,
  catalogue: CatalogueConfig,
  shorthandGiven: boolean,
  opts: ValidateOptions,
  issues: Issues,
): NotificationsConfig {
  const value = readSection(raw, "notifications", "", EXAMPLE, issues);
  checkKeys(value, KEYS, "notifications", {}, issues);
  const publicUrl = readPublicUrl(value.publicUrl, "notifications.publicUrl", issues);
  const webhooks = readWebhooks(value.webhooks, shorthandGiven, opts, issues);
  if (catalogue.webhook !== undefined) {
    webhooks.push({
      name: CATALOGUE_WEBHOOK_NAME,
      url: catalogue.webhook,
      format: "json",
      events: ["catalogue.changed"],
      secret: null,
      includeArguments: false,
      allowPrivate: catalogue.webhookAllowPrivate ?? false,
    });
  }
  const email = readEmail(value, "notifications", opts, issues);
  return { publicUrl, webhooks, email };
}

/** `publicUrl`: an http(s) origin, "/" at most after it; returned as the origin. Null when absent. */
function readPublicUrl(value: unknown, where: string, issues: Issues): string | null {
  if (value === undefined) return null;
  const fix = 'write the origin reviewers open Gatehouse at, e.g. "https://gatehouse.example.com"';
  if (typeof value !== "string" || value.trim() === "") {
    issues.error(
      where,
      `must be an http(s) origin like "https://gatehouse.example.com", not ${describeGiven(value)}`,
    );
    return null;
  }
  // Not a secret, but it is never the place for credentials: say so without echoing them.
  const echo = value.includes("@") ? "the URL" : show(value.replace(/[?#].*$/s, ""));
  if (mentionsVars(value)) {
    issues.error(
      where,
      `\${...} references are not expanded in "publicUrl"; ${fix}, or leave "publicUrl" out and set GATEHOUSE_PUBLIC_ORIGIN`,
    );
    return null;
  }
  let parsed: URL | null = null;
  try {
    parsed = new URL(value.trim());
  } catch {
    parsed = null;
  }
  if (
    parsed === null ||
    (parsed.protocol !== "http:" && parsed.protocol !== "https:") ||
    parsed.hostname === ""
  ) {
    issues.error(where, `${echo} is not an absolute http(s) URL; ${fix}`);
    return null;
  }
  if (parsed.username !== "" || parsed.password !== "") {
    issues.error(where, `must not contain a user:password part; ${fix}`);
    return null;
  }
  if (parsed.pathname !== "/" || /[?#]/.test(value)) {
    issues.error(
      where,
      `${echo} has a path, query or fragment; links are made as <publicUrl>/approvals/<id>, so ${fix}`,
    );
    return null;
  }
  return parsed.origin;
}

/** `webhooks`: at most {@link MAX_WEBHOOKS} entries with unique names; [] when absent. */
function readWebhooks(
  value: unknown,
  shorthandGiven: boolean,
  opts: ValidateOptions,
  issues: Issues,
): WebhookConfig[] {
  const where = "notifications.webhooks";
  if (value === undefined) return [];
  if (!Array.isArray(value)) {
    issues.error(where, `must be an array of webhooks like [${WEBHOOK_EXAMPLE}], not ${typeName(value)}`);
    return [];
  }
  if (value.length > MAX_WEBHOOKS) {
    issues.error(
      where,
      `lists ${value.length} webhooks; at most ${MAX_WEBHOOKS} are allowed, so remove some (one webhook can take several events)`,
    );
  }
  const hooks: WebhookConfig[] = [];
  const firstAt = new Map<string, string>();
  value.forEach((entry: unknown, i) => {
    const at = childPath(where, i);
    const hook = readWebhook(entry, at, opts, issues);
    if (hook === null) return;
    hooks.push(hook);
    if (hook.name === "") return;
    const nameAt = childPath(at, "name");
    const first = firstAt.get(hook.name);
    if (first !== undefined) {
      issues.error(
        nameAt,
        `${show(hook.name)} is already the name of ${first}; give each webhook its own name`,
      );
    } else if (shorthandGiven && hook.name === CATALOGUE_WEBHOOK_NAME) {
      issues.error(
        nameAt,
        `"${CATALOGUE_WEBHOOK_NAME}" is the name catalogue.webhook is sent under; rename this webhook, or remove catalogue.webhook and add "catalogue.changed" to this webhook's "events"`,
      );
    } else {
      firstAt.set(hook.name, at);
    }
  });
  return hooks;
}

/** One webhook; null when the entry is not an object. A name that is not usable comes back as "". */
function readWebhook(
  raw: unknown,
  where: string,
  opts: ValidateOptions,
  issues: Issues,
): WebhookConfig | null {
  if (!isObject(raw)) {
    issues.error(where, `must be an object like ${WEBHOOK_EXAMPLE}, not ${typeName(raw)}`);
    return null;
  }
  checkKeys(raw, WEBHOOK_KEYS, where, WEBHOOK_HINTS, issues);
  const at = (key: (typeof WEBHOOK_KEYS)[number]) => childPath(where, key);

  const name = readWebhookName(raw.name, at("name"), issues);
  let url = "";
  if (raw.url === undefined) {
    issues.error(
      at("url"),
      'is required; add the receiver\'s URL, e.g. "url": "https://hooks.example.com/${HOOK_PATH}"',
    );
  } else {
    // Webhooks are always dialled, so an unset ${VAR} is an error, never a warning.
    url =
      readUrl(
        raw.url,
        at("url"),
        strictExpander(opts, issues, "or remove this webhook"),
        issues,
        WEBHOOK_URL,
      ) ?? "";
  }

  let format: WebhookConfig["format"] = "json";
  if (raw.format === "json" || raw.format === "slack") format = raw.format;
  else if (raw.format !== undefined) {
    const given = typeof raw.format === "string" ? show(raw.format) : typeName(raw.format);
    issues.error(at("format"), `${given} is not a format; use "json" (the default) or "slack"`);
  }

  let events: NotificationEvent[] = [];
  if (raw.events === undefined) {
    issues.error(
      at("events"),
      `is required; list the events to send, e.g. "events": ["call.pending", "call.decided"] (known events: ${NOTIFICATION_EVENTS.join(", ")})`,
    );
  } else {
    events = readEvents(raw.events, at("events"), WEBHOOK_EVENTS, issues);
  }

  return {
    name,
    url,
    format,
    events,
    secret: readSecret(raw.secret, at("secret"), opts, issues),
    includeArguments: readBool(raw, "includeArguments", where, false, issues),
    allowPrivate: readBool(raw, "allowPrivate", where, false, issues),
  };
}

function readWebhookName(value: unknown, where: string, issues: Issues): string {
  if (value === undefined) {
    issues.error(
      where,
      'is required; add one, e.g. "name": "ops-chat" (it names the webhook on the Settings page)',
    );
    return "";
  }
  if (typeof value !== "string") {
    issues.error(where, `must be a string naming the webhook, e.g. "ops-chat", not ${typeName(value)}`);
    return "";
  }
  if (!WEBHOOK_NAME_PATTERN.test(value)) {
    const suggestion = suggestServerName(value);
    issues.error(
      where,
      `webhook name ${show(value)} is not allowed; use a lowercase letter, then up to 30 lowercase letters, digits or "-" (^[a-z][a-z0-9-]{0,30}$)` +
        (suggestion ? `, e.g. ${show(suggestion)}` : ""),
    );
    return "";
  }
  return value;
}

/** `secret`: a non-empty string, `${VAR}`-expanded, an unset reference an error; null when absent. */
function readSecret(value: unknown, where: string, opts: ValidateOptions, issues: Issues): string | null {
  if (value === undefined) return null;
  // Never describe the value itself beyond its type: it is the signing key.
  if (typeof value !== "string" || value.trim() === "") {
    issues.error(
      where,
      `must be a non-empty string, e.g. "\${HOOK_SECRET}", not ${describeGiven(value)}; leave "secret" out to send unsigned deliveries`,
    );
    return null;
  }
  const expanded = strictExpander(opts, issues, 'or remove "secret"')(value, where);
  if (expanded.unset.length > 0 || expanded.malformed) return null;
  if (expanded.value === "") {
    issues.error(
      where,
      `is empty once ${writeRefs(expanded.names)} ${expanded.names.length === 1 ? "is" : "are"} expanded; set ${expanded.names.join(", ")} to a non-empty value`,
    );
    return null;
  }
  return expanded.value;
}
