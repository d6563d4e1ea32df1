/**
 * The messages built from a queued row (pure): the json body's fields and what it leaves out,
 * the slack shape and its escaping, the signature a receiver can check, the email's subject,
 * link and missing argument values, and the retry delays.
 */
import { createHmac, timingSafeEqual } from "node:crypto";
import { describe, expect, it } from "vitest";
import { MAX_ATTEMPTS, retryDelayMs } from "./dispatcher";
import { emailMessage, escapeMrkdwn, jsonBody, signatureHeader, slackBody, webhookBody } from "./messages";
import type { CallFacts, CallPayload, CataloguePayload } from "./outbox";
import { failureText, webhookSecrets } from "./webhook";

const call: CallFacts = {
  id: "0190f-call",
  tool: "demo_add_note",
  server: "demo",
  requester: { kind: "agent", name: "build-bot" },
  status: "pending",
  approvalReason: "no readOnlyHint",
  argumentsDigest: "sha256:abc",
  expiresAt: "2026-12-01T11:07:03.000Z",
  approvalsNeeded: 1,
  approvals: 0,
  decidedBy: null,
  reason: null,
  rule: null,
  grant: null,
};
const pending: CallPayload = { event: "call.pending", at: "2026-12-01T10:52:03.000Z", call };
const ctx = { deliveryId: "d-1", publicUrl: "https://gh.example" };

/** What a receiver does with the header: recompute over the raw body with its copy of the key. */
function verifies(header: string, body: string, secret: string): boolean {
  const m = /^t=(\d+),v1=([0-9a-f]{64})$/.exec(header);
  if (!m?.[1] || !m[2]) return false;
  const expected = createHmac("sha256", secret).update(`${m[1]}.${body}`).digest();
  return timingSafeEqual(expected, Buffer.from(m[2], "hex"));
}

describe("notification messages", () => {
  it("the json body carries the call's facts and the /approvals/<id> link, and no argument values", () => {
    const body = jsonBody(pending, ctx);
    expect(body).toEqual({
      event: "call.pending",
      deliveryId: "d-1",
      at: pending.at,
      call,
      url: "https://gh.example/approvals/0190f-call",
    });
    expect(JSON.parse(webhookBody(pending, "json", ctx)).call).not.toHaveProperty("arguments");
  });

  it("arguments appear only when the row carries them (a webhook with includeArguments)", () => {
    const withArgs: CallPayload = { ...pending, call: { ...call, arguments: { text: "hello" } } };
    expect(JSON.parse(webhookBody(withArgs, "json", ctx)).call.arguments).toEqual({ text: "hello" });
  });

  it("without a public URL the body says url: null rather than a link nobody can open", () => {
    expect(jsonBody(pending, { ...ctx, publicUrl: null }).url).toBeNull();
    expect(slackBody(pending, { ...ctx, publicUrl: null }).blocks).toHaveLength(1);
  });

  it("the slack body is text plus a mrkdwn section and a button to the call, with &<> escaped", () => {
    const hostile: CallPayload = {
      ...pending,
      call: { ...call, requester: { kind: "user", name: "<!channel> & co" }, approvalReason: "a <b>" },
    };
    const body = slackBody(hostile, ctx);
    expect(body.text).toBe(
      "Approval needed: demo_add_note by &lt;!channel&gt; &amp; co <https://gh.example/approvals/0190f-call|Review>",
    );
    expect(body.blocks).toEqual([
      {
        type: "section",
        text: {
          type: "mrkdwn",
          text: [
            "*Approval needed: demo_add_note by &lt;!channel&gt; &amp; co*",
            "*Tool:* demo_add_note (server demo)",
            "*Requested by:* &lt;!channel&gt; &amp; co (user)",
            "*Why it waits:* a &lt;b&gt;",
            "*Expires:* 2026-12-01 11:07:03 UTC",
          ].join("\n"),
        },
      },
      {
        type: "actions",
        elements: [
          {
            type: "button",
            text: { type: "plain_text", text: "Review in Gatehouse" },
            url: "https://gh.example/approvals/0190f-call",
            style: "primary",
          },
        ],
      },
    ]);
    expect(escapeMrkdwn("a&b<c>d")).toBe("a&amp;b&lt;c&gt;d");
  });

  it("a decision reads as who decided what, and a slack body never carries argument values", () => {
    const decided: CallPayload = {
      event: "call.decided",
      at: pending.at,
      call: {
        ...call,
        status: "denied",
        decidedBy: "rita",
        reason: "not today",
        arguments: { text: "s3cr3t" },
      },
    };
    const body = slackBody(decided, ctx);
    expect(body.text).toMatch(/^Denied by rita: demo_add_note by build-bot /);
    expect(JSON.stringify(body)).not.toContain("s3cr3t");
    expect(JSON.stringify(body)).toContain("*Reason:* not today");
  });

  it("catalogue.changed keeps the catalogue webhook's fields, renamed, with a link to /changes", () => {
    const change: CataloguePayload = {
      event: "catalogue.changed",
      at: "2026-12-01T10:00:00.000Z",
      server: "demo",
      changes: [
        {
          id: 1,
          at: "2026-12-01T10:00:00.000Z",
          server: "demo",
          kind: "added",
          tool: "a",
          localName: "demo_a",
          detail: null,
        },
      ],
    };
    expect(jsonBody(change, ctx)).toEqual({
      source: "gatehouse",
      event: "catalogue.changed",
      deliveryId: "d-1",
      at: change.at,
      server: "demo",
      changes: change.changes,
      url: "https://gh.example/changes",
    });
    expect(slackBody(change, ctx).text).toBe(
      "Catalogue of demo changed: 1 added <https://gh.example/changes|Open>",
    );
  });

  it("the signature verifies with the secret over t and the exact body; a wrong secret or body does not", () => {
    const body = webhookBody(pending, "json", ctx);
    const header = signatureHeader("hook-key-123", body, 1_796_000_000.7);
    expect(header).toMatch(/^t=1796000000,v1=[0-9a-f]{64}$/);
    expect(verifies(header, body, "hook-key-123")).toBe(true);
    expect(verifies(header, body, "another-key")).toBe(false);
    expect(verifies(header, `${body} `, "hook-key-123")).toBe(false);
  });

  it("an email asks for a decision with the link in text and HTML, and shows no argument values", () => {
    const payload: CallPayload = {
      ...pending,
      call: { ...call, arguments: { text: "s3cr3t-arg" } },
      to: "r@x.test",
    };
    const mail = emailMessage(payload, ctx);
    expect(mail.subject).toBe("Approval needed: demo_add_note by build-bot");
    expect(mail.text).toContain("Review it: https://gh.example/approvals/0190f-call");
    expect(mail.html).toContain('<a href="https://gh.example/approvals/0190f-call">Review it</a>');
    expect(`${mail.text}${mail.html}`).not.toContain("s3cr3t-arg");
  });

  it("retries wait about 1 s, 2 s, 4 s, 8 s, spread by at most a fifth either way", () => {
    const tries = Array.from({ length: MAX_ATTEMPTS - 1 }, (_, i) => i + 1);
    expect(tries.map((n) => retryDelayMs(n, () => 0.5))).toEqual([1000, 2000, 4000, 8000]);
    expect(tries.map((n) => retryDelayMs(n, () => 0))).toEqual([800, 1600, 3200, 6400]);
    expect(tries.map((n) => retryDelayMs(n, () => 1))).toEqual([1200, 2400, 4800, 9600]);
  });

  it("a failure is told in words without the URL's path and query, the key, or OpenSSL's noise", () => {
    const url = "https://hooks.example.test/T0/s3cr3t-path?token=q-s3cr3t";
    const hide = webhookSecrets({
      name: "ops",
      url,
      format: "json",
      events: ["call.pending"],
      secret: "whsec-key",
      includeArguments: false,
      allowPrivate: false,
    });
    const leaky = new TypeError("fetch failed", {
      cause: new Error(`bad ${url} and /T0/s3cr3t-path?token=q-s3cr3t whsec-key`),
    });
    expect(failureText(leaky, hide, "hint")).toBe("fetch failed: bad [redacted] and [redacted] [redacted]");
    const timeout = new DOMException("The operation was aborted due to timeout", "TimeoutError");
    expect(failureText(timeout, hide, "hint")).toBe("timed out");
    const tls = new Error(
      "807CC2DE757F0000:error:0A00010B:SSL routines:ssl3_get_record:wrong version number:../deps/openssl/ssl/record/ssl3_record.c:350:\n",
    );
    expect(failureText(tls, hide, "hint")).toBe("TLS failed: wrong version number");
    const refused = new Error("refused: 10.0.0.1, a private (RFC 1918) address; set allowPrivate to allow");
    expect(failureText(refused, hide, 'set allowPrivate on webhook "ops" to allow')).toBe(
      'refused: 10.0.0.1, a private (RFC 1918) address; set allowPrivate on webhook "ops" to allow',
    );
  });
});
