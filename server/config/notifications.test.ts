// biome-ignore-all lint/suspicious/noTemplateCurlyInString: these tests are about literal ${VAR} references in config text.
import { describe, expect, it } from "vitest";
import { check, hook, messagesAt, notificationsOf, withNotifications } from "./test-helpers";

/** The `notifications` section as a whole, `publicUrl`, and the `catalogue.webhook` shorthand. */

describe("the notifications section", () => {
  it("is optional: absent or empty, there is no public URL, no webhook and no email", () => {
    const empty = { publicUrl: null, webhooks: [], email: null };
    expect(notificationsOf(check({ mcpServers: {} }))).toEqual(empty);
    expect(notificationsOf(withNotifications({}))).toEqual(empty);
  });

  it("the example of PRODUCT.md §10 validates to every webhook and the email settings, defaults applied", () => {
    const result = withNotifications(
      {
        publicUrl: "https://gatehouse.example.com",
        webhooks: [
          {
            name: "ops-chat",
            url: "https://hooks.example.com/T0/B0/${CHAT_HOOK}",
            format: "slack",
            events: ["call.pending", "call.decided"],
          },
          {
            name: "pager",
            url: "https://ops.example.com/gatehouse",
            secret: "${HOOK_SECRET}",
            events: ["call.pending", "call.expired"],
            includeArguments: false,
            allowPrivate: false,
          },
        ],
        email: {
          smtp: "smtps://gatehouse:${SMTP_PASSWORD}@smtp.example.com:465",
          from: "gatehouse@example.com",
          events: ["call.pending"],
          allowPrivate: false,
        },
      },
      { CHAT_HOOK: "chat-token", HOOK_SECRET: "hmac-key", SMTP_PASSWORD: "mail-pass" },
    );
    expect(notificationsOf(result)).toEqual({
      publicUrl: "https://gatehouse.example.com",
      webhooks: [
        {
          name: "ops-chat",
          url: "https://hooks.example.com/T0/B0/chat-token",
          format: "slack",
          events: ["call.pending", "call.decided"],
          secret: null,
          includeArguments: false,
          allowPrivate: false,
        },
        {
          name: "pager",
          url: "https://ops.example.com/gatehouse",
          format: "json",
          events: ["call.pending", "call.expired"],
          secret: "hmac-key",
          includeArguments: false,
          allowPrivate: false,
        },
      ],
      email: {
        smtp: "smtps://gatehouse:mail-pass@smtp.example.com:465",
        from: "gatehouse@example.com",
        events: ["call.pending"],
        allowPrivate: false,
      },
    });
    expect(result.warnings).toEqual([]);
  });

  it("a section that is not an object is an error with the shape wanted", () => {
    for (const value of [[], "https://gatehouse.example.com", null, true]) {
      const result = withNotifications(value);
      expect(result.config).toBeNull();
      expect(messagesAt(result.errors, "notifications")[0]).toMatch(
        /^must be an object like \{"publicUrl": "https:\/\/gatehouse\.example\.com", "webhooks": \[.*\]\}, not (an array|a string|null|a boolean)$/,
      );
    }
  });

  it("an unknown key is an error with a did-you-mean, or the known keys when nothing is close", () => {
    const result = withNotifications({ webhook: [], publicURL: "https://g.example.com", slack: {} });
    expect(result.config).toBeNull();
    expect(result.errors).toEqual([
      { path: "notifications.webhook", message: 'unknown key "webhook"; did you mean "webhooks"?' },
      { path: "notifications.publicURL", message: 'unknown key "publicURL"; did you mean "publicUrl"?' },
      {
        path: "notifications.slack",
        message: 'unknown key "slack"; remove it (known keys: publicUrl, webhooks, email)',
      },
    ]);
  });

  it("a misspelt notifications key at the top level gets a did-you-mean", () => {
    expect(check({ mcpServers: {}, notification: {} }).errors).toEqual([
      { path: "notification", message: 'unknown key "notification"; did you mean "notifications"?' },
    ]);
  });
});

describe("notifications.publicUrl", () => {
  it("is normalised to its origin: lowercase host, default port and a trailing slash dropped", () => {
    for (const [given, origin] of [
      ["https://gatehouse.example.com", "https://gatehouse.example.com"],
      ["https://Gatehouse.Example.COM/", "https://gatehouse.example.com"],
      ["https://gatehouse.example.com:443", "https://gatehouse.example.com"],
      ["http://gatehouse.lan:3000/", "http://gatehouse.lan:3000"],
      [" https://gatehouse.example.com ", "https://gatehouse.example.com"],
    ] as const) {
      expect(notificationsOf(withNotifications({ publicUrl: given })).publicUrl, given).toBe(origin);
    }
  });

  it("a path, query or fragment is an error saying how links are made", () => {
    for (const given of [
      "https://gatehouse.example.com/gatehouse",
      "https://gatehouse.example.com/?x=1",
      "https://gatehouse.example.com#top",
      "https://gatehouse.example.com/approvals/",
    ]) {
      const result = withNotifications({ publicUrl: given });
      expect(result.config, given).toBeNull();
      expect(messagesAt(result.errors, "notifications.publicUrl"), given).toEqual([
        `${JSON.stringify(given.replace(/[?#].*$/, ""))} has a path, query or fragment; links are made as <publicUrl>/approvals/<id>, so write the origin reviewers open Gatehouse at, e.g. "https://gatehouse.example.com"`,
      ]);
    }
  });

  it("a value that is not an absolute http(s) URL is an error with a fix", () => {
    const fix = 'write the origin reviewers open Gatehouse at, e.g. "https://gatehouse.example.com"';
    for (const [given, message] of [
      ["gatehouse.example.com", `"gatehouse.example.com" is not an absolute http(s) URL; ${fix}`],
      ["ftp://gatehouse.example.com", `"ftp://gatehouse.example.com" is not an absolute http(s) URL; ${fix}`],
      ["", 'must be an http(s) origin like "https://gatehouse.example.com", not an empty string'],
      [3000, 'must be an http(s) origin like "https://gatehouse.example.com", not a number'],
    ] as const) {
      const result = withNotifications({ publicUrl: given });
      expect(messagesAt(result.errors, "notifications.publicUrl"), String(given)).toEqual([message]);
    }
  });

  it("a user:password part is an error that does not echo it", () => {
    const result = withNotifications({ publicUrl: "https://admin:pa55word@gatehouse.example.com" });
    expect(messagesAt(result.errors, "notifications.publicUrl")).toEqual([
      'must not contain a user:password part; write the origin reviewers open Gatehouse at, e.g. "https://gatehouse.example.com"',
    ]);
    expect(JSON.stringify(result)).not.toContain("pa55word");
  });

  it("${VAR} is not expanded here: the error points at GATEHOUSE_PUBLIC_ORIGIN", () => {
    const result = withNotifications(
      { publicUrl: "https://${PUBLIC_HOST}" },
      { PUBLIC_HOST: "g.example.com" },
    );
    expect(messagesAt(result.errors, "notifications.publicUrl")[0]).toMatch(
      /^\$\{\.\.\.\} references are not expanded in "publicUrl"; .* or leave "publicUrl" out and set GATEHOUSE_PUBLIC_ORIGIN$/,
    );
  });
});

describe("the catalogue.webhook shorthand", () => {
  const catalogueHook = (allowPrivate: boolean) => ({
    name: "catalogue",
    url: "https://hooks.example.com/catalogue/tok-1",
    format: "json",
    events: ["catalogue.changed"],
    secret: null,
    includeArguments: false,
    allowPrivate,
  });

  it("is listed as the webhook named catalogue, and stays in the catalogue section", () => {
    const result = check(
      { mcpServers: {}, catalogue: { webhook: "https://hooks.example.com/catalogue/${CAT_TOKEN}" } },
      { CAT_TOKEN: "tok-1" },
    );
    expect(notificationsOf(result).webhooks).toEqual([catalogueHook(false)]);
    expect(result.config?.catalogue.webhook).toBe("https://hooks.example.com/catalogue/tok-1");
    expect(result.config?.catalogue.webhookAllowPrivate).toBeUndefined();
  });

  it("takes allowPrivate from webhookAllowPrivate and comes after the webhooks of notifications", () => {
    const result = check({
      mcpServers: {},
      catalogue: { webhook: "https://hooks.example.com/catalogue/tok-1", webhookAllowPrivate: true },
      notifications: { webhooks: [hook] },
    });
    const webhooks = notificationsOf(result).webhooks;
    expect(webhooks.map((w) => w.name)).toEqual(["ops-chat", "catalogue"]);
    expect(webhooks[1]).toEqual(catalogueHook(true));
    expect(result.config?.catalogue.webhookAllowPrivate).toBe(true);
  });

  it("a webhook named catalogue is fine without the shorthand, and an error with it", () => {
    const named = { ...hook, name: "catalogue", events: ["catalogue.changed"] };
    expect(notificationsOf(withNotifications({ webhooks: [named] })).webhooks[0]?.name).toBe("catalogue");

    const both = check({
      mcpServers: {},
      catalogue: { webhook: "https://hooks.example.com/catalogue" },
      notifications: { webhooks: [named] },
    });
    expect(both.config).toBeNull();
    expect(both.errors).toEqual([
      {
        path: "notifications.webhooks[0].name",
        message:
          '"catalogue" is the name catalogue.webhook is sent under; rename this webhook, or remove catalogue.webhook and add "catalogue.changed" to this webhook\'s "events"',
      },
    ]);
  });

  it("the name stays taken while catalogue.webhook is present but invalid, so both problems show at once", () => {
    const result = check({
      mcpServers: {},
      catalogue: { webhook: "https://hooks.example.com/${UNSET_PATH}" },
      notifications: { webhooks: [{ ...hook, name: "catalogue" }] },
    });
    expect(result.errors.map((e) => e.path)).toEqual(["catalogue.webhook", "notifications.webhooks[0].name"]);
  });

  it("an invalid shorthand URL names only its host, never its path, in the message", () => {
    const result = check({
      mcpServers: {},
      catalogue: { webhook: "ftp://hooks.example.com/T0/literal-token" },
    });
    expect(messagesAt(result.errors, "catalogue.webhook")).toEqual([
      '"ftp://hooks.example.com/..." is not an absolute http(s) URL; use e.g. https://hooks.example.com/...',
    ]);
  });
});
