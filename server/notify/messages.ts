import "server-only";
import { createHmac } from "node:crypto";
import { DIGEST_AFTER, DIGEST_EVERY_MS, type DigestPayload } from "./digests";
import type { CallFacts, CallPayload, CataloguePayload, DeliveryPayload } from "./outbox";

/**
 * Messages built from a queued row's facts at send time (pure: no store, no clock but the one
 * handed in). Argument values appear only where the row carries them (a webhook with
 * `includeArguments`); emails never show them.
 */

export interface MessageContext {
  deliveryId: string;
  /** Origin links start with (no trailing slash); null: messages carry no link. */
  publicUrl: string | null;
}

/** `publicUrl` as links use it: trimmed of trailing slashes; null stays null. */
export function linkBase(publicUrl: string | null | undefined): string | null {
  if (!publicUrl) return null;
  return publicUrl.replace(/\/+$/, "");
}

/** Where a message leads: one call's decision page, or the Changes page. */
export function linkOf(payload: DeliveryPayload, publicUrl: string | null): string | null {
  if (publicUrl === null) return null;
  if (payload.event === "catalogue.changed") return `${publicUrl}/changes`;
  return `${publicUrl}/approvals/${encodeURIComponent(payload.call.id)}`;
}

/** The `format: "json"` body of a call event (PRODUCT.md §10). */
export interface CallWebhookBody {
  event: CallPayload["event"];
  deliveryId: string;
  at: string;
  call: CallFacts;
  url: string | null;
}

/** The `format: "json"` body of `catalogue.changed`: what the catalogue webhook always sent, renamed. */
export interface CatalogueWebhookBody {
  source: "gatehouse";
  event: "catalogue.changed";
  deliveryId: string;
  at: string;
  server: string;
  changes: CataloguePayload["changes"];
  url: string | null;
}

export function jsonBody(
  payload: DeliveryPayload,
  ctx: MessageContext,
): CallWebhookBody | CatalogueWebhookBody {
  const url = linkOf(payload, ctx.publicUrl);
  if (payload.event === "catalogue.changed") {
    return {
      source: "gatehouse",
      event: payload.event,
      deliveryId: ctx.deliveryId,
      at: payload.at,
      server: payload.server,
      changes: payload.changes,
      url,
    };
  }
  return { event: payload.event, deliveryId: ctx.deliveryId, at: payload.at, call: payload.call, url };
}

/** Escapes what Slack's mrkdwn treats as markup: `&`, `<` and `>`. */
export function escapeMrkdwn(text: string): string {
  return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

/** "2026-12-01 10:52:03 UTC": readable in any chat client, unlike Slack-only date tokens. */
function readableTime(iso: string): string {
  return iso.replace("T", " ").replace(/\.\d+Z$|Z$/, " UTC");
}

/** One line saying what happened, in plain words (email subjects, chat notification text). */
export function headline(payload: DeliveryPayload): string {
  if (payload.event === "catalogue.changed") {
    return `Catalogue of ${payload.server} changed: ${changeCounts(payload)}`;
  }
  const c = payload.call;
  const who = c.requester.name;
  switch (payload.event) {
    case "call.pending":
      return `Approval needed: ${c.tool} by ${who}`;
    case "call.expired":
      return `Expired unanswered: ${c.tool} by ${who}`;
    case "call.interrupted":
      return `Interrupted, outcome unknown: ${c.tool} by ${who}`;
    case "call.decided":
      return `${decisionWord(c)}: ${c.tool} by ${who}`;
  }
}

function decisionWord(c: CallFacts): string {
  if (c.grant) return "Ran under a grant";
  // A rule-held call whose approval was refused was decided by a reviewer, not by its rule.
  if (c.rule && c.status === "refused" && !c.decidedBy) return `Denied by rule ${c.rule}`;
  if (c.rule && !c.decidedBy) return `Allowed by rule ${c.rule}`;
  const by = c.decidedBy ? ` by ${c.decidedBy}` : "";
  if (c.status === "denied") return `Denied${by}`;
  if (c.status === "refused") return `Approval refused${by}`;
  return `Approved${by}`;
}

function changeCounts(payload: CataloguePayload): string {
  const counts = new Map<string, number>();
  for (const change of payload.changes) counts.set(change.kind, (counts.get(change.kind) ?? 0) + 1);
  return [...counts].map(([kind, n]) => `${n} ${kind.replace("_", " ")}`).join(", ");
}

/** The facts of a call, one per line, as a reviewer reads them. */
function callLines(payload: CallPayload): [label: string, value: string][] {
  const c = payload.call;
  const lines: [string, string][] = [
    ["Tool", `${c.tool} (server ${c.server})`],
    ["Requested by", `${c.requester.name} (${c.requester.kind})`],
  ];
  if (c.approvalReason && !c.grant) lines.push(["Why it waits", c.approvalReason]);
  if (c.approvalsNeeded > 1) lines.push(["Approvals", `${c.approvals} of ${c.approvalsNeeded}`]);
  if (c.rule) lines.push(["Rule", c.rule]);
  if (c.grant) lines.push(["Grant", c.grant]);
  if (payload.event === "call.pending" && c.expiresAt) lines.push(["Expires", readableTime(c.expiresAt)]);
  if (payload.event === "call.decided") lines.push(["Status", c.status]);
  if (c.reason) lines.push(["Reason", c.reason]);
  return lines;
}

/** The `format: "slack"` body: `{text, blocks}` that a chat incoming webhook renders. */
export function slackBody(
  payload: DeliveryPayload,
  ctx: MessageContext,
): { text: string; blocks: unknown[] } {
  const url = linkOf(payload, ctx.publicUrl);
  const title = headline(payload);
  const facts =
    payload.event === "catalogue.changed"
      ? payload.changes
          .slice(0, 20)
          .map(
            (ch) =>
              `• ${escapeMrkdwn(ch.kind.replace("_", " "))}: \`${escapeMrkdwn(ch.localName ?? ch.tool)}\``,
          )
      : callLines(payload).map(([label, value]) => `*${label}:* ${escapeMrkdwn(value)}`);
  const blocks: unknown[] = [
    { type: "section", text: { type: "mrkdwn", text: [`*${escapeMrkdwn(title)}*`, ...facts].join("\n") } },
  ];
  if (url) {
    blocks.push({
      type: "actions",
      elements: [
        {
          type: "button",
          text: { type: "plain_text", text: `${linkLabel(payload)} in Gatehouse` },
          url,
          ...(payload.event === "call.pending" ? { style: "primary" } : {}),
        },
      ],
    });
  }
  // `text` is what notifications and clients without blocks show; Slack reads it as mrkdwn too.
  const text = escapeMrkdwn(title) + (url ? ` <${url}|${linkLabel(payload)}>` : "");
  return { text, blocks };
}

function linkLabel(payload: DeliveryPayload): string {
  return payload.event === "call.pending" ? "Review" : "Open";
}

/** The request body for one webhook, in its format. */
export function webhookBody(payload: DeliveryPayload, format: "json" | "slack", ctx: MessageContext): string {
  return JSON.stringify(format === "slack" ? slackBody(payload, ctx) : jsonBody(payload, ctx));
}

/**
 * `Gatehouse-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>`: a receiver
 * recomputes it over the raw body to check the sender, and compares `t` with its clock to refuse
 * a replay.
 */
export function signatureHeader(secret: string, body: string, unixSeconds: number): string {
  const t = Math.floor(unixSeconds);
  const v1 = createHmac("sha256", secret).update(`${t}.${body}`).digest("hex");
  return `t=${t},v1=${v1}`;
}

function escapeHtml(text: string): string {
  return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
}

/** An email about a call: subject, plain text and simple HTML, the link in both, no argument values. */
export function emailMessage(
  payload: CallPayload,
  ctx: MessageContext,
): { subject: string; text: string; html: string } {
  const url = linkOf(payload, ctx.publicUrl);
  const subject = headline(payload).replace(/[\r\n]+/g, " ");
  const lines = callLines(payload);
  const action = payload.event === "call.pending" ? "Review it" : "Open it";
  const text = [
    subject,
    "",
    ...lines.map(([k, v]) => `${k}: ${v}`),
    "",
    url ? `${action}: ${url}` : "Open Gatehouse's Approvals page to decide.",
    "",
    "-- Gatehouse",
  ].join("\n");
  const rows = lines
    .map(([k, v]) => `<tr><th align="left">${escapeHtml(k)}</th><td>${escapeHtml(v)}</td></tr>`)
    .join("");
  const link = url
    ? `<p><a href="${escapeHtml(url)}">${action}</a></p>`
    : "<p>Open Gatehouse's Approvals page to decide.</p>";
  const html = `<p><strong>${escapeHtml(subject)}</strong></p><table>${rows}</table>${link}`;
  return { subject, text, html };
}

/**
 * A digest email: how many calls of one requester wait ("12 calls from billing-bot wait"), with a
 * link to the Approvals page; no tool names or arguments of any one call.
 */
export function digestMessage(
  payload: DigestPayload,
  ctx: MessageContext,
): { subject: string; text: string; html: string } {
  const { requester, waiting } = payload.digest;
  const url = ctx.publicUrl === null ? null : `${ctx.publicUrl}/approvals`;
  const calls = waiting === 1 ? "1 call" : `${waiting} calls`;
  const subject = `${calls} from ${requester.name} ${waiting === 1 ? "waits" : "wait"} for review`.replace(
    /[\r\n]+/g,
    " ",
  );
  const minutes = Math.round(DIGEST_EVERY_MS / 60_000);
  const why = `${requester.name} (${requester.kind}) has more than ${DIGEST_AFTER} calls waiting for a reviewer: instead of a mail for each, you get this summary, at most one every ${minutes} minutes.`;
  const text = [
    subject,
    "",
    why,
    "",
    url ? `Review them: ${url}` : "Open Gatehouse's Approvals page to decide.",
    "",
    "-- Gatehouse",
  ].join("\n");
  const link = url
    ? `<p><a href="${escapeHtml(url)}">Review them</a></p>`
    : "<p>Open Gatehouse's Approvals page to decide.</p>";
  const html = `<p><strong>${escapeHtml(subject)}</strong></p><p>${escapeHtml(why)}</p>${link}`;
  return { subject, text, html };
}
