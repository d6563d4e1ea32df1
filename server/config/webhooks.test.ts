// biome-ignore-all lint/suspicious/noTemplateCurlyInString: these tests are about literal ${VAR} references in config text.
import { describe, expect, it } from "vitest";
import type { Env } from "./test-helpers";
import { hook, messagesAt, notificationsOf, withNotifications } from "./test-helpers";

/** `notifications.webhooks`: each entry's keys, their defaults, and the list's own rules. */

const KNOWN = "call.pending, call.decided, call.expired, call.interrupted, catalogue.changed";

/** The validation of one webhook entry: `hook` with `change` applied (an undefined value removes the key). */
function one(change: Record<string, unknown>, env: Env = {}) {
  const entry = Object.entries({ ...hook, ...change }).filter(([, v]) => v !== undefined);
  return withNotifications({ webhooks: [Object.fromEntries(entry)] }, env);
}

/** The messages at `notifications.webhooks[0].<key>`. */
function at(change: Record<string, unknown>, key: string, env: Env = {}): string[] {
  const result = one(change, env);
  expect(result.config).toBeNull();
  return messagesAt(result.errors, `notifications.webhooks[0].${key}`);
}

describe("notifications.webhooks", () => {
  it("a webhook with name, url and events gets every default", () => {
    expect(notificationsOf(one({})).webhooks).toEqual([
      {
        name: "ops-chat",
        url: "https://hooks.example.com/T0/B0",
        format: "json",
        events: ["call.pending"],
        secret: null,
        includeArguments: false,
        allowPrivate: false,
      },
    ]);
  });

  it("given values are kept: slack format, every event, includeArguments and allowPrivate", () => {
    const [webhook] = notificationsOf(
      one({
        format: "slack",
        events: ["call.pending", "call.decided", "call.expired", "call.interrupted", "catalogue.changed"],
        includeArguments: true,
        allowPrivate: true,
      }),
    ).webhooks;
    expect(webhook).toMatchObject({
      format: "slack",
      events: ["call.pending", "call.decided", "call.expired", "call.interrupted", "catalogue.changed"],
      includeArguments: true,
      allowPrivate: true,
    });
  });

  it("the list must be an array, and each entry an object", () => {
    const notArray = withNotifications({ webhooks: hook });
    expect(messagesAt(notArray.errors, "notifications.webhooks")[0]).toMatch(
      /^must be an array of webhooks like \[\{"name": "ops-chat", .*\}\], not an object$/,
    );
    const notObject = withNotifications({ webhooks: ["https://hooks.example.com/x"] });
    expect(messagesAt(notObject.errors, "notifications.webhooks[0]")[0]).toMatch(
      /^must be an object like \{"name": "ops-chat", .*\}, not a string$/,
    );
  });

  it("at most 20 webhooks: 20 are accepted, 21 are an error on the list", () => {
    const hooks = (n: number) => Array.from({ length: n }, (_, i) => ({ ...hook, name: `hook-${i}` }));
    expect(notificationsOf(withNotifications({ webhooks: hooks(20) })).webhooks).toHaveLength(20);
    const result = withNotifications({ webhooks: hooks(21) });
    expect(result.errors).toEqual([
      {
        path: "notifications.webhooks",
        message:
          "lists 21 webhooks; at most 20 are allowed, so remove some (one webhook can take several events)",
      },
    ]);
  });

  it("an unknown key is an error with a did-you-mean or a hint", () => {
    const result = one({ event: ["call.pending"], headers: { A: "b" }, type: "slack" });
    expect(messagesAt(result.errors, "notifications.webhooks[0].event")).toEqual([
      'unknown key "event"; did you mean "events"?',
    ]);
    expect(messagesAt(result.errors, "notifications.webhooks[0].headers")[0]).toMatch(
      /^unknown key "headers"; webhooks send no custom headers; .* sign deliveries with "secret"$/,
    );
    expect(messagesAt(result.errors, "notifications.webhooks[0].type")).toEqual([
      'unknown key "type"; use "format" ("json" or "slack") instead',
    ]);
  });
});

describe("a webhook's name", () => {
  it("is required and must be a string", () => {
    expect(at({ name: undefined }, "name")).toEqual([
      'is required; add one, e.g. "name": "ops-chat" (it names the webhook on the Settings page)',
    ]);
    expect(at({ name: 7 }, "name")).toEqual([
      'must be a string naming the webhook, e.g. "ops-chat", not a number',
    ]);
  });

  it("must match ^[a-z][a-z0-9-]{0,30}$, with a suggestion when one is near", () => {
    const rule =
      'use a lowercase letter, then up to 30 lowercase letters, digits or "-" (^[a-z][a-z0-9-]{0,30}$)';
    expect(at({ name: "Ops_Chat" }, "name")).toEqual([
      `webhook name "Ops_Chat" is not allowed; ${rule}, e.g. "ops-chat"`,
    ]);
    expect(at({ name: "" }, "name")).toEqual([`webhook name "" is not allowed; ${rule}`]);
    expect(at({ name: `a${"b".repeat(31)}` }, "name")[0]).toMatch(/^webhook name "ab+" is not allowed/);
    expect(notificationsOf(one({ name: `a${"b".repeat(30)}` })).webhooks[0]?.name).toHaveLength(31);
  });

  it("must be unique: the second use names the first", () => {
    const result = withNotifications({ webhooks: [hook, { ...hook, url: "https://other.example.com/x" }] });
    expect(result.errors).toEqual([
      {
        path: "notifications.webhooks[1].name",
        message:
          '"ops-chat" is already the name of notifications.webhooks[0]; give each webhook its own name',
      },
    ]);
  });
});

describe("a webhook's url", () => {
  it("is required", () => {
    expect(at({ url: undefined }, "url")).toEqual([
      'is required; add the receiver\'s URL, e.g. "url": "https://hooks.example.com/${HOOK_PATH}"',
    ]);
  });

  it("${VAR} is expanded, and an unset one is an error: webhooks are always dialled", () => {
    const url = "https://hooks.example.com/T0/B0/${CHAT_HOOK}";
    expect(notificationsOf(one({ url }, { CHAT_HOOK: "tok-9" })).webhooks[0]?.url).toBe(
      "https://hooks.example.com/T0/B0/tok-9",
    );
    expect(at({ url }, "url")).toEqual([
      "refers to ${CHAT_HOOK}, which is not set; set CHAT_HOOK in Gatehouse's environment or remove this webhook",
    ]);
    expect(at({ url: "https://hooks.example.com/${OPEN" }, "url")[0]).toMatch(/malformed/);
  });

  it("must be an absolute http(s) URL; the message echoes it up to its host only", () => {
    for (const [url, message] of [
      ["hooks.example.com/T0/tok-literal", '"hooks.example.com/..." is not an absolute http(s) URL'],
      ["ftp://hooks.example.com/tok-literal", '"ftp://hooks.example.com/..." is not an absolute http(s) URL'],
      ["https://", '"https://" is not an absolute http(s) URL'],
    ] as const) {
      expect(at({ url }, "url"), url).toEqual([`${message}; use e.g. https://hooks.example.com/...`]);
    }
    expect(at({ url: "" }, "url")).toEqual([
      'must be an absolute http(s) URL like "https://hooks.example.com/...", not an empty string',
    ]);
    expect(at({ url: ["https://hooks.example.com"] }, "url")[0]).toMatch(/, not an array$/);
  });

  it("a user:password part is an error that points at the path or the secret instead", () => {
    const messages = at({ url: "https://bot:tok-literal@hooks.example.com/x" }, "url");
    expect(messages).toEqual([
      'must not contain a user:password part; put the receiver\'s token in the path or query instead (${VAR} allowed), or sign deliveries with "secret"',
    ]);
  });
});

describe("a webhook's format and events", () => {
  it("format is json or slack", () => {
    expect(at({ format: "teams" }, "format")).toEqual([
      '"teams" is not a format; use "json" (the default) or "slack"',
    ]);
    expect(at({ format: true }, "format")).toEqual([
      'a boolean is not a format; use "json" (the default) or "slack"',
    ]);
  });

  it("events is required, lists the known events when missing, and must be a non-empty array", () => {
    expect(at({ events: undefined }, "events")).toEqual([
      `is required; list the events to send, e.g. "events": ["call.pending", "call.decided"] (known events: ${KNOWN})`,
    ]);
    expect(at({ events: "call.pending" }, "events")).toEqual([
      'must be an array of events like ["call.pending"], not a string; write ["call.pending"]',
    ]);
    expect(at({ events: {} }, "events")).toEqual([
      'must be an array of events like ["call.pending"], not an object',
    ]);
    expect(at({ events: [] }, "events")).toEqual([
      'must list at least one event, e.g. ["call.pending"]; remove the webhook to send nothing',
    ]);
  });

  it("an unknown event is an error naming the known ones, with a did-you-mean or a hint", () => {
    const result = one({ events: ["call.pendng", "call.approved", "tool.ran", 3, "call.decided"] });
    const path = "notifications.webhooks[0].events";
    expect(result.errors).toEqual([
      {
        path: `${path}[0]`,
        message: `"call.pendng" is not an event; did you mean "call.pending"? (known events: ${KNOWN})`,
      },
      {
        path: `${path}[1]`,
        message: `"call.approved" is not an event; approvals, denials and refusals are all "call.decided" (known events: ${KNOWN})`,
      },
      { path: `${path}[2]`, message: `"tool.ran" is not an event; remove it (known events: ${KNOWN})` },
      { path: `${path}[3]`, message: 'must be an event name like "call.pending", not a number' },
    ]);
  });

  it("an event listed twice is an error on the second", () => {
    expect(at({ events: ["call.pending", "call.expired", "call.pending"] }, "events[2]")).toEqual([
      '"call.pending" is listed twice; remove one',
    ]);
  });
});

describe("a webhook's secret and booleans", () => {
  it("secret is ${VAR}-expanded; absent, deliveries are unsigned (null)", () => {
    expect(
      notificationsOf(one({ secret: "${HOOK_SECRET}" }, { HOOK_SECRET: "k-1" })).webhooks[0]?.secret,
    ).toBe("k-1");
    expect(notificationsOf(one({ secret: "literal-key" })).webhooks[0]?.secret).toBe("literal-key");
    expect(notificationsOf(one({})).webhooks[0]?.secret).toBeNull();
  });

  it("an unset ${VAR} in secret is an error naming the variable", () => {
    expect(at({ secret: "${HOOK_SECRET}" }, "secret")).toEqual([
      'refers to ${HOOK_SECRET}, which is not set; set HOOK_SECRET in Gatehouse\'s environment or remove "secret"',
    ]);
  });

  it("secret must be a non-empty string, also once expanded", () => {
    const fix = 'leave "secret" out to send unsigned deliveries';
    expect(at({ secret: "" }, "secret")).toEqual([
      `must be a non-empty string, e.g. "\${HOOK_SECRET}", not an empty string; ${fix}`,
    ]);
    expect(at({ secret: 12345 }, "secret")).toEqual([
      `must be a non-empty string, e.g. "\${HOOK_SECRET}", not a number; ${fix}`,
    ]);
    expect(at({ secret: null }, "secret")).toEqual([
      `must be a non-empty string, e.g. "\${HOOK_SECRET}", not null; ${fix}`,
    ]);
    expect(at({ secret: "${HOOK_SECRET}" }, "secret", { HOOK_SECRET: "" })).toEqual([
      "is empty once ${HOOK_SECRET} is expanded; set HOOK_SECRET to a non-empty value",
    ]);
  });

  it("includeArguments and allowPrivate must be booleans", () => {
    const result = one({ includeArguments: "true", allowPrivate: 1 });
    expect(messagesAt(result.errors, "notifications.webhooks[0].includeArguments")).toEqual([
      "must be true or false, not a string; write true without quotes",
    ]);
    expect(messagesAt(result.errors, "notifications.webhooks[0].allowPrivate")).toEqual([
      "must be true or false, not a number",
    ]);
  });

  it("every problem of every webhook is reported at once", () => {
    const result = withNotifications({
      webhooks: [
        { name: "A", url: "x", events: [] },
        { ...hook, format: "xml", secret: 1 },
      ],
    });
    expect(result.errors.map((e) => e.path)).toEqual([
      "notifications.webhooks[0].name",
      "notifications.webhooks[0].url",
      "notifications.webhooks[0].events",
      "notifications.webhooks[1].format",
      "notifications.webhooks[1].secret",
    ]);
  });
});
