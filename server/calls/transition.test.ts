/**
 * The call state machine's one step: a status change and its audit row are stored together or
 * not at all. "Killing the write between them" is done with a real trigger (SQLite's or
 * PostgreSQL's) that makes the audit insert fail after the status update has run in the same
 * transaction.
 */
import path from "node:path";
import { asc, eq, sql } from "drizzle-orm";
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
import { openTestDb } from "@/test/support/store";
import { getToolRow, updateTool } from "../catalogue/catalogue";
import { EventBus } from "../events";
import { type Db, first, rows, sqliteOf } from "../store/db";
import { auditEvents, calls } from "../store/schema";
import { runtimes } from "./call-fixtures";
import { type CallRow, newCall } from "./call-row";
import { insertCall } from "./queries";
import { CALL_TRANSITIONS, type MovableStatus, transition } from "./transition";

async function store(): Promise<{ db: Db; bus: EventBus; events: LiveEvent[] }> {
  const db = await openTestDb();
  const bus = new EventBus();
  const events: LiveEvent[] = [];
  bus.subscribe((e) => events.push(e));
  return { db, bus, events };
}

async function seed(db: Db, status: CallRow["status"], expiresAt: string | null = null): Promise<string> {
  const row = newCall(
    { kind: "agent", name: "agent-a" },
    { tool: "demo_add_note", server: "demo", remoteName: "add_note", args: { text: "x" }, destructive: true },
  );
  await insertCall(db, { ...row, status, expiresAt });
  return row.id;
}

/** Runs DDL on the store: `sqliteText` on SQLite, each of `pgTexts` on PostgreSQL. */
async function exec(db: Db, sqliteText: string, ...pgTexts: string[]): Promise<void> {
  const sqlite = sqliteOf(db);
  if (sqlite) sqlite.exec(sqliteText);
  else for (const text of pgTexts) await rows(db, sql.raw(text));
}

/** Triggers made by {@link killAudit}: a reused PostgreSQL test database must not keep them. */
const killed: Array<{ db: Db; name: string }> = [];
afterEach(async () => {
  for (const { db, name } of killed.splice(0)) {
    // The store may be closed already (a runtime's): then it is no test database to reuse.
    await exec(db, `DROP TRIGGER IF EXISTS ${name}`, `DROP TRIGGER IF EXISTS ${name} ON audit_events`).catch(
      () => undefined,
    );
  }
});

/** A trigger `name` that fails audit inserts (those matching `when`, a condition on NEW, if given). */
async function killAudit(db: Db, name: string, when?: string): Promise<void> {
  killed.push({ db, name });
  await exec(
    db,
    `CREATE TRIGGER ${name} BEFORE INSERT ON audit_events ${when ? `WHEN ${when} ` : ""}BEGIN SELECT RAISE(ABORT, 'audit write killed'); END`,
    `CREATE OR REPLACE FUNCTION ${name}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'audit write killed'; END $$`,
    `CREATE TRIGGER ${name} BEFORE INSERT ON audit_events FOR EACH ROW ${when ? `WHEN (${when}) ` : ""}EXECUTE FUNCTION ${name}()`,
  );
}

/** From now on every audit insert fails inside the transaction that tries it. */
function killAuditWrites(db: Db): Promise<void> {
  return killAudit(db, "kill_audit");
}

async function statusOf(db: Db, id: string): Promise<string | undefined> {
  return (await first(db.select({ status: calls.status }).from(calls).where(eq(calls.id, id))))?.status;
}

async function auditOf(db: Db, id: string) {
  return await db.select().from(auditEvents).where(eq(auditEvents.callId, id)).orderBy(asc(auditEvents.id));
}

const edges = Object.entries(CALL_TRANSITIONS).flatMap(([from, tos]) =>
  Object.entries(tos).map(([to, action]) => ({ from: from as MovableStatus, to, action })),
);

describe("a call's transition", () => {
  it.each(edges)(
    "$from → $to stores the status and its audit row ($action) together, and publishes once",
    async ({ from, to, action }) => {
      const { db, bus, events } = await store();
      const id = await seed(db, from);
      const moved = await transition(db, bus, {
        from,
        to: to as never,
        id,
        set: { finishedAt: new Date().toISOString() },
        actor: "alice",
        audit: () => ({ detail: "why", durationMs: 3 }),
      });
      expect(moved.map((m) => m.id)).toEqual([id]);
      expect(await statusOf(db, id)).toBe(to);
      const audit = await auditOf(db, id);
      expect(audit.map((a) => [a.actor, a.action, a.subject, a.detail, a.durationMs])).toEqual([
        ["alice", action, "demo_add_note", "why", 3],
      ]);
      expect(events).toEqual([{ type: "call", id, status: to }]);
    },
  );

  it.each(edges)(
    "$from → $to with the audit write killed leaves neither the status change nor an audit row",
    async ({ from, to }) => {
      const { db, bus, events } = await store();
      const id = await seed(db, from);
      await killAuditWrites(db);
      await expect(
        transition(db, bus, { from, to: to as never, id, set: {}, actor: "alice", audit: () => ({}) }),
      ).rejects.toThrow(/audit write killed/);
      expect(await statusOf(db, id)).toBe(from);
      expect(await auditOf(db, id)).toEqual([]);
      expect(events).toEqual([]);
    },
  );

  it("a call no longer in the from-status is not moved, not audited and not published (the loser of a race)", async () => {
    const { db, bus, events } = await store();
    const id = await seed(db, "pending");
    const decide = (to: "running" | "denied") =>
      transition(db, bus, { from: "pending", to, id, set: {}, actor: to, audit: () => ({}) });
    expect(await decide("running")).toHaveLength(1);
    expect(await decide("denied")).toEqual([]);
    expect(await statusOf(db, id)).toBe("running");
    expect((await auditOf(db, id)).map((a) => a.action)).toEqual(["call.approved"]);
    expect(events.map((e) => e.type === "call" && e.status)).toEqual(["running"]);
  });

  it("an edge that is not in the state machine is refused before anything is written", async () => {
    const { db, bus } = await store();
    const id = await seed(db, "pending");
    await expect(
      transition(db, bus, {
        from: "pending",
        to: "succeeded" as never,
        id,
        set: {},
        actor: "x",
        audit: () => ({}),
      }),
    ).rejects.toThrow(/no transition from pending to succeeded/);
    expect(await statusOf(db, id)).toBe("pending");
  });

  it("without an id, every due call in the from-status moves, each with its own audit row", async () => {
    const { db, bus } = await store();
    const past = new Date(Date.now() - 1000).toISOString();
    const future = new Date(Date.now() + 60_000).toISOString();
    const due = [await seed(db, "pending", past), await seed(db, "pending", past)];
    const later = await seed(db, "pending", future);
    const done = await seed(db, "denied", past);
    const moved = await transition(db, bus, {
      from: "pending",
      to: "expired",
      dueBy: new Date().toISOString(),
      set: {},
      actor: "gatehouse",
      audit: () => ({}),
    });
    expect(moved.map((m) => m.id).sort()).toEqual([...due].sort());
    for (const id of due) expect((await auditOf(db, id)).map((a) => a.action)).toEqual(["call.expired"]);
    expect(await statusOf(db, later)).toBe("pending");
    expect(await statusOf(db, done)).toBe("denied");
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
    await enableTool(runtime, ADD_NOTE);
    const bearer = await createAgentToken(runtime, "agent-a");
    const alice = await createTestUser(runtime, "alice", ["reviewer"]);
    const res = await request("POST", "/api/calls", {
      bearer,
      body: { tool: ADD_NOTE, arguments: { text: "x" } },
    });
    const { id } = (await res.json()) as { id: string };

    await killAuditWrites(runtime.db);
    const approve = await request("POST", `/api/calls/${id}/approve`, { cookie: alice.cookie });
    expect(approve.status).toBe(500);
    const deny = await request("POST", `/api/calls/${id}/deny`, {
      cookie: alice.cookie,
      body: { reason: "no" },
    });
    expect(deny.status).toBe(500);
    expect(await statusOf(runtime.db, id)).toBe("pending");
    expect((await auditOf(runtime.db, id)).map((a) => a.action)).toEqual(["call.pending"]);
    expect(t.demoRuns()).toBe(0);

    await exec(runtime.db, "DROP TRIGGER kill_audit", "DROP TRIGGER kill_audit ON audit_events");
    killed.pop();
    const again = await request("POST", `/api/calls/${id}/approve`, { cookie: alice.cookie });
    expect(again.status).toBe(200);
    expect((await auditOf(runtime.db, id)).map((a) => a.action).slice(0, 2)).toEqual([
      "call.pending",
      "call.approved",
    ]);
    await waitForCallStatus(runtime, id, "succeeded");
    expect(t.demoRuns()).toBe(1);
  });

  it("an outcome whose audit write is killed is not stored either: the call stays running, as a crash would leave it", async () => {
    t = await startTestRuntime();
    const { runtime } = t;
    await enableTool(runtime, LIST_NOTES);
    const bearer = await createAgentToken(runtime, "agent-a");
    await killAudit(runtime.db, "kill_outcome", "NEW.action = 'call.succeeded'");
    const res = await request("POST", "/api/calls", { bearer, body: { tool: LIST_NOTES, arguments: {} } });
    expect(res.status).toBe(500);
    const row = await first(runtime.db.select().from(calls).where(eq(calls.tool, LIST_NOTES)));
    expect(row?.status).toBe("running");
    expect(row?.result).toBeNull();
    expect((await auditOf(runtime.db, row?.id ?? "")).map((a) => a.action)).toEqual(["call.started"]);
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
    const listed = async () => (await getToolRow(db, "silent_hang")) !== null;
    await waitForEvent(bus, listed, {
      already: listed,
      what: () => "the silent server's tool",
    });
    // Never answers: vouched read-only, its call runs at once and fails at its deadline.
    await updateTool(db, { localName: "silent_hang", actor: "owner", status: "enabled", vouch: true });
    const events: LiveEvent[] = [];
    bus.subscribe((e) => events.push(e));
    const answer = rt.runtime.broker.request(
      { kind: "agent", name: "agent-a" },
      { tool: "silent_hang", arguments: {} },
    );
    // The start is committed at a turn of the event loop once the call is decided (group commit),
    // the tool asked right after; no event tells of a start, so the turns are counted.
    for (let turn = 0; turn < 1000 && !(await first(db.select().from(calls))); turn++) {
      await new Promise((resolve) => setImmediate(resolve));
    }
    const started = (await first(db.select().from(calls))) as { id: string; status: string };
    expect(started.status).toBe("running");
    const id = started.id;
    // What another Gatehouse starting on the same store does to the calls it finds running.
    await db.update(calls).set({ status: "interrupted" }).where(eq(calls.id, id));

    const { call } = await answer;
    expect(call.status).toBe("interrupted");
    const row = await first(db.select().from(calls).where(eq(calls.id, id)));
    expect(row?.status).toBe("interrupted");
    expect(row?.errorCode).toBeNull();
    expect((await auditOf(db, id)).map((a) => a.action)).toEqual(["call.started"]);
    expect(events.filter((e) => e.type === "call" && e.id === id && e.status !== "running")).toEqual([]);
  });
});
