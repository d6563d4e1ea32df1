/**
 * The replicas' event buses joined through PostgreSQL `LISTEN/NOTIFY` (PRODUCT.md §14): a
 * decision on replica A wakes the agent waiting on replica B; the notifications carry ids, never
 * a call's arguments or result; what another replica notifies is rebuilt field by field before
 * it reaches this replica's bus; and a replica whose listening connection was cut reads again,
 * once it is back, what it missed meanwhile. Real runtimes on one database, the real demo
 * server, a plain PostgreSQL session as the onlooker (or as a forger) on the channel.
 *
 * Only on PostgreSQL: on SQLite one process serves a store, so there is no other replica and no
 * bridge (`runtime.bridge` is null).
 */
import { randomUUID } from "node:crypto";
import pg from "pg";
import { afterEach, describe, expect, it } from "vitest";
import type { CallView, LiveEvent } from "@/lib/api-types";
import { ADD_NOTE, enableTool, type TestRuntime } from "@/test/support/runtime";
import { asAdmin, testDialect } from "@/test/support/store";
import { runtimes } from "../calls/call-fixtures";
import type { Runtime } from "../runtime";
import { EVENTS_CHANNEL } from "./bus-bridge";

const { start } = runtimes();
const cleanup: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const fn of cleanup.splice(0).reverse()) await fn();
});

/**
 * How long a waiter may take to be woken by a decision made on another replica. A functional
 * bound ("woken at all", not "woken fast": that claim is the benchmarks'), generous for a loaded
 * machine; the waits themselves would last a minute.
 */
const WOKEN_WITHIN_MS = 10_000;
/** The longest pause between two tries of a listener to reconnect (pg-listen.ts), plus the above. */
const RESUMED_WITHIN_MS = 5_000 + WOKEN_WITHIN_MS;

const agent = { kind: "agent", name: "agent-a" } as const;

/** A `demo_add_note` call of `text` held for review on `rt`. */
async function heldOn(rt: TestRuntime, text: string): Promise<CallView> {
  const { httpStatus, call } = await rt.runtime.broker.request(agent, {
    tool: ADD_NOTE,
    arguments: { text },
  });
  expect(httpStatus).toBe(202);
  expect(call.status).toBe("pending");
  return call;
}

/**
 * The agent's wait on call `id` through `runtime`'s broker (the long-poll's path), given a minute;
 * resolves with the view it ends with, and fails unless a final status woke it within `withinMs`.
 */
async function waitOn(runtime: Runtime, id: string, withinMs = WOKEN_WITHIN_MS): Promise<CallView> {
  const deadline = AbortSignal.timeout(withinMs);
  const view = await runtime.broker.wait(id, 60, deadline);
  expect(deadline.aborted, `the wait on call ${id} was not woken within ${withinMs} ms`).toBe(false);
  return view;
}

/** Every event published on `runtime`'s bus from now on (in order). */
function record(runtime: Runtime): LiveEvent[] {
  const seen: LiveEvent[] = [];
  const unsubscribe = runtime.bus.subscribe((e) => seen.push(e));
  cleanup.push(async () => unsubscribe());
  return seen;
}

/** Replica A with the demo tool enabled, and replica B on A's database. */
async function twoReplicas(): Promise<{ a: TestRuntime; b: TestRuntime }> {
  const a = await start();
  await enableTool(a.runtime, ADD_NOTE);
  const b = await start({ databaseUrl: a.databaseUrl });
  expect(a.runtime.bridge?.listening).toBe(true);
  expect(b.runtime.bridge?.listening).toBe(true);
  return { a, b };
}

interface Channel {
  /** Every payload heard on the events channel, in order. */
  payloads: string[];
  /** Resolves with the first payload (heard already or later) that `match` accepts. */
  until(match: (payload: string) => boolean, what: string): Promise<string>;
  /** Notifies `payload` on the events channel, as another replica would. */
  notify(payload: string): Promise<void>;
}

/** A plain PostgreSQL session on `url` listening on the events channel; closed after the test. */
async function onChannel(url: string): Promise<Channel> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  cleanup.push(() => client.end());
  const payloads: string[] = [];
  const waiters = new Set<(payload: string) => void>();
  client.on("notification", (n) => {
    if (n.channel !== EVENTS_CHANNEL || n.payload === undefined) return;
    payloads.push(n.payload);
    for (const w of [...waiters]) w(n.payload);
  });
  await client.query(`LISTEN ${EVENTS_CHANNEL}`);
  return {
    payloads,
    until(match, what) {
      const heard = payloads.find(match);
      if (heard !== undefined) return Promise.resolve(heard);
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`timed out waiting for a notification of ${what}`));
        }, WOKEN_WITHIN_MS);
        const check = (payload: string) => {
          if (!match(payload)) return;
          clearTimeout(timer);
          waiters.delete(check);
          resolve(payload);
        };
        waiters.add(check);
      });
    },
    async notify(payload) {
      await client.query("SELECT pg_notify($1, $2)", [EVENTS_CHANNEL, payload]);
    },
  };
}

/** The envelope a payload carries, or null when it is none (a forged payload). */
function envelopeOf(payload: string): { from: unknown; events: unknown } | null {
  try {
    const parsed = JSON.parse(payload) as unknown;
    return parsed && typeof parsed === "object" ? (parsed as { from: unknown; events: unknown }) : null;
  } catch {
    return null;
  }
}

/** Whether `payload` tells that call `id` is now `status`. */
const tells = (id: string, status: string) => (payload: string) => {
  const events = envelopeOf(payload)?.events;
  return (
    Array.isArray(events) &&
    events.some((e: LiveEvent) => e?.type === "call" && e.id === id && e.status === status)
  );
};

/** The backends on database `url` of the replicas' listeners (named `gatehouse <replica> events`). */
async function listeners(url: string): Promise<number[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query<{ pid: number }>(
      "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND application_name LIKE 'gatehouse % events'",
    );
    return rows.map((r) => r.pid);
  } finally {
    await client.end();
  }
}

/** Resolves once `yes()` holds, checked every 20 ms; fails after `withinMs` naming `what`. */
async function until(yes: () => boolean, what: string, withinMs = WOKEN_WITHIN_MS): Promise<void> {
  const end = Date.now() + withinMs;
  while (!yes()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe.runIf(testDialect === "postgres")(
  "replicas' buses joined through PostgreSQL (SQLite is one process per store: nothing to join)",
  () => {
    it("a decision on replica A wakes the agent waiting on replica B: an approval with the result, a denial with the denial", async () => {
      const { a, b } = await twoReplicas();
      const heardOnB = record(b.runtime);

      const approved = await heldOn(b, "approved on A");
      const approvedWait = waitOn(b.runtime, approved.id);
      await a.runtime.broker.approve("alice", approved.id);
      const done = await approvedWait;
      expect(done.status).toBe("succeeded");
      expect(JSON.stringify(done.result)).toContain("approved on A");

      const denied = await heldOn(b, "denied on A");
      const deniedWait = waitOn(b.runtime, denied.id);
      await a.runtime.broker.deny("alice", denied.id, "not on a Friday");
      const refusal = await deniedWait;
      expect(refusal).toMatchObject({ status: "denied", decidedBy: "alice", reason: "not on a Friday" });

      // B neither ran nor decided either call: what its bus hears of them comes from A. (The
      // waiter may also have read a decision that landed while it was subscribing.)
      for (const [id, status] of [
        [approved.id, "succeeded"],
        [denied.id, "denied"],
      ])
        await until(
          () => heardOnB.some((e) => e.type === "call" && e.id === id && e.status === status),
          `replica B's bus to hear that call ${id} is ${status}`,
        );
    });

    it("the notifications name calls by id and status alone: neither a call's arguments nor its result is in any", async () => {
      const rt = await start();
      await enableTool(rt.runtime, ADD_NOTE);
      const channel = await onChannel(rt.databaseUrl ?? "");
      const marker = `gh-marker-${randomUUID()}`;
      const held = await heldOn(rt, marker);
      await rt.runtime.broker.approve("alice", held.id);
      await channel.until(tells(held.id, "succeeded"), `call ${held.id} succeeded`);
      // The marker was there to leak: the call's result repeats it.
      expect(JSON.stringify((await rt.runtime.broker.get(held.id))?.result)).toContain(marker);

      expect(channel.payloads.filter((p) => p.includes(held.id)).length).toBeGreaterThan(0);
      for (const payload of channel.payloads) {
        expect(payload).not.toContain(marker);
        const { from, events, ...rest } = JSON.parse(payload) as Record<string, unknown>;
        expect(rest).toEqual({});
        expect(from).toBe(rt.runtime.replica.id);
        for (const e of events as LiveEvent[])
          if (e.type === "call") expect(Object.keys(e).sort()).toEqual(["id", "status", "type"]);
      }
    });

    it("another replica's events are rebuilt field by field: unknown fields stripped, wrong or unknown ones dropped, this replica's own ignored", async () => {
      const rt = await start();
      const { runtime } = rt;
      const channel = await onChannel(rt.databaseUrl ?? "");
      const heard = record(runtime);
      const m = `forged-${randomUUID()}`;
      const secret = `secret-${randomUUID()}`;

      await channel.notify("not json {");
      await channel.notify(JSON.stringify({ from: "elsewhere", events: "none" }));
      const own = JSON.stringify({
        from: runtime.replica.id,
        events: [{ type: "call", id: `${m}-own`, status: "denied" }],
      });
      await channel.notify(own);
      await channel.notify(
        JSON.stringify({
          from: "elsewhere",
          events: [
            { type: "call", id: `${m}-call`, status: "denied", arguments: { text: secret }, result: secret },
            { type: "call", id: `${m}-bad-status`, status: "exploded" },
            { type: "call", id: 42, status: "denied" },
            { type: "call", id: `${m}-${"x".repeat(300)}`, status: "denied" },
            { type: "call", status: "denied" },
            { type: "server", name: `${m}-server`, state: "ready", stderr: secret },
            { type: "server", name: `${m}-on-fire`, state: "on fire" },
            { type: "catalogue", server: `${m}-catalogue`, tools: [{ name: secret }] },
            { type: "catalogue", server: { name: `${m}-object` } },
            { type: "oauth", server: `${m}-oauth`, tokens: { access_token: secret } },
            { type: "token", name: `${m}-token`, secret },
            { type: "token", name: 7 },
            { type: "grants", grant: secret },
            { type: "call.progress", id: `${m}-progress`, progress: 1, message: secret },
            { type: `${m}-unknown`, id: `${m}-unknown` },
            null,
            "grants",
            [{ type: "grants" }],
            { type: "call", id: `${m}-last`, status: "expired" },
          ],
        }),
      );
      await until(
        () => heard.some((e) => e.type === "call" && e.id === `${m}-last`),
        "the forged envelope's last event on the bus",
      );

      const forged = heard.filter((e) => JSON.stringify(e).includes(m));
      expect(forged).toStrictEqual([
        { type: "call", id: `${m}-call`, status: "denied" },
        { type: "server", name: `${m}-server`, state: "ready" },
        { type: "catalogue", server: `${m}-catalogue` },
        { type: "oauth", server: `${m}-oauth` },
        { type: "token", name: `${m}-token` },
        { type: "call", id: `${m}-last`, status: "expired" },
      ]);
      for (const e of heard) expect(JSON.stringify(e)).not.toContain(secret);
      expect(heard.filter((e) => e.type === "grants")).toStrictEqual([{ type: "grants" }]);

      // Heard from another replica, not sent back out: of what this replica sent (its own events
      // of the moment too), only its own event names the forgery.
      runtime.bus.publish({ type: "call", id: `${m}-local`, status: "denied" });
      await channel.until(tells(`${m}-local`, "denied"), "this replica's own event");
      const sent = channel.payloads
        .filter((p) => p !== own && envelopeOf(p)?.from === runtime.replica.id)
        .flatMap((p) => envelopeOf(p)?.events as LiveEvent[]);
      expect(sent.filter((e) => JSON.stringify(e).includes(m))).toStrictEqual([
        { type: "call", id: `${m}-local`, status: "denied" },
      ]);
    });

    it("a replica that could not send its events for a while has the others re-read what they missed, and keeps that to itself", async () => {
      const { a, b } = await twoReplicas();
      const channel = await onChannel(a.databaseUrl ?? "");
      const held = await heldOn(a, "created while A could not send");
      await channel.until(tells(held.id, "pending"), `call ${held.id} pending`);
      const heardOnB = record(b.runtime);
      const before = channel.payloads.length;

      // Not a date: nothing to re-read.
      await channel.notify(JSON.stringify({ from: "replica-gone", events: [], resync: "yesterday" }));
      const since = new Date(Date.now() - 60_000).toISOString();
      await channel.notify(JSON.stringify({ from: "replica-gone", events: [], resync: since }));
      await until(() => heardOnB.some((e) => e.type === "resources"), "replica B to re-read what it missed");
      expect(heardOnB).toContainEqual({ type: "call", id: held.id, status: "pending" });
      expect(heardOnB).toContainEqual({ type: "grants" });
      expect(heardOnB.filter((e) => e.type === "resources")).toHaveLength(1);
      // What B re-read stays on B: the others did not miss it from B.
      b.runtime.bus.publish({ type: "catalogue", server: "after-resync" });
      await channel.until((p) => p.includes("after-resync"), "B's own next event");
      const sent = channel.payloads.slice(before).filter((p) => envelopeOf(p)?.from !== "replica-gone");
      expect(sent.join("")).not.toContain(held.id);
    });

    it("a replica whose listening connection was cut learns, once back, of a decision made meanwhile on another", async () => {
      const a = await start();
      await enableTool(a.runtime, ADD_NOTE);
      const url = a.databaseUrl ?? "";
      const aListens = await listeners(url);
      expect(aListens).toHaveLength(1);
      const b = await start({ databaseUrl: url });
      const bListens = (await listeners(url)).filter((pid) => !aListens.includes(pid));
      expect(bListens).toHaveLength(1);
      const bridge = b.runtime.bridge;
      if (!bridge) throw new Error("replica B has no bridge");
      const channel = await onChannel(url);

      const held = await heldOn(b, "decided while B was deaf");
      const heardOnB = record(b.runtime);
      const waited = waitOn(b.runtime, held.id, RESUMED_WITHIN_MS);
      // No new connection to the database until the decision's notification has gone by: B's
      // listener cannot be back in time to hear it, whatever the machine's load.
      const database = new URL(url).pathname.slice(1);
      await asAdmin(`ALTER DATABASE "${database}" ALLOW_CONNECTIONS false`);
      try {
        await asAdmin(`SELECT pg_terminate_backend(${bListens[0]})`);
        await until(() => !bridge.listening, "replica B to find its listening connection lost");
        await a.runtime.broker.deny("alice", held.id, "while B was away");
        await channel.until(tells(held.id, "denied"), `call ${held.id} denied`);
        expect(bridge.listening).toBe(false);
        expect(heardOnB).not.toContainEqual({ type: "call", id: held.id, status: "denied" });
      } finally {
        await asAdmin(`ALTER DATABASE "${database}" ALLOW_CONNECTIONS true`);
      }

      expect(await waited).toMatchObject({ status: "denied", reason: "while B was away" });
      expect(bridge.listening).toBe(true);
      // B's bus was told again what it missed, with what else a lost notification may have said:
      // grants changed, resources read (the call comes first: it is what waiters wait for).
      await until(
        () => heardOnB.some((e) => e.type === "resources"),
        "replica B to republish what it may have missed",
      );
      expect(heardOnB).toContainEqual({ type: "call", id: held.id, status: "denied" });
      expect(heardOnB).toContainEqual({ type: "grants" });
    });
  },
);
