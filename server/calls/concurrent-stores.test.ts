/**
 * Exactly once across replicas: two store handles on one database, as two Gatehouse processes
 * would have (on PostgreSQL two connection pools; on SQLite two connections to one file), and
 * concurrent deciders spread over both. The lowest layers that decide: `approve` (the
 * conditional `pending → running` update) and a call's birth in the broker's group commit (the
 * grant's use taken by one conditional UPDATE), no tool server.
 *
 * On SQLite both connections live in this one process, and better-sqlite3 waits for a lock
 * synchronously: a connection waiting for the other's write lock would stall the very process
 * that must release it. So here a busy connection fails at once (`busy_timeout = 0`) and the
 * test tries that decider again shortly, as SQLite's own wait does between processes.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { and, eq, isNotNull } from "drizzle-orm";
import { afterEach, describe, expect, it } from "vitest";
import { freshDatabaseUrl, testDialect } from "@/test/support/store";
import { getToolRow } from "../catalogue/catalogue";
import { EventBus } from "../events";
import { AGENT, ARGS, addToken, addTool, addUser, grant, TOOL } from "../grants/grant-fixtures";
import { closeDb, type Db, first, openDb, openStore, sqliteOf } from "../store/db";
import { auditEvents, calls, grants } from "../store/schema";
import { WriteBatch } from "../store/write-batch";
import { approve } from "./approve";
import { argumentsDigest } from "./arguments";
import { writeBirth } from "./birth";
import { type CallRow, newCall } from "./call-row";
import type { RunDecision } from "./decision";
import { getCall, insertCall } from "./queries";

const DECIDERS = 20;

const opened: Db[] = [];
const folders: string[] = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((db) => closeDb(db)));
  for (const dir of folders.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** Two handles on one fresh, migrated database. */
async function twoHandles(): Promise<[Db, Db]> {
  if (testDialect === "postgres") {
    const url = await freshDatabaseUrl();
    const a = await openStore({ dialect: "postgres", url });
    opened.push(a);
    const b = await openStore({ dialect: "postgres", url });
    opened.push(b);
    return [a, b];
  }
  const dir = mkdtempSync(path.join(tmpdir(), "gatehouse-replicas-"));
  folders.push(dir);
  const file = path.join(dir, "gatehouse.db");
  const handles: [Db, Db] = [openDb(file), openDb(file)];
  for (const db of handles) {
    opened.push(db);
    sqliteOf(db)?.pragma("busy_timeout = 0");
  }
  return handles;
}

/** SQLite's "another connection holds the lock" (see the header). */
function busy(err: unknown): boolean {
  return (
    testDialect === "sqlite" &&
    /SQLITE_BUSY|database is locked/i.test(`${String(err)} ${String((err as { cause?: unknown }).cause)}`)
  );
}

/** Runs `fn` until it does not fail with SQLite's busy error (never more than once on PostgreSQL). */
async function untilNotBusy<T>(fn: () => Promise<T>): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await fn();
    } catch (err) {
      if (!busy(err) || attempt >= 200) throw err;
      await new Promise((resolve) => setTimeout(resolve, 1 + Math.random() * 5));
    }
  }
}

describe("two replicas on one store", () => {
  it(`of ${DECIDERS} concurrent approvals of one pending call over both, exactly one moves it to running`, async () => {
    const [a, b] = await twoHandles();
    await addTool(a, TOOL);
    const held: CallRow = {
      ...newCall(
        { kind: "user", name: "carol" },
        { tool: TOOL, server: "notes", remoteName: "add_note", args: ARGS, destructive: true },
      ),
      definitionHash: (await getToolRow(a, TOOL))?.definitionHash ?? null,
      status: "pending",
      approvalReason: "the tool may change things",
      expiresAt: new Date(Date.now() + 3_600_000).toISOString(),
    };
    await insertCall(a, held);
    const bus = new EventBus();
    const published: string[] = [];
    bus.subscribe((e) => {
      if (e.type === "call") published.push(e.status);
    });

    const outcomes = await Promise.all(
      Array.from({ length: DECIDERS }, async (_, i) => {
        const db = i % 2 === 0 ? a : b;
        try {
          return await untilNotBusy(async () => {
            // Each reviewer reads the call as their page showed it: pending, no approvals.
            const stored = await getCall(db, held.id);
            if (stored.status !== "pending") return "already_decided";
            const step = await approve(
              { db, bus, selfApproval: false, replica: `replica-${i % 2}` },
              `reviewer-${i}`,
              stored,
            );
            return step === null ? "already_decided" : step.kind;
          });
        } catch (err) {
          return `error: ${String(err)}`;
        }
      }),
    );

    expect(outcomes.filter((o) => o === "approved")).toHaveLength(1);
    expect(outcomes.filter((o) => o === "already_decided")).toHaveLength(DECIDERS - 1);
    for (const db of [a, b]) {
      const row = await getCall(db, held.id);
      expect(row.status).toBe("running");
      expect(JSON.parse(row.approvedBy)).toHaveLength(1);
    }
    const approvals = await a
      .select()
      .from(auditEvents)
      .where(and(eq(auditEvents.callId, held.id), eq(auditEvents.action, "call.approved")));
    expect(approvals).toHaveLength(1);
    expect(approvals[0]?.actor).toBe((await getCall(b, held.id)).decidedBy);
    // Published once, by the winner, after its write.
    expect(published).toEqual(["running"]);
  });

  it(`${DECIDERS} concurrent calls over both against a grant of 5 uses take exactly 5`, async () => {
    const [a, b] = await twoHandles();
    await addUser(a, "alice", ["reviewer"]);
    await addToken(a, AGENT);
    await addTool(a, TOOL);
    const made = await grant(a, { uses: 5, argumentsDigest: argumentsDigest(ARGS) }, new Date());
    const tool = await getToolRow(a, TOOL);
    if (!tool) throw new Error("no tool row");
    const decision: RunDecision = {
      outcome: "run",
      by: "grant",
      rule: null,
      grant: made,
      otherwise: {
        outcome: "wait",
        approvalsNeeded: 1,
        reason: "the tool may change things",
        rule: null,
        grantable: true,
        why: "no rule matched; the tool needs approval",
      },
      destructive: true,
      why: "covered by a grant",
    };
    // Each replica's broker stores its calls through its own group commit.
    const batches = [new WriteBatch(a), new WriteBatch(b)];
    const requester = { kind: "agent", name: AGENT } as const;

    const born = await Promise.all(
      Array.from({ length: DECIDERS }, (_, i) =>
        untilNotBusy(async () => {
          const call = {
            ...newCall(requester, {
              tool: TOOL,
              server: "notes",
              remoteName: "add_note",
              args: ARGS,
              destructive: true,
            }),
            definitionHash: tool.definitionHash,
          };
          let stored: CallRow | null = null;
          await batches[i % 2]?.write(async (tx) => {
            stored = await writeBirth(tx, {
              call,
              decision,
              requester,
              row: tool,
              args: ARGS,
              skipped: [],
              expireAfterSeconds: 3600,
              notify: undefined,
              replica: `replica-${i % 2}`,
            });
          });
          return (stored as CallRow | null)?.status;
        }),
      ),
    );

    expect(born.filter((s) => s === "running")).toHaveLength(5);
    expect(born.filter((s) => s === "pending")).toHaveLength(DECIDERS - 5);
    for (const db of [a, b]) {
      expect((await first(db.select().from(grants).where(eq(grants.id, made.id))))?.uses).toBe(5);
      const covered = await db
        .select({ id: calls.id })
        .from(calls)
        .where(and(isNotNull(calls.grantId), eq(calls.grantId, made.id)));
      expect(covered).toHaveLength(5);
    }
  });
});
