import "server-only";
import { sql } from "drizzle-orm";
import {
  type CallStatus,
  callStatuses,
  type LiveEvent,
  type ServerState,
  serverStates,
} from "@/lib/api-types";
import type { EventBus } from "../events";
import type { Logger } from "../log";
import { type Db, postgresUrlOf, rows } from "../store/db";
import { PgListener } from "../store/pg-listen";

/** The PostgreSQL channel the replicas' buses meet on. */
export const EVENTS_CHANNEL = "gatehouse_events";

/**
 * A notification's payload stays under PostgreSQL's 8000 bytes; events beyond it go in the next.
 * Events are ids, names and statuses, so hundreds fit in one.
 */
const PAYLOAD_MAX_BYTES = 7_000;

/** How far before a lost connection a resync reads from (ms). */
const RESYNC_MARGIN_MS = 5_000;

/** What one replica notifies: its id (so it ignores its own) and the events of one turn. */
interface Envelope {
  from: string;
  events: LiveEvent[];
  /** Set when `from` could not send its events for a while: re-read what changed since (ISO). */
  resync?: string;
}

export interface BusBridge {
  close(): Promise<void>;
  /** Whether the listening connection is up (health reports it). */
  readonly listening: boolean;
}

/**
 * Joins this replica's event bus to every other replica's through PostgreSQL `LISTEN/NOTIFY`:
 * what is published here goes out (gathered per turn of the event loop, one `pg_notify` for all),
 * and what others published is published here, so a decision on replica A wakes the long-poll,
 * the held `/mcp` request, the task poll and the browsers served by replica B. Payloads carry
 * only what a `LiveEvent` carries (ids, names, statuses), never arguments or results; each
 * received event is checked field by field before it reaches the bus. Progress stays on its
 * replica. When the listening connection breaks, it comes back by itself, and what may have been
 * missed meanwhile is read again (`resync`) and published here.
 */
export async function bridgeBus(opts: {
  db: Db;
  bus: EventBus;
  replica: string;
  log: Logger;
  /**
   * Publishes with `publish` what changed since `since` (ISO): what notifications lost may have
   * said. What it publishes stays on this replica (the others did not miss it).
   */
  resync(since: string, publish: (event: LiveEvent) => void): Promise<void>;
}): Promise<BusBridge> {
  const { db, bus, replica, log } = opts;
  const url = postgresUrlOf(db);
  if (!url) throw new Error("bridgeBus needs a PostgreSQL store");
  /** Set while an event from another replica is being published here: it is not sent back out. */
  let relaying = false;
  const relay = (event: LiveEvent) => {
    relaying = true;
    try {
      bus.publish(event);
    } finally {
      relaying = false;
    }
  };
  let queued: LiveEvent[] = [];
  const notify = (payload: string) => rows(db, sql`SELECT pg_notify(${EVENTS_CHANNEL}, ${payload})`);
  /** Since when (ms) events could not be sent; null while they go out. */
  let missedSince: number | null = null;
  let resyncTimer: NodeJS.Timeout | null = null;
  /**
   * Once sending works again, the others are told to re-read what they missed since then (their
   * own listening connection may never have broken, so nothing else would tell them).
   */
  const tellMissed = (retryMs: number) => {
    if (resyncTimer || closed) return;
    resyncTimer = setTimeout(() => {
      resyncTimer = null;
      const since = missedSince;
      if (since === null) return;
      const resync = new Date(since - RESYNC_MARGIN_MS).toISOString();
      notify(JSON.stringify({ from: replica, events: [], resync } satisfies Envelope)).then(
        () => {
          if (missedSince === since) missedSince = null;
          log.info("events reach the other replicas again; they re-read what they missed");
        },
        () => tellMissed(Math.min(retryMs * 2, 5_000)),
      );
    }, retryMs);
    resyncTimer.unref();
  };
  const flush = () => {
    const events = queued;
    queued = [];
    for (const payload of envelopes(replica, events)) {
      notify(payload).catch((err: unknown) => {
        if (missedSince === null) {
          log.warn("events could not be sent to the other replicas", { error: String(err) });
          missedSince = Date.now();
        }
        tellMissed(500);
      });
    }
  };
  let closed = false;
  const resyncFrom = (since: string) => {
    opts.resync(since, relay).catch((err: unknown) => {
      log.warn("what other replicas did meanwhile could not be read", { error: String(err) });
    });
  };
  const unsubscribe = bus.subscribe((event) => {
    if (relaying) return;
    if (queued.length === 0) setImmediate(flush);
    queued.push(event);
  });
  const listener = await PgListener.open(
    url,
    EVENTS_CHANNEL,
    {
      onMessage(payload) {
        const { events, resync: since } = received(payload, replica);
        for (const event of events) relay(event);
        if (since !== null) {
          log.info("another replica could not send its events for a while; reading what was missed");
          resyncFrom(since);
        }
      },
      onLost(reason) {
        log.warn("the connection hearing other replicas' events was lost; reconnecting", { reason });
      },
      onResumed(lostAt) {
        log.info("hearing other replicas' events again; reading what was missed");
        // Before the loss by a margin: a notification sent just before it may not have arrived, and
        // other replicas' clocks (which stamped the rows) may run a little behind this one's.
        resyncFrom(new Date(lostAt - RESYNC_MARGIN_MS).toISOString());
      },
    },
    `gatehouse ${replica} events`,
  ).catch((err: unknown) => {
    unsubscribe();
    throw err;
  });
  return {
    get listening() {
      return listener.listening;
    },
    async close() {
      closed = true;
      if (resyncTimer) clearTimeout(resyncTimer);
      unsubscribe();
      await listener.close();
    },
  };
}

/** `events` as payloads of at most {@link PAYLOAD_MAX_BYTES} each. */
export function envelopes(from: string, events: LiveEvent[]): string[] {
  const out: string[] = [];
  let batch: LiveEvent[] = [];
  let bytes = 0;
  for (const event of events) {
    const size = Buffer.byteLength(JSON.stringify(event)) + 1;
    if (batch.length > 0 && bytes + size > PAYLOAD_MAX_BYTES) {
      out.push(JSON.stringify({ from, events: batch } satisfies Envelope));
      batch = [];
      bytes = 0;
    }
    batch.push(event);
    bytes += size;
  }
  if (batch.length > 0) out.push(JSON.stringify({ from, events: batch } satisfies Envelope));
  return out;
}

const isName = (v: unknown): v is string => typeof v === "string" && v.length > 0 && v.length <= 200;

/**
 * What another replica's payload says: its events, each rebuilt from the fields it may have, and
 * the time it asks every other replica to re-read from (ISO), or null. Nothing of this replica's
 * own, nor of a payload that is no envelope.
 */
export function received(payload: string, self: string): { events: LiveEvent[]; resync: string | null } {
  const nothing = { events: [], resync: null };
  // This replica's own notifications come back too (every listener hears every one): known by
  // their first bytes (`envelopes` writes `from` first), not parsed.
  if (payload.startsWith(`{"from":${JSON.stringify(self)},`)) return nothing;
  let envelope: unknown;
  try {
    envelope = JSON.parse(payload);
  } catch {
    return nothing;
  }
  const { from, events, resync } = (envelope ?? {}) as Partial<Record<keyof Envelope, unknown>>;
  if (from === self) return nothing;
  const since =
    typeof resync === "string" && !Number.isNaN(Date.parse(resync))
      ? new Date(Date.parse(resync)).toISOString()
      : null;
  return { events: Array.isArray(events) ? rebuilt(events) : [], resync: since };
}

function rebuilt(events: unknown[]): LiveEvent[] {
  const out: LiveEvent[] = [];
  for (const e of events as (Record<string, unknown> | null)[]) {
    if (!e || typeof e !== "object") continue;
    if (e.type === "call" && isName(e.id) && callStatuses.includes(e.status as never))
      out.push({ type: "call", id: e.id, status: e.status as CallStatus });
    else if (e.type === "catalogue" && isName(e.server)) out.push({ type: "catalogue", server: e.server });
    else if (e.type === "server" && isName(e.name) && serverStates.includes(e.state as never))
      out.push({ type: "server", name: e.name, state: e.state as ServerState });
    else if (e.type === "grants") out.push({ type: "grants" });
    else if (e.type === "resources") out.push({ type: "resources" });
    else if (e.type === "oauth" && isName(e.server)) out.push({ type: "oauth", server: e.server });
    else if (e.type === "token" && isName(e.name)) out.push({ type: "token", name: e.name });
  }
  return out;
}
