/**
 * A webhook's signed body goes to its configured URL only: a redirect is refused (and final),
 * even for a destination that the address check lets through. Real HTTP servers on 127.0.0.1,
 * with the address policy told to treat loopback as public, as the guard's own tests do.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { hook, receiver } from "./notify-fixtures";
import type { DeliveryRow } from "./outbox";
import { createWebhookSender, webhookSecrets } from "./webhook";

const cleanup: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const fn of cleanup.splice(0).reverse()) await fn();
});

function row(): DeliveryRow {
  return {
    id: 1,
    deliveryId: "d-1",
    channel: "webhook",
    target: "ops",
    event: "call.pending",
    callId: "c-1",
    requester: "agent:bot",
    payload: JSON.stringify({
      event: "call.pending",
      at: new Date().toISOString(),
      call: { id: "c-1", tool: "demo_add_note", server: "demo", requester: { kind: "agent", name: "bot" } },
      arguments: { text: "s3cr3t-argument" },
    }),
    status: "queued",
    attempts: 0,
    claimedUntil: null,
    claimedBy: null,
    nextAttemptAt: new Date().toISOString(),
    deadline: null,
    lastStatus: null,
    lastError: null,
    createdAt: new Date().toISOString(),
    finishedAt: null,
  };
}

describe("webhook redirects", () => {
  it("a receiver that redirects is not followed: the other address sees nothing and the try is final", async () => {
    const elsewhere = await receiver();
    cleanup.push(() => elsewhere.close());
    const redirecting = http.createServer((_req, res) => {
      res.writeHead(307, { location: `${elsewhere.origin}/collect` });
      res.end();
    });
    await new Promise<void>((resolve) => redirecting.listen(0, "127.0.0.1", resolve));
    cleanup.push(() => new Promise<void>((resolve) => redirecting.close(() => resolve())));
    const url = `http://127.0.0.1:${(redirecting.address() as AddressInfo).port}/hook`;

    const sender = createWebhookSender(hook("ops", url, { allowPrivate: false, secret: "k3y-k3y-k3y" }), {
      publicUrl: null,
      refuse: () => null,
    });
    cleanup.push(() => sender.close());
    const outcome = await sender.send(row(), AbortSignal.timeout(5_000));
    expect(outcome).toMatchObject({ ok: false, final: true });
    expect(outcome.ok ? "" : outcome.error).toMatch(
      /answered with a redirect \(307\); it must answer itself/,
    );
    expect(elsewhere.connections).toBe(0);
    expect(elsewhere.received).toEqual([]);
  });

  it("a webhook path that does not decode is still hidden from messages", () => {
    const secrets = webhookSecrets(hook("ops", "https://hooks.example.com/T0/%zz-s3cr3t?key=abc"));
    expect(secrets).toContain("/T0/%zz-s3cr3t?key=abc");
  });
});
