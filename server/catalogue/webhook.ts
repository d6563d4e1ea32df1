import "server-only";
import { type Logger, registerSecrets } from "../log";
import { createGuardedAgent, guardedFetch } from "../net/guarded-fetch";
import type { RecordedChange } from "./changes";

/**
 * The optional catalogue webhook (`catalogue.webhook`, PRODUCT.md §5): each refresh that changed
 * something is POSTed as JSON, so nobody has to keep the Changes page open.
 *
 * It goes through the same outbound guard as MCP servers (its own Agent: loopback and private
 * addresses are refused unless `catalogue.webhookAllowPrivate`, each redirect hop is re-checked)
 * and it never holds up a refresh: posts are fire-and-forget with a deadline, a bounded number in
 * flight, and failures are logged with the target's origin only — a webhook URL often carries
 * its secret in the path or query (Slack, Discord), so neither is ever written anywhere.
 */

/** The JSON body of one post. */
export interface CatalogueWebhookPayload {
  source: "gatehouse";
  event: "catalogue.changes";
  server: string;
  /** When the refresh was recorded (the changes' shared `at`). */
  at: string;
  changes: RecordedChange[];
}

export interface CatalogueWebhookOptions {
  url: string;
  allowPrivate: boolean;
  log: Logger;
  /** Deadline of one post, connect included. Default 5000 ms. */
  timeoutMs?: number;
  /** Posts in flight at most; a refresh beyond that is not posted (and says so in the log). Default 8. */
  maxInFlight?: number;
  /** Address policy override for tests (see `createGuardedAgent`). */
  refuse?: (ip: string) => string | null;
}

export interface CatalogueWebhook {
  /** Posts one refresh's changes and returns at once; nothing is sent for an empty list. */
  send(server: string, changes: readonly RecordedChange[]): void;
  /** Resolves once every post in flight has finished, successfully or not. */
  idle(): Promise<void>;
  /** Aborts posts in flight and releases connections. */
  close(): Promise<void>;
}

export const WEBHOOK_TIMEOUT_MS = 5_000;
export const WEBHOOK_MAX_IN_FLIGHT = 8;

function originOf(url: string): string {
  try {
    return new URL(url).origin;
  } catch {
    return "(invalid URL)";
  }
}

/** Why a post failed, in words that carry no part of the URL but its host. */
function failure(err: unknown): string {
  if (err instanceof Error) {
    if (err.name === "TimeoutError") return "timed out";
    const cause = (err as { cause?: unknown }).cause;
    const inner = cause instanceof Error ? `: ${cause.message}` : "";
    // The guard's hint names the server setting; the webhook has its own.
    return `${err.message}${inner}`.replace(
      "set allowPrivate to allow",
      "set catalogue.webhookAllowPrivate to allow",
    );
  }
  return String(err);
}

export function createCatalogueWebhook(opts: CatalogueWebhookOptions): CatalogueWebhook {
  registerSecrets([opts.url]);
  const timeoutMs = opts.timeoutMs ?? WEBHOOK_TIMEOUT_MS;
  const maxInFlight = opts.maxInFlight ?? WEBHOOK_MAX_IN_FLIGHT;
  const target = originOf(opts.url);
  const agent = createGuardedAgent({
    server: "catalogue webhook",
    allowPrivate: opts.allowPrivate,
    connectTimeoutMs: timeoutMs,
    ...(opts.refuse ? { refuse: opts.refuse } : {}),
  });
  const fetch = guardedFetch(agent, {
    server: "catalogue webhook",
    allowPrivate: opts.allowPrivate,
    credentialHeaders: [],
  });
  const inFlight = new Set<Promise<void>>();
  let closed = false;

  async function post(payload: CatalogueWebhookPayload): Promise<void> {
    const fields = { target, server: payload.server, changes: payload.changes.length };
    try {
      const res = await fetch(opts.url, {
        method: "POST",
        headers: { "content-type": "application/json", "user-agent": "gatehouse" },
        body: JSON.stringify(payload),
        signal: AbortSignal.timeout(timeoutMs),
      });
      // The answer's body is of no interest: release the connection without reading it.
      await res.body?.cancel();
      if (res.ok) opts.log.debug("catalogue webhook delivered", { ...fields, status: res.status });
      else opts.log.warn(`catalogue webhook answered ${res.status}`, fields);
    } catch (err) {
      if (!closed) opts.log.warn(`catalogue webhook failed: ${failure(err)}`, fields);
    }
  }

  async function idle(): Promise<void> {
    while (inFlight.size > 0) await Promise.all([...inFlight]);
  }

  return {
    send(server, changes) {
      if (closed || changes.length === 0) return;
      if (inFlight.size >= maxInFlight) {
        opts.log.warn("catalogue webhook skipped: too many posts still in flight", {
          target,
          server,
          inFlight: inFlight.size,
        });
        return;
      }
      const payload: CatalogueWebhookPayload = {
        source: "gatehouse",
        event: "catalogue.changes",
        server,
        at: changes[0]?.at ?? new Date().toISOString(),
        changes: [...changes],
      };
      const p = post(payload).finally(() => inFlight.delete(p));
      inFlight.add(p);
    },
    idle,
    async close() {
      closed = true;
      await agent.destroy();
      await idle();
    },
  };
}
