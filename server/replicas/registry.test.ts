import { eq } from "drizzle-orm";
import { afterEach, describe, expect, it } from "vitest";
import { newCall } from "@/server/calls/call-row";
import { getCall, insertCall } from "@/server/calls/queries";
import { EventBus } from "@/server/events";
import { type Logger, logger } from "@/server/log";
import { closeDb, type Db } from "@/server/store/db";
import { dbTimeAgo, replicas } from "@/server/store/schema";
import { openTestDb } from "@/test/support/store";
import { interruptLeftRunning } from "../calls/run";
import { newReplicaId, ReplicaRegistry } from "./registry";

/**
 * The replica registry on the store in use (both dialects): rows, heartbeats, and a survivor
 * ending the running calls of a replica whose lease ran out.
 */

const LEASE_MS = 600;
const cleanup: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const fn of cleanup.splice(0).reverse()) await fn();
});

async function store(): Promise<{ db: Db; bus: EventBus }> {
  const db = await openTestDb();
  cleanup.push(() => closeDb(db));
  return { db, bus: new EventBus() };
}

/** A replica row as a process writes it, its heartbeat `ageMs` old by the database's clock. */
async function replicaRow(db: Db, id: string, ageMs: number): Promise<void> {
  await db.insert(replicas).values({ id, address: null, label: `test ${id}`, heartbeatAt: dbTimeAgo(ageMs) });
}

/** A call committed `running` by replica `replica`. */
async function runningCall(db: Db, replica: string | null): Promise<string> {
  const call = newCall(
    { kind: "agent", name: "bot" },
    { tool: "demo_add_note", server: "demo", remoteName: "add_note", args: { text: "x" }, destructive: true },
  );
  await insertCall(db, { ...call, status: "running", startedAt: call.createdAt, replica });
  return call.id;
}

async function join(
  db: Db,
  bus: EventBus,
  opts: { alone?: boolean; log?: Logger } = {},
): Promise<ReplicaRegistry> {
  const registry = await ReplicaRegistry.join(db, {
    id: newReplicaId(),
    address: null,
    leaseMs: LEASE_MS,
    alone: opts.alone ?? false,
    log: opts.log ?? logger("replicas"),
    onDead: async (ids) => {
      await interruptLeftRunning({ db, bus }, ids);
    },
  });
  cleanup.push(() => registry.stop());
  return registry;
}

describe("the replica registry", () => {
  it("a joining replica writes its row and finds itself live; stopping deletes the row", async () => {
    const { db, bus } = await store();
    const registry = await join(db, bus);
    expect((await registry.live()).map((r) => r.id)).toContain(registry.id);
    await registry.stop();
    expect(await db.select().from(replicas).where(eq(replicas.id, registry.id))).toEqual([]);
  });

  it("a call running on a live replica is left running by another replica joining", async () => {
    const { db, bus } = await store();
    await replicaRow(db, "alive", 0);
    const id = await runningCall(db, "alive");
    await join(db, bus);
    expect((await getCall(db, id)).status).toBe("running");
  });

  it("a call running on a replica whose lease ran out is interrupted by the survivor, which deletes the row", async () => {
    const { db, bus } = await store();
    await replicaRow(db, "dead", LEASE_MS * 3);
    const id = await runningCall(db, "dead");
    await join(db, bus);
    const call = await getCall(db, id);
    expect(call.status).toBe("interrupted");
    expect(call.errorCode).toBe("interrupted");
    expect(await db.select().from(replicas).where(eq(replicas.id, "dead"))).toEqual([]);
  });

  it("a replica that stops heartbeating later is found dead at a survivor's heartbeat, and its call interrupted", async () => {
    const { db, bus } = await store();
    await replicaRow(db, "fading", 0);
    const id = await runningCall(db, "fading");
    const survivor = await join(db, bus);
    expect((await getCall(db, id)).status).toBe("running");
    // The fading replica writes no more heartbeats: the survivor's ticks find it once the lease passes.
    const interrupted = new Promise<void>((resolve) => {
      const stop = bus.subscribe((e) => {
        if (e.type === "call" && e.id === id && e.status === "interrupted") {
          stop();
          resolve();
        }
      });
    });
    await interrupted;
    expect((await getCall(db, id)).status).toBe("interrupted");
    expect((await survivor.live()).map((r) => r.id)).toEqual([survivor.id]);
  });

  it("a call of a process without a replica row, or with none recorded, is interrupted when a replica joins", async () => {
    const { db, bus } = await store();
    const gone = await runningCall(db, "never-registered");
    const old = await runningCall(db, null);
    await join(db, bus);
    expect((await getCall(db, gone)).status).toBe("interrupted");
    expect((await getCall(db, old)).status).toBe("interrupted");
  });

  it("alone (SQLite's one process), every other row is dead at once, whatever its heartbeat", async () => {
    const { db, bus } = await store();
    await replicaRow(db, "before-restart", 0);
    const id = await runningCall(db, "before-restart");
    await join(db, bus, { alone: true });
    expect((await getCall(db, id)).status).toBe("interrupted");
  });

  it("a replica deleted by the others while it was away writes its row again at its next heartbeat, and says it was taken for dead", async () => {
    const { db, bus } = await store();
    const warned: string[] = [];
    const registry = await join(db, bus, { log: { ...logger("replicas"), warn: (m) => warned.push(m) } });
    expect(warned).toEqual([]);
    await db.delete(replicas).where(eq(replicas.id, registry.id));
    await expect
      .poll(async () => (await registry.live()).map((r) => r.id), { timeout: LEASE_MS * 5 })
      .toContain(registry.id);
    expect(warned).toEqual([expect.stringContaining("taken for dead")]);
  });
});
