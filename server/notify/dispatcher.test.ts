/**
 * Two dispatchers on one store, as two Gatehouse processes on one PostgreSQL database would run
 * them (each with its own connections; on SQLite, two connections to one file): every queued
 * message is sent exactly once, because each try first takes its row with a conditional update.
 * On PostgreSQL the two do read the same due rows and race for them (without the claim, about a
 * quarter of the messages went out twice); on SQLite their reads rarely overlap. The senders are
 * fakes that answer on the next turn; nothing here leaves the process.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { freshDatabaseUrl, testDialect } from "@/test/support/store";
import type { NotificationsConfig } from "../config";
import { EventBus } from "../events";
import { logger } from "../log";
import { closeDb, type Db, openDb, openStore } from "../store/db";
import type { calls } from "../store/schema";
import { type DeliverySettled, Dispatcher } from "./dispatcher";
import { hook } from "./notify-fixtures";
import { type DeliveryRow, enqueueCallEvent } from "./outbox";
import type { Sender } from "./webhook";

const cleanup: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const fn of cleanup.splice(0).reverse()) await fn();
});

/** Two handles on one new store, closed after the test. */
async function twoHandles(): Promise<[Db, Db]> {
  let open: () => Promise<Db>;
  if (testDialect === "postgres") {
    const url = await freshDatabaseUrl();
    open = () => openStore({ dialect: "postgres", url });
  } else {
    const dir = mkdtempSync(path.join(tmpdir(), "gatehouse-dispatch-test-"));
    cleanup.push(() => rmSync(dir, { recursive: true, force: true }));
    open = async () => openDb(path.join(dir, "gatehouse.db"));
  }
  const a = await open();
  cleanup.push(() => closeDb(a));
  const b = await open();
  cleanup.push(() => closeDb(b));
  return [a, b];
}

const call = (id: string): typeof calls.$inferSelect => ({
  id,
  tool: "demo_add_note",
  server: "demo",
  remoteName: "add_note",
  arguments: "{}",
  argumentsDigest: "d",
  definitionHash: "h",
  destructive: true,
  approvalReason: "no readOnlyHint",
  requesterKind: "agent",
  requesterName: "build-bot",
  status: "pending",
  createdAt: new Date().toISOString(),
  expiresAt: null,
  decidedAt: null,
  decidedBy: null,
  reason: null,
  startedAt: null,
  finishedAt: null,
  result: null,
  resultTruncated: false,
  errorCode: null,
  errorMessage: null,
  rule: null,
  grantId: null,
  approvalsNeeded: 1,
  approvedBy: "[]",
  replica: null,
});

describe("dispatchers sharing one store", () => {
  it("send every queued message exactly once between them", async () => {
    const [one, two] = await twoHandles();
    const config: NotificationsConfig = {
      publicUrl: null,
      webhooks: ["a", "b", "c"].map((name) => hook(name, `https://${name}.example.test/hook`)),
      email: null,
    };
    const messages = 30;
    // No call rows: `callStatusNow` finds none, so every call.pending message is sent.
    for (let i = 0; i < messages; i++) await enqueueCallEvent(one, config, "call.pending", call(`c-${i}`));

    const sent: { by: string; deliveryId: string }[] = [];
    const sender = (by: string): Sender => ({
      async send(row: DeliveryRow) {
        sent.push({ by, deliveryId: row.deliveryId });
        await new Promise<void>((resolve) => setImmediate(resolve));
        return { ok: true, status: 204 };
      },
      close: async () => {},
    });
    const delivered = new Set<string>();
    const allDelivered = new Promise<void>((resolve) => {
      const settled = (d: DeliverySettled) => {
        if (d.status === "delivered") delivered.add(d.deliveryId);
        if (delivered.size === messages * 3) resolve();
      };
      for (const [by, db] of [
        ["one", one],
        ["two", two],
      ] as const) {
        const dispatcher = new Dispatcher({
          db,
          bus: new EventBus(),
          log: logger("notify"),
          senderFor: () => sender(by),
          // Two processes side by side: neither may end the other's claims at its start.
          soleSender: false,
        });
        dispatcher.onSettled(settled);
        cleanup.push(() => dispatcher.stop());
        dispatcher.start();
      }
    });
    await allDelivered;

    expect(sent).toHaveLength(messages * 3);
    expect(new Set(sent.map((s) => s.deliveryId)).size).toBe(messages * 3);
    // Both took part: they raced for the same rows, and each row went to one of them.
    expect(new Set(sent.map((s) => s.by))).toEqual(new Set(["one", "two"]));
  }, 30_000);
});
