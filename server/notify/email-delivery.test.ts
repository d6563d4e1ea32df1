/**
 * Email end to end, against a real in-process SMTP server (`smtp-server`) on 127.0.0.1: who gets
 * mail about a pending call, what it says, the address check on the SMTP socket, and — with
 * webhooks beside it — that no secret (a webhook URL's path and query, its signing key, the SMTP
 * password) reaches a log line, the delivery log API or a stored error.
 */

import type dns from "node:dns";
import { eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import type { NotificationsView } from "@/lib/notification-types";
import { registerCleanup, startDemoRuntime } from "@/test/support/notify";
import { ADD_NOTE, bodyOf, createTestUser, request } from "@/test/support/runtime";
import type { EmailConfig, NotificationsConfig } from "../config";
import type { Runtime } from "../runtime";
import { users } from "../store/schema";
import { createEmailSender } from "./email";
import {
  captureOutput,
  deliveryRows,
  demoConfig,
  freePort,
  hook,
  mailReceiver,
  PUBLIC_URL,
  receiver,
  untilRow,
} from "./notify-fixtures";
import type { DeliveryRow } from "./outbox";

const cleanup = registerCleanup();

function start(notifications: Partial<NotificationsConfig>): Promise<Runtime> {
  return startDemoRuntime(demoConfig(notifications), cleanup);
}

async function smtp() {
  const rx = await mailReceiver();
  cleanup.push(() => rx.close());
  return rx;
}

function email(url: string, more: Partial<EmailConfig> = {}): EmailConfig {
  return { smtp: url, from: "gatehouse@example.test", events: ["call.pending"], allowPrivate: true, ...more };
}

async function person(
  runtime: Runtime,
  name: string,
  roles: ("owner" | "reviewer")[],
  address: string | null,
) {
  const made = await createTestUser(runtime, name, roles);
  await runtime.db.update(users).set({ email: address }).where(eq(users.name, name));
  return made;
}

describe("email notifications", () => {
  it("a reviewer with an address is mailed the pending call with its link; nobody else is", async () => {
    const rx = await smtp();
    const runtime = await start({
      // No password: one is only ever sent over TLS (see the plain-SMTP test below).
      email: email(`smtp://127.0.0.1:${rx.port}`),
    });
    await person(runtime, "rita", ["reviewer"], "rita@example.test");
    await person(runtime, "nomail", ["reviewer"], null);
    await person(runtime, "rex", ["reviewer"], "rex@example.test");
    await person(runtime, "otto", ["owner"], "otto@example.test");
    // A person's own call: rex is a reviewer with an address, and is still not asked.
    const { call } = await runtime.broker.request(
      { kind: "user", name: "rex" },
      { tool: ADD_NOTE, arguments: { text: "private-argument-text" } },
    );
    const mail = await rx.waitFor((m) => m.to.includes("rita@example.test"), "rita's mail");
    expect(mail.from).toBe("gatehouse@example.test");
    expect(mail.text).toContain("Subject: Approval needed: demo_add_note by rex");
    expect(mail.text).toContain(`${PUBLIC_URL}/approvals/${call.id}`);
    expect(mail.text).toContain(`href="${PUBLIC_URL}/approvals/${call.id}"`);
    expect(mail.text).not.toContain("private-argument-text");

    const done = await untilRow(runtime.notifier, runtime.db, (r) => r.status === "delivered");
    expect(done).toMatchObject({ channel: "email", target: "rita", attempts: 1, callId: call.id });
    // Exactly one row was queued (rita's); the others never had one.
    expect((await deliveryRows(runtime.db)).map((r) => r.target)).toEqual(["rita"]);
    expect(rx.mails).toHaveLength(1);

    const owner = await person(runtime, "olga", ["owner"], null);
    const view = await bodyOf<NotificationsView>(
      await request("GET", "/api/notifications", { cookie: owner.cookie }),
    );
    expect(view.channels).toEqual([
      {
        channel: "email",
        name: "email",
        target: "127.0.0.1",
        format: "email",
        events: ["call.pending"],
        signed: false,
        deliveries: [expect.objectContaining({ status: "delivered", callId: call.id })],
      },
    ]);
  }, 60_000);

  it("an SMTP server on 127.0.0.1 without allowPrivate is refused before any connection", async () => {
    const rx = await smtp();
    const runtime = await start({ email: email(`smtp://127.0.0.1:${rx.port}`, { allowPrivate: false }) });
    await person(runtime, "rita", ["reviewer"], "rita@example.test");
    await runtime.broker.request(
      { kind: "agent", name: "build-bot" },
      { tool: ADD_NOTE, arguments: { text: "x" } },
    );
    const failed = await untilRow(runtime.notifier, runtime.db, (r) => r.status === "failed");
    expect(failed.attempts).toBe(1);
    expect(failed.lastError).toBe(
      "refused: 127.0.0.1, a loopback address; set notifications.email.allowPrivate to allow",
    );
    expect(rx.connections).toBe(0);
    expect(rx.mails).toEqual([]);
  }, 60_000);

  it("a password is never sent over plain SMTP: without STARTTLS from the server, nothing is sent", async () => {
    const rx = await smtp();
    const runtime = await start({ email: email(`smtp://gatehouse:smtp-pass-word@127.0.0.1:${rx.port}`) });
    await person(runtime, "rita", ["reviewer"], "rita@example.test");
    await runtime.broker.request(
      { kind: "agent", name: "build-bot" },
      { tool: ADD_NOTE, arguments: { text: "x" } },
    );
    const tried = await untilRow(
      runtime.notifier,
      runtime.db,
      (r) => r.channel === "email" && r.attempts >= 1,
    );
    expect(tried.status).not.toBe("delivered");
    expect(tried.lastError ?? "").not.toContain("smtp-pass-word");
    // The server offers no STARTTLS (and would accept AUTH in the clear): it never saw one.
    expect(rx.connections).toBeGreaterThan(0);
    expect(rx.logins).toEqual([]);
    expect(rx.mails).toEqual([]);
  }, 60_000);

  it("secrets never reach the logs, the delivery log API or a stored error", async () => {
    const previousLevel = process.env.GATEHOUSE_LOG_LEVEL;
    process.env.GATEHOUSE_LOG_LEVEL = "debug";
    const output = captureOutput();
    cleanup.push(() => {
      output.restore();
      process.env.GATEHOUSE_LOG_LEVEL = previousLevel;
    });
    const flaky = await receiver([500, 204]);
    cleanup.push(() => flaky.close());
    const closedUrl = `http://127.0.0.1:${await freePort()}/hooks/s3cr3t-closed?key=s3cr3t-key`;
    const rx = await mailReceiver();
    cleanup.push(() => rx.close());
    const secrets = ["s3cr3t", "whsec-signing-key", "smtp-pass-word"];

    const runtime = await start({
      webhooks: [
        hook("flaky", flaky.url, { secret: "whsec-signing-key" }),
        hook("down", closedUrl, { secret: "whsec-signing-key" }),
      ],
      email: email(`smtps://gatehouse:smtp-pass-word@127.0.0.1:${rx.port}`),
    });
    await person(runtime, "rita", ["reviewer"], "rita@example.test");
    const owner = await person(runtime, "otto", ["owner"], null);
    await runtime.broker.request(
      { kind: "agent", name: "build-bot" },
      { tool: ADD_NOTE, arguments: { text: "x" } },
    );

    // flaky: a 500, then delivered. down: a refused connection. email: smtps to a plain server fails.
    await untilRow(runtime.notifier, runtime.db, (r) => r.target === "flaky" && r.status === "delivered");
    await untilRow(runtime.notifier, runtime.db, (r) => r.target === "down" && r.attempts >= 1);
    await untilRow(runtime.notifier, runtime.db, (r) => r.channel === "email" && r.attempts >= 1);
    const rows = await deliveryRows(runtime.db);
    const errors = rows.map((r) => r.lastError ?? "");
    expect(errors.find((e) => /ECONNREFUSED/.test(e))).toBeDefined();
    expect(
      errors.find((e) => e !== "" && rows.find((r) => r.lastError === e)?.channel === "email"),
    ).toBeDefined();

    const res = await request("GET", "/api/notifications", { cookie: owner.cookie });
    const view = await bodyOf<NotificationsView>(res);
    expect(view.channels.map((c) => [c.name, c.target, c.signed])).toEqual([
      ["flaky", flaky.origin, true],
      ["down", new URL(closedUrl).origin, true],
      ["email", "127.0.0.1", false],
    ]);
    const logged = output.text();
    expect(logged).toMatch(/notification try failed: answered 500/);
    for (const secret of secrets) {
      expect(logged, "the logs").not.toContain(secret);
      expect(JSON.stringify(view), "the API answer").not.toContain(secret);
      for (const e of errors) expect(e, "a stored error").not.toContain(secret);
    }
  }, 60_000);

  it("the SMTP socket dials the address it checked: a name is judged by what it resolves to", async () => {
    const rx = await smtp();
    // A name no real resolver knows, answered by the test's resolver with loopback.
    const lookup = ((_host: string, _opts: unknown, cb: (e: null, a: dns.LookupAddress[]) => void) =>
      cb(null, [{ address: "127.0.0.1", family: 4 }])) as unknown as typeof dns.lookup;
    const row = {
      id: 1,
      deliveryId: "d-1",
      event: "call.pending",
      payload: JSON.stringify({
        event: "call.pending",
        at: new Date().toISOString(),
        to: "rita@example.test",
        call: {
          id: "c-1",
          tool: "t",
          server: "s",
          requester: { kind: "agent", name: "a" },
          status: "pending",
        },
      }),
    } as DeliveryRow;
    const config = email(`smtp://mail.example.test:${rx.port}`, { allowPrivate: false });

    const refused = createEmailSender(config, { publicUrl: null, lookup });
    cleanup.push(() => refused.close());
    expect(await refused.send(row, AbortSignal.timeout(5_000))).toEqual({
      ok: false,
      status: null,
      final: true,
      error:
        "refused: mail.example.test resolves to 127.0.0.1, a loopback address; set notifications.email.allowPrivate to allow",
    });
    expect(rx.connections).toBe(0);

    // Under a policy that counts 127.0.0.1 as public the same name is dialled — at the address
    // the check saw, since nothing else could resolve it.
    const allowed = createEmailSender(config, { publicUrl: null, lookup, refuse: () => null });
    cleanup.push(() => allowed.close());
    expect(await allowed.send(row, AbortSignal.timeout(5_000))).toEqual({ ok: true, status: null });
    expect(rx.mails.map((m) => m.to)).toEqual([["rita@example.test"]]);
  });
});
