/**
 * The other events through a real runtime: call.decided (approved, denied), call.expired and
 * call.interrupted reach a webhook subscribed to them, and catalogue.changed replaces the
 * catalogue webhook — same fields, through the guard, never holding up a refresh, its URL's
 * secret path never logged.
 */
import { describe, expect, it } from "vitest";
import type { LiveEvent } from "@/lib/api-types";
import { prepareDemoStore, registerCleanup, startDemoRuntime, startReceiver } from "@/test/support/notify";
import { ADD_NOTE, createTestUser, LIST_NOTES, request } from "@/test/support/runtime";
import type { GatehouseConfig, NotificationsConfig } from "../config";
import type { Runtime } from "../runtime";
import { calls, tools } from "../store/schema";
import type { CallWebhookBody, CatalogueWebhookBody } from "./messages";
import {
  type Answer,
  captureOutput,
  type DemoConfig,
  deliveryRows,
  demoConfig,
  hook,
  SECRET_PATH,
  SECRET_QUERY,
  untilRow,
} from "./notify-fixtures";

const cleanup = registerCleanup();
const receiverFor = (answers?: Answer[]) => startReceiver(cleanup, answers);

/** Starts a runtime on `demo`; `onEvent` sees bus events from the very first. */
function start(
  demo: DemoConfig,
  config: GatehouseConfig = demo.config,
  onEvent?: (e: LiveEvent, runtime: Runtime) => void,
): Promise<Runtime> {
  return startDemoRuntime(demo, cleanup, onEvent ? { config, onEvent } : { config });
}

function demoWith(notifications: Partial<NotificationsConfig>, expireAfterSeconds?: number) {
  return demoConfig(notifications, expireAfterSeconds ? { expireAfterSeconds } : {});
}

const agent = { kind: "agent", name: "build-bot" } as const;
const bodies = (rx: { received: { body: string }[] }) =>
  rx.received.map((r) => JSON.parse(r.body) as CallWebhookBody);

describe("call and catalogue events", () => {
  it("approvals, denials and expiry reach a webhook subscribed to call.decided and call.expired", async () => {
    const rx = await receiverFor();
    const runtime = await start(
      demoWith({ webhooks: [hook("ops", rx.url, { events: ["call.decided", "call.expired"] })] }, 2),
    );
    const rita = await createTestUser(runtime, "rita", ["reviewer"]);
    const ask = async () =>
      (await runtime.broker.request(agent, { tool: ADD_NOTE, arguments: { text: "n" } })).call;
    const [approved, denied, expired] = [await ask(), await ask(), await ask()];
    await request("POST", `/api/calls/${approved.id}/approve`, { cookie: rita.cookie });
    await request("POST", `/api/calls/${denied.id}/deny`, {
      cookie: rita.cookie,
      body: { reason: "not now" },
    });
    await rx.waitFor((r) => JSON.parse(r.body).event === "call.expired", "call.expired");
    await rx.waitFor((r) => JSON.parse(r.body).call.id === denied.id, "the denial");

    const byCall = new Map(bodies(rx).map((b) => [b.call.id, b]));
    expect(bodies(rx).every((b) => b.event !== ("call.pending" as string))).toBe(true);
    expect(byCall.get(approved.id)).toMatchObject({
      event: "call.decided",
      call: { status: "running", decidedBy: "rita", approvals: 1, approvalsNeeded: 1 },
    });
    expect(byCall.get(denied.id)).toMatchObject({
      event: "call.decided",
      call: { status: "denied", decidedBy: "rita", reason: "not now", approvals: 0 },
    });
    expect(byCall.get(expired.id)).toMatchObject({
      event: "call.expired",
      call: { status: "expired", approvals: 0 },
    });
    expect(byCall.get(expired.id)?.url).toMatch(new RegExp(`/approvals/${expired.id}$`));
  }, 60_000);

  it("a pending message still waiting for its retry is not sent once the call is decided or withdrawn", async () => {
    const rx = await receiverFor([500]);
    const runtime = await start(demoWith({ webhooks: [hook("ops", rx.url, { events: ["call.pending"] })] }));
    const rita = await createTestUser(runtime, "rita", ["reviewer"]);
    const denied = (await runtime.broker.request(agent, { tool: ADD_NOTE, arguments: { text: "a" } })).call;
    const withdrawn = (await runtime.broker.request(agent, { tool: ADD_NOTE, arguments: { text: "b" } }))
      .call;
    const triedOnce = (id: string) => (r: { callId: string | null; attempts: number }) =>
      r.callId === id && r.attempts === 1;
    await untilRow(runtime.notifier, runtime.db, triedOnce(denied.id));
    await untilRow(runtime.notifier, runtime.db, triedOnce(withdrawn.id));

    await request("POST", `/api/calls/${denied.id}/deny`, { cookie: rita.cookie, body: { reason: "no" } });
    await runtime.broker.withdraw(agent, withdrawn.id);
    // The retries come due and find their calls decided: they end without being sent.
    await untilRow(runtime.notifier, runtime.db, (r) => r.callId === denied.id && r.status === "failed");
    await untilRow(runtime.notifier, runtime.db, (r) => r.callId === withdrawn.id && r.status === "failed");
    expect(rx.received).toHaveLength(2);
    const rows = await deliveryRows(runtime.db);
    expect(rows.map((r) => [r.callId, r.status, r.attempts, r.lastError])).toEqual([
      [denied.id, "failed", 1, "superseded: the call was denied before this was delivered"],
      [withdrawn.id, "failed", 1, "superseded: the call was withdrawn before this was delivered"],
    ]);
  }, 60_000);

  it("a call left running by a crash is reported as call.interrupted once the next start finds it", async () => {
    const rx = await receiverFor();
    const demo = demoWith({ webhooks: [hook("ops", rx.url, { events: ["call.interrupted"] })] });
    // The store as a crash leaves it: an approved call still `running`, and a read-only one that
    // nobody was ever asked about (it is not reported).
    const now = new Date().toISOString();
    const readOnly = {
      id: "crashed-read",
      tool: ADD_NOTE,
      server: "demo",
      remoteName: "add_note",
      arguments: "{}",
      argumentsDigest: "sha256:y",
      destructive: false,
      requesterKind: "agent",
      requesterName: "build-bot",
      status: "running" as const,
      createdAt: now,
      startedAt: now,
    };
    await prepareDemoStore(demo, async (db) => {
      await db.insert(calls).values(readOnly);
      await db.insert(calls).values({
        approvalReason: "no readOnlyHint",
        id: "crashed-call",
        tool: ADD_NOTE,
        server: "demo",
        remoteName: "add_note",
        arguments: JSON.stringify({ text: "n" }),
        argumentsDigest: "sha256:x",
        destructive: true,
        requesterKind: "agent",
        requesterName: "build-bot",
        status: "running",
        createdAt: now,
        decidedAt: now,
        decidedBy: "rita",
        startedAt: now,
      });
    });

    const runtime = await start(demo);
    const got = await rx.waitFor(() => true, "call.interrupted");
    expect(JSON.parse(got.body)).toMatchObject({
      event: "call.interrupted",
      call: { id: "crashed-call", status: "interrupted", decidedBy: "rita", approvals: 1 },
    });
    // Both were interrupted; only the one a reviewer had seen was queued.
    expect((await deliveryRows(runtime.db)).map((r) => r.callId)).toEqual(["crashed-call"]);
  }, 60_000);

  it("catalogue.webhook sends each refresh that changed something as catalogue.changed, the refresh not waiting", async () => {
    const rx = await receiverFor(["hang"]);
    // The shorthand as it is written today, through validation.
    const demo = demoConfig({}, {}, { catalogue: { webhook: rx.url, webhookAllowPrivate: true } });
    // Read as each refresh is announced: the rows then, and what the receiver had got by then.
    const atRefresh: Promise<{ rows: Awaited<ReturnType<typeof deliveryRows>>; received: number }>[] = [];
    const runtime = await start(demo, demo.config, (e, rt) => {
      if (e.type !== "catalogue") return;
      const received = rx.received.length;
      atRefresh.push(deliveryRows(rt.db).then((rows) => ({ rows, received })));
    });
    const got = await rx.waitFor(() => true, "catalogue.changed");
    const body = JSON.parse(got.body) as CatalogueWebhookBody;
    expect(got.url).toBe(`${SECRET_PATH}?${SECRET_QUERY}`);
    expect(body).toMatchObject({ source: "gatehouse", event: "catalogue.changed", server: "demo" });
    expect(body.url).toMatch(/\/changes$/);
    expect(body.changes.map((c) => `${c.kind} ${c.localName}`).sort()).toEqual([
      `added ${ADD_NOTE}`,
      `added ${LIST_NOTES}`,
    ]);
    expect(body.changes.every((c) => c.at === body.at && typeof c.id === "number")).toBe(true);
    expect(body.deliveryId).toBe((await deliveryRows(runtime.db))[0]?.deliveryId);
    // When the refresh was announced its message was queued, untried: the refresh never waits on it.
    expect(await atRefresh[0]).toMatchObject({
      received: 0,
      rows: [{ target: "catalogue", status: "queued", attempts: 0 }],
    });
  }, 60_000);

  it("a loopback catalogue webhook without webhookAllowPrivate is refused, logged without its secret", async () => {
    const output = captureOutput();
    cleanup.push(() => output.restore());
    const rx = await receiverFor();
    const demo = demoConfig({}, {}, { catalogue: { webhook: rx.url } });
    const runtime = await start(demo);
    const failed = await untilRow(runtime.notifier, runtime.db, (r) => r.status === "failed");
    expect(failed.lastError).toMatch(
      /refused: 127\.0\.0\.1, a loopback address; set catalogue\.webhookAllowPrivate \(or the webhook's allowPrivate\) to allow/,
    );
    expect(rx.connections).toBe(0);
    // The catalogue was stored all the same.
    expect(await runtime.db.select().from(tools)).toHaveLength(2);
    expect(output.text()).toMatch(/notification failed: fetch failed: refused/);
    expect(output.text()).not.toMatch(/s3cr3t/);
  }, 60_000);
});
