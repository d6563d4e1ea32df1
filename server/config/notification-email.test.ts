// biome-ignore-all lint/suspicious/noTemplateCurlyInString: these tests are about literal ${VAR} references in config text.
import { describe, expect, it } from "vitest";
import { ConfigError, formatIssues, safeSmtpUrl } from "./index";
import type { Env } from "./test-helpers";
import { hook, messagesAt, notificationsOf, smtp, withNotifications } from "./test-helpers";

/** `notifications.email`, and the promise that no message carries a webhook's or SMTP server's secret. */

const SMTP_EXAMPLE = '"smtps://gatehouse:${SMTP_PASSWORD}@smtp.example.com:465"';
const ENCODE = 'percent-encode "@", "/", "?", "#" and ":" in the user and password (e.g. %40 for "@")';

function email(change: Record<string, unknown>, env: Env = {}) {
  const entry = Object.entries({ ...smtp, ...change }).filter(([, v]) => v !== undefined);
  return withNotifications({ email: Object.fromEntries(entry) }, env);
}

/** The messages at `notifications.email.<key>` of a result that must have failed. */
function at(change: Record<string, unknown>, key: string, env: Env = {}): string[] {
  const result = email(change, env);
  expect(result.config).toBeNull();
  return messagesAt(result.errors, `notifications.email.${key}`);
}

describe("notifications.email", () => {
  it("smtp and from are enough: events default to call.pending, allowPrivate to false", () => {
    expect(notificationsOf(email({})).email).toEqual({
      smtp: "smtps://gatehouse:pw@smtp.example.com:465",
      from: "gatehouse@example.com",
      events: ["call.pending"],
      allowPrivate: false,
    });
  });

  it("given events and allowPrivate are kept; smtp:// (STARTTLS) is accepted", () => {
    const result = email({
      smtp: "smtp://mailer.lan:587",
      events: ["call.pending", "call.expired", "call.decided", "call.interrupted"],
      allowPrivate: true,
    });
    expect(notificationsOf(result).email).toMatchObject({
      smtp: "smtp://mailer.lan:587",
      events: ["call.pending", "call.expired", "call.decided", "call.interrupted"],
      allowPrivate: true,
    });
  });

  it("must be an object; unknown keys get a did-you-mean or say where nodemailer-style keys go", () => {
    expect(
      messagesAt(withNotifications({ email: "ops@example.com" }).errors, "notifications.email")[0],
    ).toMatch(/^must be an object like \{"smtp": .*, "from": "gatehouse@example\.com"\}, not a string$/);
    const result = email({ form: "x@example.com", host: "smtp.example.com", to: "ops@example.com" });
    expect(messagesAt(result.errors, "notifications.email.form")).toEqual([
      'unknown key "form"; did you mean "from"?',
    ]);
    expect(messagesAt(result.errors, "notifications.email.host")).toEqual([
      `unknown key "host"; put it in "smtp" as a URL, e.g. ${SMTP_EXAMPLE}`,
    ]);
    expect(messagesAt(result.errors, "notifications.email.to")).toEqual([
      'unknown key "to"; mail goes to reviewers with an email address; set it on each user, not here',
    ]);
  });
});

describe("notifications.email.smtp", () => {
  it("is required and must be a string", () => {
    expect(at({ smtp: undefined }, "smtp")).toEqual([
      `is required; add the SMTP server as a URL, e.g. "smtp": ${SMTP_EXAMPLE}`,
    ]);
    expect(at({ smtp: 465 }, "smtp")).toEqual([
      `must be an smtp:// or smtps:// URL like ${SMTP_EXAMPLE}, not a number`,
    ]);
  });

  it("${VAR} is expanded, and an unset one is an error naming the variable", () => {
    const url = "smtps://gatehouse:${SMTP_PASSWORD}@smtp.example.com:465";
    expect(notificationsOf(email({ smtp: url }, { SMTP_PASSWORD: "m41l" })).email?.smtp).toBe(
      "smtps://gatehouse:m41l@smtp.example.com:465",
    );
    expect(at({ smtp: url }, "smtp")).toEqual([
      'refers to ${SMTP_PASSWORD}, which is not set; set SMTP_PASSWORD in Gatehouse\'s environment or remove "email"',
    ]);
  });

  it("another scheme is an error that shows the URL with its password as ***", () => {
    expect(at({ smtp: "https://gatehouse:hunter2@smtp.example.com:465" }, "smtp")).toEqual([
      `"https://gatehouse:***@smtp.example.com:465" is not an smtp:// or smtps:// URL; write e.g. ${SMTP_EXAMPLE}, and ${ENCODE}`,
    ]);
    expect(at({ smtp: "smtp.example.com:465" }, "smtp")[0]).toMatch(
      /^"smtp\.example\.com:465" is not an smtp/,
    );
  });

  it("a URL without a host is an error", () => {
    expect(at({ smtp: "smtp:relay" }, "smtp")).toEqual([
      `"smtp:relay" has no host; write e.g. ${SMTP_EXAMPLE}`,
    ]);
  });

  it("an unencoded / or @ in the password is an error rather than mail to the wrong host", () => {
    const url = "smtps://gatehouse:${SMTP_PASSWORD}@smtp.example.com:465";
    const echo = '"smtps://gatehouse:***@smtp.example.com:465"';
    // "gatehouse:p@ss/word@smtp..." parses as host "ss" with a path; "gatehouse:pa/ss@..." as port "pa".
    expect(at({ smtp: url }, "smtp", { SMTP_PASSWORD: "p@ss/word" })).toEqual([
      `${echo} has a path (after \${VAR} expansion), which an SMTP URL does not take; ${ENCODE}`,
    ]);
    expect(at({ smtp: url }, "smtp", { SMTP_PASSWORD: "pa/ss" })).toEqual([
      `${echo} is not an smtp:// or smtps:// URL (after \${VAR} expansion); write e.g. ${SMTP_EXAMPLE}, and ${ENCODE}`,
    ]);
    const encoded = notificationsOf(email({ smtp: url }, { SMTP_PASSWORD: "p%40ss%2Fword" })).email?.smtp;
    expect(encoded).toBe("smtps://gatehouse:p%40ss%2Fword@smtp.example.com:465");
  });

  it("safeSmtpUrl hides the password however it is written, and drops the query", () => {
    expect(safeSmtpUrl("smtps://gatehouse:${SMTP_PASSWORD}@smtp.example.com:465")).toBe(
      "smtps://gatehouse:***@smtp.example.com:465",
    );
    expect(safeSmtpUrl("smtps://u:p@s/s?x#y@smtp.example.com:465?pool=true")).toBe(
      "smtps://u:***@smtp.example.com:465",
    );
    expect(safeSmtpUrl("u:secret@smtp.example.com")).toBe("u:***@smtp.example.com");
    expect(safeSmtpUrl("smtp://relay.lan:25?token=t")).toBe("smtp://relay.lan:25");
  });
});

describe("notifications.email.from and events", () => {
  it("from is an address, bare or with a display name", () => {
    for (const from of [
      "gatehouse@example.com",
      "Gatehouse <gatehouse@example.com>",
      '"Gatehouse, ops" <g@example.com>',
    ]) {
      expect(notificationsOf(email({ from })).email?.from, from).toBe(from);
    }
  });

  it("a missing or malformed from is an error with a fix", () => {
    const fix = 'write e.g. "gatehouse@example.com" or "Gatehouse <gatehouse@example.com>"';
    expect(at({ from: undefined }, "from")).toEqual([
      'is required; add the sender address, e.g. "from": "gatehouse@example.com"',
    ]);
    expect(at({ from: "gatehouse" }, "from")).toEqual([`"gatehouse" is not an email address; ${fix}`]);
    expect(at({ from: "Ops, Team <ops@example.com>" }, "from")).toHaveLength(1);
    expect(at({ from: "ops@example.com\r\nBcc: all@example.com" }, "from")).toHaveLength(1);
    expect(at({ from: ["ops@example.com"] }, "from")).toEqual([
      'must be an email address like "gatehouse@example.com", not an array',
    ]);
  });

  it("only call events can be mailed", () => {
    expect(at({ events: ["call.pending", "catalogue.changed"] }, "events[1]")).toEqual([
      '"catalogue.changed" cannot be mailed; email sends call events only (call.pending, call.decided, call.expired, call.interrupted)',
    ]);
    expect(at({ events: ["call.pendin"] }, "events[0]")).toEqual([
      '"call.pendin" is not an event; did you mean "call.pending"? (known events: call.pending, call.decided, call.expired, call.interrupted)',
    ]);
  });

  it("an empty or repeated events list is an error", () => {
    expect(at({ events: [] }, "events")).toEqual([
      'must list at least one event, e.g. ["call.pending"]; leave "events" out for the default ["call.pending"], or remove "email"',
    ]);
    expect(at({ events: ["call.pending", "call.pending"] }, "events[1]")).toEqual([
      '"call.pending" is listed twice; remove one',
    ]);
  });
});

describe("notification secrets never reach a message", () => {
  const SECRET = "zz-N0tify-S3cret-4kq";

  it("webhook URLs' paths and user-info, secrets and SMTP passwords are absent from every error", () => {
    const result = withNotifications(
      {
        publicUrl: `https://admin:${SECRET}@gatehouse.example.com/x?k=${SECRET}`,
        webhooks: [
          { ...hook, name: "path-token", url: `ftp://hooks.example.com/T0/${SECRET}` },
          {
            ...hook,
            name: "bad name",
            url: `https://hooks.example.com/${SECRET}?k=${SECRET}`,
            secret: SECRET,
          },
          { ...hook, name: "user-info", url: `https://bot:${SECRET}@hooks.example.com/x` },
          { ...hook, name: "query", url: `hooks.example.com?token=${SECRET}` },
          {
            ...hook,
            name: "env-secret",
            url: "https://hooks.example.com/${HOOK_PATH}",
            secret: "${HOOK_SECRET}",
            format: 1,
          },
          { ...hook, name: "blank", secret: "${EMPTY}${MISSING}" },
        ],
        email: {
          smtp: `https://gatehouse:${SECRET}@smtp.example.com:465?password=${SECRET}`,
          from: "gatehouse@example.com",
          events: ["catalogue.changed"],
        },
      },
      { HOOK_PATH: `${SECRET}/x`, HOOK_SECRET: SECRET, EMPTY: "" },
    );
    expect(result.errors.length).toBeGreaterThanOrEqual(8);
    const text = formatIssues(result);
    expect(text).not.toContain(SECRET);
    expect(text).not.toContain("S3cret");
    expect(new ConfigError(result.errors).message).not.toContain(SECRET);
  });

  it("an SMTP password from the environment that breaks the URL is not shown either", () => {
    const passwords = [`${SECRET}/x`, `${SECRET}?x`, `${SECRET}#x`, `a@${SECRET}/`];
    for (const password of passwords) {
      const result = email(
        { smtp: "smtps://gatehouse:${SMTP_PASSWORD}@smtp.example.com:465" },
        { SMTP_PASSWORD: password },
      );
      expect(result.config, password).toBeNull();
      expect(formatIssues(result), password).not.toContain(SECRET);
    }
    const literal = email({ smtp: `smtps://gatehouse:${SECRET}/x@smtp.example.com:465` });
    expect(literal.config).toBeNull();
    expect(formatIssues(literal)).not.toContain(SECRET);
  });
});
