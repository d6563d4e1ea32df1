/**
 * The outbox on a real SQLite store with migrations: who gets a row for which event, what the
 * row carries, that the rows stand or fall with the caller's transaction, and pruning.
 */
import { asc } from "drizzle-orm";
import { afterEach, describe, expect, it } from "vitest";
import type { NotificationsConfig } from "../config";
import { type Db, openDb } from "../store/db";
import { type calls, notificationDeliveries, users } from "../store/schema";
import { hook } from "./notify-fixtures";
import {
  type CallPayload,
  enqueueCallEvent,
  enqueueCatalogueChange,
  pruneFinished,
  recentDeliveries,
  recordAttempt,
} from "./outbox";

type CallRow = typeof calls.$inferSelect;

const dbs: Db[] = [];
afterEach(() => {
  for (const db of dbs.splice(0)) db.$client.close();
});

function store(): Db {
  const db = openDb(":memory:");
  dbs.push(db);
  const person = (name: string, roles: string, email: string | null) =>
    db.insert(users).values({ name, passwordHash: "x", roles, email }).run();
  person("rita", "reviewer", "rita@example.test");
  person("otto", "owner", "otto@example.test");
  person("both", "owner,reviewer", "both@example.test");
  person("nomail", "reviewer", null);
  return db;
}

const pendingCall: CallRow = {
  id: "c-1",
  tool: "demo_add_note",
  server: "demo",
  remoteName: "add_note",
  arguments: JSON.stringify({ text: "the note" }),
  argumentsDigest: "sha256:d",
  definitionHash: "h",
  destructive: true,
  approvalReason: "no readOnlyHint",
  requesterKind: "agent",
  requesterName: "build-bot",
  status: "pending",
  createdAt: "2026-12-01T10:00:00.000Z",
  expiresAt: "2099-12-01T10:15:00.000Z",
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
};

const config: NotificationsConfig = {
  publicUrl: null,
  webhooks: [
    hook("chat", "https://hooks.example.test/a", { events: ["call.pending", "call.decided"] }),
    hook("pager", "https://pager.example.test/b", { events: ["call.expired"], includeArguments: true }),
    hook("audit", "https://audit.example.test/c", {
      events: ["call.pending", "catalogue.changed"],
      includeArguments: true,
    }),
  ],
  email: {
    smtp: "smtp://mail.example.test:25",
    from: "gh@example.test",
    events: ["call.pending"],
    allowPrivate: false,
  },
};

function rows(db: Db) {
  return db
    .select()
    .from(notificationDeliveries)
    .all()
    .map((r) => ({ ...r, payload: JSON.parse(r.payload) as CallPayload }));
}

describe("the notification outbox", () => {
  it("call.pending queues a row per subscribed webhook and per reviewer with an address", () => {
    const db = store();
    expect(enqueueCallEvent(db, config, "call.pending", pendingCall)).toBe(4);
    const queued = rows(db);
    expect(queued.map((r) => `${r.channel}:${r.target}`).sort()).toEqual([
      "email:both",
      "email:rita",
      "webhook:audit",
      "webhook:chat",
    ]);
    for (const r of queued) {
      expect(r).toMatchObject({ status: "queued", attempts: 0, event: "call.pending", callId: "c-1" });
      // No try after the call's expiry: nobody could act on it then.
      expect(r.deadline).toBe(pendingCall.expiresAt);
      expect(r.nextAttemptAt <= new Date().toISOString()).toBe(true);
      expect(r.payload.call).toMatchObject({
        id: "c-1",
        approvals: 0,
        approvalsNeeded: 1,
        status: "pending",
      });
    }
    expect(new Set(queued.map((r) => r.deliveryId)).size).toBe(4);
    const byTarget = Object.fromEntries(queued.map((r) => [r.target, r.payload]));
    expect(byTarget.audit?.call.arguments).toEqual({ text: "the note" });
    expect(byTarget.chat?.call).not.toHaveProperty("arguments");
    expect(byTarget.rita?.call).not.toHaveProperty("arguments");
    expect(byTarget.rita?.to).toBe("rita@example.test");
  });

  it("a reviewer who requested the call is not asked to review it", () => {
    const db = store();
    enqueueCallEvent(db, config, "call.pending", {
      ...pendingCall,
      requesterKind: "user",
      requesterName: "rita",
    });
    expect(
      rows(db)
        .filter((r) => r.channel === "email")
        .map((r) => r.target),
    ).toEqual(["both"]);
  });

  it("other events go only where they are subscribed, without a deadline; an approval counts", () => {
    const db = store();
    const approved = { ...pendingCall, status: "running" as const, decidedBy: "rita" };
    enqueueCallEvent(db, config, "call.decided", approved);
    enqueueCallEvent(db, config, "call.expired", { ...pendingCall, status: "expired" });
    enqueueCallEvent(db, config, "call.interrupted", { ...approved, status: "interrupted" });
    expect(rows(db).map((r) => [r.event, r.target, r.deadline, r.payload.call.approvals])).toEqual([
      ["call.decided", "chat", null, 1],
      ["call.expired", "pager", null, 0],
    ]);
  });

  it("rows queued inside a transaction that rolls back are gone with it", () => {
    const db = store();
    expect(() =>
      db.transaction(() => {
        enqueueCallEvent(db, config, "call.pending", pendingCall);
        throw new Error("the call's own write failed");
      }),
    ).toThrow("the call's own write failed");
    expect(rows(db)).toEqual([]);
  });

  it("catalogue.changed goes to its subscribers only, and an empty refresh queues nothing", () => {
    const db = store();
    const change = {
      id: 7,
      at: "2026-12-01T10:00:00.000Z",
      server: "demo",
      kind: "added" as const,
      tool: "a",
      localName: "demo_a",
      detail: null,
    };
    expect(enqueueCatalogueChange(db, config, "demo", [])).toBe(0);
    expect(enqueueCatalogueChange(db, config, "demo", [change])).toBe(1);
    const [row] = db.select().from(notificationDeliveries).all();
    expect(row).toMatchObject({ target: "audit", event: "catalogue.changed", callId: null, deadline: null });
    expect(JSON.parse(row?.payload ?? "{}")).toEqual({
      event: "catalogue.changed",
      at: change.at,
      server: "demo",
      changes: [change],
    });
  });

  it("pruning keeps the newest 200 finished rows of a destination and every queued one", () => {
    const db = store();
    const solo: NotificationsConfig = {
      ...config,
      webhooks: [hook("chat", "https://h.example.test/x")],
      email: null,
    };
    for (let i = 0; i < 230; i++)
      enqueueCallEvent(db, solo, "call.pending", { ...pendingCall, id: `c-${i}` });
    const all = db
      .select({ id: notificationDeliveries.id })
      .from(notificationDeliveries)
      .orderBy(asc(notificationDeliveries.id))
      .all();
    // The first 225 finish; the last 5 stay queued.
    for (const { id } of all.slice(0, 225)) {
      recordAttempt(db, id, { status: "delivered", attempts: 1, lastStatus: 204, lastError: null });
    }
    pruneFinished(db, "webhook", "chat");
    const left = db.select().from(notificationDeliveries).orderBy(asc(notificationDeliveries.id)).all();
    expect(left.filter((r) => r.status === "queued")).toHaveLength(5);
    const finished = left.filter((r) => r.status !== "queued");
    expect(finished).toHaveLength(200);
    expect(finished[0]?.id).toBe(all[25]?.id);
    const log = recentDeliveries(db, { channel: "webhook", target: "chat" });
    expect(log).toHaveLength(50);
    expect(log[0]).toMatchObject({ id: all[229]?.id, status: "queued", finishedAt: null });
    expect(log[0]?.nextAttemptAt).not.toBeNull();
    expect(log[10]).toMatchObject({ status: "delivered", nextAttemptAt: null, lastStatus: 204 });
  });
});
