/**
 * The outbox on a real, migrated store (SQLite in memory, or PostgreSQL): who gets a row for
 * which event, what the row carries, that the rows stand or fall with the caller's transaction,
 * that one claimant takes a row for a try, and pruning.
 */
import { asc, eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { openTestDb } from "@/test/support/store";
import { removeUser } from "../auth/user-admin";
import type { NotificationsConfig } from "../config";
import { type Db, first, transaction } from "../store/db";
import { type calls, notificationDeliveries, replicas, users } from "../store/schema";
import { claimDelivery, releaseClaims, releaseClaimsOf, releaseDelivery } from "./claims";
import { takeDigest } from "./digests";
import { hook } from "./notify-fixtures";
import {
  type CallPayload,
  dueDeliveries,
  enqueueCallEvent,
  enqueueCatalogueChange,
  pruneFinished,
  recentDeliveries,
  recordAttempt,
} from "./outbox";

type CallRow = typeof calls.$inferSelect;

async function store(): Promise<Db> {
  const db = await openTestDb();
  const person = (name: string, roles: string, email: string | null) =>
    db.insert(users).values({ name, passwordHash: "x", roles, email });
  await person("rita", "reviewer", "rita@example.test");
  await person("otto", "owner", "otto@example.test");
  await person("both", "owner,reviewer", "both@example.test");
  await person("nomail", "reviewer", null);
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
  replica: null,
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

async function rows(db: Db) {
  const all = await db.select().from(notificationDeliveries).orderBy(asc(notificationDeliveries.id));
  return all.map((r) => ({ ...r, payload: JSON.parse(r.payload) as CallPayload }));
}

describe("the notification outbox", () => {
  it("call.pending queues a row per subscribed webhook and per reviewer with an address", async () => {
    const db = await store();
    expect(await enqueueCallEvent(db, config, "call.pending", pendingCall)).toBe(4);
    const queued = await rows(db);
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

  it("a reviewer who requested the call is not asked to review it", async () => {
    const db = await store();
    await enqueueCallEvent(db, config, "call.pending", {
      ...pendingCall,
      requesterKind: "user",
      requesterName: "rita",
    });
    expect((await rows(db)).filter((r) => r.channel === "email").map((r) => r.target)).toEqual(["both"]);
  });

  it("other events go only where they are subscribed, without a deadline; an approval counts", async () => {
    const db = await store();
    const approved = { ...pendingCall, status: "running" as const, decidedBy: "rita" };
    await enqueueCallEvent(db, config, "call.decided", approved);
    await enqueueCallEvent(db, config, "call.expired", { ...pendingCall, status: "expired" });
    await enqueueCallEvent(db, config, "call.interrupted", { ...approved, status: "interrupted" });
    expect((await rows(db)).map((r) => [r.event, r.target, r.deadline, r.payload.call.approvals])).toEqual([
      ["call.decided", "chat", null, 1],
      ["call.expired", "pager", null, 0],
    ]);
  });

  it("rows queued inside a transaction that rolls back are gone with it", async () => {
    const db = await store();
    await expect(
      transaction(db, async (tx) => {
        await enqueueCallEvent(tx, config, "call.pending", pendingCall);
        throw new Error("the call's own write failed");
      }),
    ).rejects.toThrow("the call's own write failed");
    expect(await rows(db)).toEqual([]);
  });

  it("catalogue.changed goes to its subscribers only, and an empty refresh queues nothing", async () => {
    const db = await store();
    const change = {
      id: 7,
      at: "2026-12-01T10:00:00.000Z",
      server: "demo",
      kind: "added" as const,
      tool: "a",
      localName: "demo_a",
      detail: null,
    };
    expect(await enqueueCatalogueChange(db, config, "demo", [])).toBe(0);
    expect(await enqueueCatalogueChange(db, config, "demo", [change])).toBe(1);
    const [row] = await db.select().from(notificationDeliveries);
    expect(row).toMatchObject({ target: "audit", event: "catalogue.changed", callId: null, deadline: null });
    expect(JSON.parse(row?.payload ?? "{}")).toEqual({
      event: "catalogue.changed",
      at: change.at,
      server: "demo",
      changes: [change],
    });
  });

  it("pruning keeps the newest 200 finished rows of a destination and every queued one", async () => {
    const db = await store();
    const solo: NotificationsConfig = {
      ...config,
      webhooks: [hook("chat", "https://h.example.test/x")],
      email: null,
    };
    for (let i = 0; i < 230; i++)
      await enqueueCallEvent(db, solo, "call.pending", { ...pendingCall, id: `c-${i}` });
    const all = await db
      .select({ id: notificationDeliveries.id })
      .from(notificationDeliveries)
      .orderBy(asc(notificationDeliveries.id));
    // The first 225 finish; the last 5 stay queued.
    for (const { id } of all.slice(0, 225)) {
      await recordAttempt(db, id, { status: "delivered", attempts: 1, lastStatus: 204, lastError: null });
    }
    await pruneFinished(db, "webhook", "chat");
    const left = await db.select().from(notificationDeliveries).orderBy(asc(notificationDeliveries.id));
    expect(left.filter((r) => r.status === "queued")).toHaveLength(5);
    const finished = left.filter((r) => r.status !== "queued");
    expect(finished).toHaveLength(200);
    expect(finished[0]?.id).toBe(all[25]?.id);
    const log = await recentDeliveries(db, { channel: "webhook", target: "chat" });
    expect(log).toHaveLength(50);
    expect(log[0]).toMatchObject({ id: all[229]?.id, status: "queued", finishedAt: null });
    expect(log[0]?.nextAttemptAt).not.toBeNull();
    expect(log[10]).toMatchObject({ status: "delivered", nextAttemptAt: null, lastStatus: 204 });
  });

  it("a due row is taken for a try by one claimant only, however many race for it", async () => {
    const db = await store();
    const solo: NotificationsConfig = {
      ...config,
      webhooks: [hook("chat", "https://h.example.test/x")],
      email: null,
    };
    await enqueueCallEvent(db, solo, "call.pending", pendingCall);
    const [due] = await dueDeliveries(db, new Date().toISOString(), 10);
    if (!due) throw new Error("no due row");
    // Ten dispatchers read the same row and each tries to take it, with its own lease.
    const leases = Array.from({ length: 10 }, (_, i) => new Date(Date.now() + 60_000 + i).toISOString());
    const taken = await Promise.all(leases.map((until) => claimDelivery(db, due, until)));
    expect(taken.filter(Boolean)).toHaveLength(1);
    const lease = leases[taken.indexOf(true)] ?? "";
    // Taken, it is no longer due, and no one else records on it.
    expect(await dueDeliveries(db, new Date().toISOString(), 10)).toEqual([]);
    const record = { status: "delivered" as const, attempts: 1, lastStatus: 204, lastError: null };
    const other = leases.find((l) => l !== lease) ?? "";
    expect(await recordAttempt(db, due.id, record, other)).toBe(false);
    // Given back untried (a stop), it is due again at its old time; taken again, it is recorded.
    await releaseDelivery(db, due.id, lease);
    expect((await dueDeliveries(db, new Date().toISOString(), 10)).map((r) => r.id)).toEqual([due.id]);
    expect(await claimDelivery(db, due, lease)).toBe(true);
    expect(await claimDelivery(db, due, other)).toBe(false);
    expect(await recordAttempt(db, due.id, record, lease)).toBe(true);
    const row = await first(
      db.select().from(notificationDeliveries).where(eq(notificationDeliveries.id, due.id)),
    );
    expect(row).toMatchObject({ status: "delivered", attempts: 1 });
    // A finished row is never taken again.
    expect(await claimDelivery(db, { id: due.id, nextAttemptAt: lease }, other)).toBe(false);
  });

  it("a claim a process left when it died holds its row until the next start ends it: due again at once", async () => {
    const db = await store();
    const solo: NotificationsConfig = {
      ...config,
      webhooks: [hook("chat", "https://h.example.test/x")],
      email: null,
    };
    await enqueueCallEvent(db, solo, "call.pending", pendingCall);
    const [due] = await dueDeliveries(db, new Date().toISOString(), 10);
    if (!due) throw new Error("no due row");
    expect(await claimDelivery(db, due, new Date(Date.now() + 3_600_000).toISOString())).toBe(true);
    // The process dies mid-try: the row stays queued, and claimed.
    expect(await dueDeliveries(db, new Date().toISOString(), 10)).toEqual([]);
    await releaseClaims(db);
    expect((await dueDeliveries(db, new Date().toISOString(), 10)).map((r) => r.id)).toEqual([due.id]);
  });

  it("the claims of a replica found dead are given back at once; a live replica's and unnamed claims are kept", async () => {
    const db = await store();
    const three: NotificationsConfig = {
      ...config,
      webhooks: ["a", "b", "c"].map((n) => hook(n, `https://${n}.example.test/x`)),
      email: null,
    };
    await enqueueCallEvent(db, three, "call.pending", pendingCall);
    const due = await dueDeliveries(db, new Date().toISOString(), 10);
    expect(due).toHaveLength(3);
    await db.insert(replicas).values({ id: "live", address: null, label: "live" });
    const lease = new Date(Date.now() + 3_600_000).toISOString();
    const [byDead, byLive, byNobody] = due;
    if (!byDead || !byLive || !byNobody) throw new Error("three rows expected");
    expect(await claimDelivery(db, byDead, lease, "dead")).toBe(true);
    expect(await claimDelivery(db, byLive, lease, "live")).toBe(true);
    expect(await claimDelivery(db, byNobody, lease)).toBe(true);
    expect(await releaseClaimsOf(db, ["dead"])).toBe(1);
    expect((await dueDeliveries(db, new Date().toISOString(), 10)).map((r) => r.id)).toEqual([byDead.id]);
    // A replica with no row (it stopped, or was reaped before its claims were given back) is gone too.
    await db.delete(replicas);
    expect(await releaseClaimsOf(db, [])).toBe(1);
    expect((await dueDeliveries(db, new Date().toISOString(), 10)).map((r) => r.id).sort()).toEqual(
      [byDead.id, byLive.id].sort(),
    );
  });

  it("every requester's oldest due row is in the batch read, however long another requester's backlog", async () => {
    const db = await store();
    const chatOnly: NotificationsConfig = { ...config, webhooks: config.webhooks.slice(0, 1), email: null };
    for (let i = 0; i < 30; i++) {
      await enqueueCallEvent(db, chatOnly, "call.pending", { ...pendingCall, id: `flood-${i}` });
    }
    await enqueueCallEvent(db, chatOnly, "call.pending", {
      ...pendingCall,
      id: "docs-1",
      requesterName: "docs-bot",
    });
    const batch = await dueDeliveries(db, new Date().toISOString(), 4);
    expect(batch.map((r) => r.callId)).toEqual(["flood-0", "docs-1", "flood-1", "flood-2"]);
    expect(batch[1]?.requester).toBe("agent:docs-bot");
  });

  it("of several calls wanting a digest to one reviewer at once, one queues it; the next waits for it to finish", async () => {
    const db = await store();
    const now = new Date().toISOString();
    const taken = await Promise.all(
      Array.from({ length: 8 }, () =>
        transaction(db, (tx) => takeDigest(tx, "rita", "agent:flood-bot", now)),
      ),
    );
    expect(taken.filter((t) => t !== null)).toEqual([now]);
    // Another requester, or another reviewer, is a digest of its own.
    expect(await takeDigest(db, "rita", "agent:docs-bot", now)).toBe(now);
    expect(await takeDigest(db, "both", "agent:flood-bot", now)).toBe(now);
  });

  it("a removed reviewer's digest state is forgotten, and only theirs: a later user of the name is mailed afresh", async () => {
    const db = await store();
    const now = new Date().toISOString();
    for (const reviewer of ["rit", "rita", "ritab"]) await takeDigest(db, reviewer, "agent:flood-bot", now);
    await removeUser(db, { name: "rita", actor: "otto", withdrawPending: async () => 0 });
    expect(await takeDigest(db, "rita", "agent:flood-bot", now)).toBe(now);
    expect(await takeDigest(db, "rit", "agent:flood-bot", now)).toBeNull();
    expect(await takeDigest(db, "ritab", "agent:flood-bot", now)).toBeNull();
  });
});
