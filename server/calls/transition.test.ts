/**
 * The call state machine's one step: a status change and its audit row are stored together or
 * not at all. "Killing the write between them" is done with a real SQLite trigger that makes the
 * audit insert fail after the status update has run in the same transaction.
 */
import path from "node:path";
import { asc, eq } from "drizzle-orm";
import { afterEach, describe, expect, it } from "vitest";
import type { LiveEvent } from "@/lib/api-types";
import {
  ADD_NOTE,
  createAgentToken,
  createTestUser,
  enableTool,
  LIST_NOTES,
  REPO_ROOT,
  request,
  startTestRuntime,
  type TestRuntime,
  waitForCallStatus,
  waitForEvent,
} from "@/test/support/runtime";
import { getToolRow, updateTool } from "../catalogue/catalogue";
import { EventBus } from "../events";
import { type Db, openDb } from "../store/db";
import { auditEvents, calls } from "../store/schema";
import { runtimes } from "./call-fixtures";
import { type CallRow, newCall } from "./call-row";
import { insertCall } from "./queries";
import { CALL_TRANSITIONS, type MovableStatus, transition } from "./transition";

function store(): { db: Db; bus: EventBus; events: LiveEvent[] } {
  const db = openDb(":memory:");
  const bus = new EventBus();
  const events: LiveEvent[] = [];
  bus.subscribe((e) => events.push(e));
  return { db, bus, events };
}

function seed(db: Db, status: CallRow["status"], expiresAt: string | null = null): string {
  const row = newCall(
    { kind: "agent", name: "agent-a" },
    { tool: "demo_add_note", server: "demo", remoteName: "add_note", args: { text: "x" }, destructive: true },
  );
  insertCall(db, { ...row, status, expiresAt });
  return row.id;
}

/** From now on every audit insert fails inside the transaction that tries it. */
function killAuditWrites(db: Db): void {
  db.$client.exec(
    "CREATE TRIGGER kill_audit BEFORE INSERT ON audit_events BEGIN SELECT RAISE(ABORT, 'audit write killed'); END",
  );
}

function statusOf(db: Db, id: string): string | undefined {
  return db.select({ status: calls.status }).from(calls).where(eq(calls.id, id)).get()?.status;
}

function auditOf(db: Db, id: string) {
  return db.select().from(auditEvents).where(eq(auditEvents.callId, id)).orderBy(asc(auditEvents.id)).all();
}

const edges = Object.entries(CALL_TRANSITIONS).flatMap(([from, tos]) =>
  Object.entries(tos).map(([to, action]) => ({ from: from as MovableStatus, to, action })),
);

describe("a call's transition", () => {
  it.each(edges)(
    "$from → $to stores the status and its audit row ($action) together, and publishes once",
    ({ from, to, action }) => {
      const { db, bus, events } = store();
      const id = seed(db, from);
      const moved = transition(db, bus, {
        from,
        to: to as never,
        id,
        set: { finishedAt: new Date().toISOString() },
        actor: "alice",
        audit: () => ({ detail: "why", durationMs: 3 }),
      });
      expect(moved.map((m) => m.id)).toEqual([id]);
      expect(statusOf(db, id)).toBe(to);
      const audit = auditOf(db, id);
      expect(audit.map((a) => [a.actor, a.action, a.subject, a.detail, a.durationMs])).toEqual([
        ["alice", action, "demo_add_note", "why", 3],
      ]);
      expect(events).toEqual([{ type: "call", id, status: to }]);
    },
  );

  it.each(edges)(
    "$from → $to with the audit write killed leaves neither the status change nor an audit row",
    ({ from, to }) => {
      const { db, bus, events } = store();
      const id = seed(db, from);
      killAuditWrites(db);
      expect(() =>
        transition(db, bus, { from, to: to as never, id, set: {}, actor: "alice", audit: () => ({}) }),
      ).toThrow(/audit write killed/);
      expect(statusOf(db, id)).toBe(from);
      expect(auditOf(db, id)).toEqual([]);
      expect(events).toEqual([]);
    },
  );

  it("a call no longer in the from-status is not moved, not audited and not published (the loser of a race)", () => {
    const { db, bus, events } = store();
    const id = seed(db, "pending");
    const decide = (to: "running" | "denied") =>
      transition(db, bus, { from: "pending", to, id, set: {}, actor: to, audit: () => ({}) });
    expect(decide("running")).toHaveLength(1);
    expect(decide("denied")).toEqual([]);
    expect(statusOf(db, id)).toBe("running");
    expect(auditOf(db, id).map((a) => a.action)).toEqual(["call.approved"]);
    expect(events.map((e) => e.type === "call" && e.status)).toEqual(["running"]);
  });

  it("an edge that is not in the state machine is refused before anything is written", () => {
    const { db, bus } = store();
    const id = seed(db, "pending");
    expect(() =>
      transition(db, bus, {
        from: "pending",
        to: "succeeded" as never,
        id,
        set: {},
        actor: "x",
        audit: () => ({}),
      }),
    ).toThrow(/no transition from pending to succeeded/);
    expect(statusOf(db, id)).toBe("pending");
  });

  it("without an id, every due call in the from-status moves, each with its own audit row", () => {
    const { db, bus } = store();
    const past = new Date(Date.now() - 1000).toISOString();
    const future = new Date(Date.now() + 60_000).toISOString();
    const due = [seed(db, "pending", past), seed(db, "pending", past)];
    const later = seed(db, "pending", future);
    const done = seed(db, "denied", past);
    const moved = transition(db, bus, {
      from: "pending",
      to: "expired",
      dueBy: new Date().toISOString(),
      set: {},
      actor: "gatehouse",
      audit: () => ({}),
    });
    expect(moved.map((m) => m.id).sort()).toEqual([...due].sort());
    for (const id of due) expect(auditOf(db, id).map((a) => a.action)).toEqual(["call.expired"]);
    expect(statusOf(db, later)).toBe("pending");
    expect(statusOf(db, done)).toBe("denied");
  });
});

describe("the broker's decisions are atomic with their audit rows", () => {
  let t: TestRuntime | undefined;
  afterEach(async () => {
    await t?.stop();
    t = undefined;
  });

  it("an approval whose audit write is killed fails, leaves the call pending and unaudited, and runs nothing", async () => {
    t = await startTestRuntime();
    const { runtime } = t;
    enableTool(runtime, ADD_NOTE);
    const bearer = createAgentToken(runtime, "agent-a");
    const alice = await createTestUser(runtime, "alice", ["reviewer"]);
    const res = await request("POST", "/api/calls", {
      bearer,
      body: { tool: ADD_NOTE, arguments: { text: "x" } },
    });
    const { id } = (await res.json()) as { id: string };

    killAuditWrites(runtime.db);
    const approve = await request("POST", `/api/calls/${id}/approve`, { cookie: alice.cookie });
    expect(approve.status).toBe(500);
    const deny = await request("POST", `/api/calls/${id}/deny`, {
      cookie: alice.cookie,
      body: { reason: "no" },
    });
    expect(deny.status).toBe(500);
    expect(statusOf(runtime.db, id)).toBe("pending");
    expect(auditOf(runtime.db, id).map((a) => a.action)).toEqual(["call.pending"]);
    expect(t.demoRuns()).toBe(0);

    runtime.db.$client.exec("DROP TRIGGER kill_audit");
    const again = await request("POST", `/api/calls/${id}/approve`, { cookie: alice.cookie });
    expect(again.status).toBe(200);
    expect(
      auditOf(runtime.db, id)
        .map((a) => a.action)
        .slice(0, 2),
    ).toEqual(["call.pending", "call.approved"]);
    await waitForCallStatus(runtime, id, "succeeded");
    expect(t.demoRuns()).toBe(1);
  });

  it("an outcome whose audit write is killed is not stored either: the call stays running, as a crash would leave it", async () => {
    t = await startTestRuntime();
    const { runtime } = t;
    enableTool(runtime, LIST_NOTES);
    const bearer = createAgentToken(runtime, "agent-a");
    runtime.db.$client.exec(
      "CREATE TRIGGER kill_outcome BEFORE INSERT ON audit_events WHEN NEW.action = 'call.succeeded' BEGIN SELECT RAISE(ABORT, 'audit write killed'); END",
    );
    const res = await request("POST", "/api/calls", { bearer, body: { tool: LIST_NOTES, arguments: {} } });
    expect(res.status).toBe(500);
    const row = runtime.db.select().from(calls).where(eq(calls.tool, LIST_NOTES)).get();
    expect(row?.status).toBe("running");
    expect(row?.result).toBeNull();
    expect(auditOf(runtime.db, row?.id ?? "").map((a) => a.action)).toEqual(["call.started"]);
  });
});

describe("an outcome for a call that is no longer running", () => {
  const { start } = runtimes();

  it("is not written: no outcome columns, no audit row and no event, and the caller sees the call as stored", async () => {
    const rt = await start({
      servers: {
        silent: {
          command: process.execPath,
          args: [path.join(REPO_ROOT, "test", "fixtures", "servers", "silent.mjs")],
          timeoutMs: 300,
          enabled: true,
        },
      },
    });
    const { db, bus } = rt.runtime;
    await waitForEvent(bus, () => getToolRow(db, "silent_hang") !== null, {
      already: () => getToolRow(db, "silent_hang") !== null,
      what: () => "the silent server's tool",
    });
    // Never answers: vouched read-only, its call runs at once and fails at its deadline.
    updateTool(db, { localName: "silent_hang", actor: "owner", status: "enabled", vouch: true });
    const events: LiveEvent[] = [];
    bus.subscribe((e) => events.push(e));
    const answer = rt.runtime.broker.request(
      { kind: "agent", name: "agent-a" },
      { tool: "silent_hang", arguments: {} },
    );
    // The start is committed at a turn of the event loop once the call is decided (group commit),
    // the tool asked right after; no event tells of a start, so the turns are counted.
    for (let turn = 0; turn < 1000 && !db.select().from(calls).get(); turn++) {
      await new Promise((resolve) => setImmediate(resolve));
    }
    expect(db.select().from(calls).get()?.status).toBe("running");
    const id = (db.select().from(calls).get() as { id: string }).id;
    // What another Gatehouse starting on the same store does to the calls it finds running.
    db.$client.prepare("UPDATE calls SET status = 'interrupted' WHERE id = ?").run(id);

    const { call } = await answer;
    expect(call.status).toBe("interrupted");
    const row = db.select().from(calls).where(eq(calls.id, id)).get();
    expect(row?.status).toBe("interrupted");
    expect(row?.errorCode).toBeNull();
    expect(auditOf(db, id).map((a) => a.action)).toEqual(["call.started"]);
    expect(events.filter((e) => e.type === "call" && e.id === id && e.status !== "running")).toEqual([]);
  });
});
