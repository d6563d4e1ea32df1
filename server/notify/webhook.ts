import "server-only";
import type { WebhookConfig } from "../config";
import { redact } from "../log";
import { createGuardedAgent, guardedFetch } from "../net/guarded-fetch";
import { type MessageContext, signatureHeader, webhookBody } from "./messages";
import type { DeliveryPayload, DeliveryRow } from "./outbox";

/**
 * The outcome of one try: delivered (with the HTTP status, if any), or why not. `final`: trying
 * again cannot help (the guard refused the address or a redirect), so the row fails at once.
 */
export type SendOutcome =
  | { ok: true; status: number | null }
  | { ok: false; status: number | null; error: string; final?: boolean };

const REFUSALS = new Set(["GATEHOUSE_REFUSED_ADDRESS", "GATEHOUSE_REDIRECT_REFUSED"]);

/** Whether `err` (or its cause) is the outbound guard refusing the destination. */
export function isGuardRefusal(err: unknown): boolean {
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 4; depth++) {
    if (REFUSALS.has(String((e as { code?: unknown }).code))) return true;
    e = (e as { cause?: unknown }).cause;
  }
  return false;
}

/** One destination's way of sending a queued row; `send` never throws. */
export interface Sender {
  send(row: DeliveryRow, signal: AbortSignal): Promise<SendOutcome>;
  /** Aborts what is in flight and releases connections. */
  close(): Promise<void>;
}

/** Deadline of one try, connect included (PRODUCT.md §10). */
export const SEND_TIMEOUT_MS = 5_000;

/**
 * Why a try failed, in words that carry no secret: the guard's and undici's messages name hosts
 * and addresses, never a path or query; anything registered as a secret, and the `hide` values
 * (the URL, its path and query, the signing key, the SMTP password), are cut out all the same.
 * `allowPrivateHint` replaces the guard's hint, which names the servers' setting.
 */
export function failureText(err: unknown, hide: readonly string[], allowPrivateHint: string): string {
  let text: string;
  if (err instanceof Error) {
    if (err.name === "TimeoutError") return "timed out";
    const cause = (err as { cause?: unknown }).cause;
    const inner = cause instanceof Error && cause.message !== err.message ? `: ${cause.message}` : "";
    text = `${err.message}${inner}`.replace("set allowPrivate to allow", allowPrivateHint);
  } else {
    text = String(err);
  }
  // OpenSSL's messages ("8070…:error:0A00010B:SSL routines:ssl3_get_record:wrong version number:…")
  // say their point in one field; the rest is a source path.
  text = text.replace(/[0-9A-F]+:error:[0-9A-F]+:SSL routines:[^:]*:([^:]+):\S*/g, "TLS failed: $1");
  for (const h of hide) if (h.length >= 4) text = text.split(h).join("[redacted]");
  return redact(text.replace(/\s+/g, " ").trim()).slice(0, 500);
}

/** The values of a webhook no message may show: its URL, the URL's path and query, its key. */
export function webhookSecrets(hook: WebhookConfig): string[] {
  const out = [hook.url];
  try {
    const u = new URL(hook.url);
    const pathAndQuery = `${u.pathname}${u.search}`;
    if (pathAndQuery !== "/") {
      out.push(pathAndQuery);
      try {
        out.push(decodeURIComponent(pathAndQuery));
      } catch {
        // A stray "%" does not decode: the raw form above is hidden all the same.
      }
    }
  } catch {
    // Validation guarantees a URL; an unparseable one is hidden whole above.
  }
  if (hook.secret) out.push(hook.secret);
  return out;
}

/** A webhook URL's origin, the one part of it safe to show. */
export function originOf(url: string): string {
  try {
    return new URL(url).origin;
  } catch {
    return "(invalid URL)";
  }
}

export interface WebhookSenderOptions {
  publicUrl: string | null;
  /** Address policy override for tests (see `createGuardedAgent`). */
  refuse?: (ip: string) => string | null;
}

/**
 * POSTs rows to one webhook through its own guarded Agent (the dialled address is checked unless
 * `allowPrivate`; redirects re-checked hop by hop, none followed with `allowPrivate`). The body is
 * built and signed at send time, so `t` is when it left. A 2xx answer is delivered.
 */
export function createWebhookSender(hook: WebhookConfig, opts: WebhookSenderOptions): Sender {
  const name = `webhook "${hook.name}"`;
  const agent = createGuardedAgent({
    server: name,
    allowPrivate: hook.allowPrivate,
    connectTimeoutMs: SEND_TIMEOUT_MS,
    ...(opts.refuse ? { refuse: opts.refuse } : {}),
  });
  const fetch = guardedFetch(agent, {
    server: name,
    allowPrivate: hook.allowPrivate,
    credentialHeaders: ["gatehouse-signature"],
    // The body (with argument values, when asked for) goes to this URL only, signed for it.
    refuseRedirects: true,
  });
  const hide = webhookSecrets(hook);
  const hint =
    hook.name === "catalogue"
      ? "set catalogue.webhookAllowPrivate (or the webhook's allowPrivate) to allow"
      : `set allowPrivate on ${name} to allow`;
  return {
    async send(row, signal) {
      const ctx: MessageContext = { deliveryId: row.deliveryId, publicUrl: opts.publicUrl };
      const body = webhookBody(JSON.parse(row.payload) as DeliveryPayload, hook.format, ctx);
      const headers: Record<string, string> = {
        "content-type": "application/json",
        "user-agent": "gatehouse",
        "gatehouse-event": row.event,
        "gatehouse-delivery": row.deliveryId,
      };
      if (hook.secret) headers["gatehouse-signature"] = signatureHeader(hook.secret, body, Date.now() / 1000);
      try {
        const res = await fetch(hook.url, { method: "POST", headers, body, signal });
        // The answer's body is of no interest: release the connection without reading it.
        await res.body?.cancel();
        if (res.ok) return { ok: true, status: res.status };
        return { ok: false, status: res.status, error: `answered ${res.status}` };
      } catch (err) {
        const error = failureText(signal.aborted ? signal.reason : err, hide, hint);
        return { ok: false, status: null, error, final: isGuardRefusal(err) };
      }
    },
    async close() {
      await agent.destroy();
    },
  };
}
