import "server-only";
import { EventEmitter } from "node:events";
import type { CallStatus, LiveEvent } from "@/lib/api-types";

/**
 * A tool server's progress on a call while it runs, as Gatehouse passes it on: numbers finite,
 * the message cleaned and capped, at most about ten a second per call (server/calls/run.ts).
 * Only published between the call's start and its outcome.
 */
export interface CallProgressEvent {
  type: "call.progress";
  /** The call's id. */
  id: string;
  progress: number;
  total?: number;
  message?: string;
}

/**
 * A call this process stored in a new status: born (`from: null`) or moved. For observers in this
 * process (metrics) only: never sent to browsers, nor to other replicas, so each replica tells
 * what it did itself. The call's own columns, as stored.
 */
export interface CallFact {
  from: "pending" | "running" | null;
  /** Its columns as stored; those of its decision given for a birth or a move from `pending`. */
  call: {
    server: string;
    tool: string;
    status: CallStatus;
    createdAt?: string;
    rule?: string | null;
    grantId?: string | null;
    /** A refused call's code: `denied_by_rule` when a deny rule refused it. */
    errorCode?: string | null;
  };
}

/**
 * The in-process event bus: call decisions wake long-polls and held MCP requests, and every
 * event is forwarded to browsers over server-sent events, those that only mean "refetch" thinned
 * per browser ({@link gatherRefetchEvents}); subscribers here see every one. Listeners must not
 * throw.
 *
 * A call's progress ({@link CallProgressEvent}) travels apart, on a channel of its own per call:
 * it is for the requests waiting on that call alone. On the main channel every browser would
 * receive a tool server's words about every call, and every long-poll, held request and the
 * notifier would wake for each of them.
 */
export class EventBus {
  private readonly emitter = new EventEmitter();

  constructor() {
    // Every open browser tab and every long-poll is a listener; there is no fixed bound.
    this.emitter.setMaxListeners(0);
  }

  publish(event: LiveEvent): void {
    this.emitter.emit("event", event);
  }

  subscribe(listener: (event: LiveEvent) => void): () => void {
    this.emitter.on("event", listener);
    return () => this.emitter.off("event", listener);
  }

  /** Tells this process's observers of a call's new status ({@link CallFact}); committed first. */
  recordCall(fact: CallFact): void {
    this.emitter.emit(CALL_FACTS, fact);
  }

  /** Hears every {@link CallFact} of this process until the returned function is called. */
  observeCalls(listener: (fact: CallFact) => void): () => void {
    this.emitter.on(CALL_FACTS, listener);
    return () => this.emitter.off(CALL_FACTS, listener);
  }

  publishProgress(event: CallProgressEvent): void {
    this.emitter.emit(progressChannel(event.id), event);
  }

  /** Hears the progress of call `id` (see {@link CallProgressEvent}) until the returned function is called. */
  subscribeProgress(id: string, listener: (event: CallProgressEvent) => void): () => void {
    const channel = progressChannel(id);
    this.emitter.on(channel, listener);
    return () => this.emitter.off(channel, listener);
  }
}

/**
 * A bus for work inside a transaction that may be retried or rolled back: it holds what is
 * published on it, events and {@link CallFact}s alike, until `release` passes them on to the real
 * bus (after the commit); `clear` drops what an abandoned attempt published.
 */
export function holdingBus(): { bus: EventBus; clear(): void; release(to: EventBus): void } {
  const bus = new EventBus();
  let events: LiveEvent[] = [];
  let facts: CallFact[] = [];
  bus.subscribe((e) => events.push(e));
  bus.observeCalls((f) => facts.push(f));
  return {
    bus,
    clear() {
      events = [];
      facts = [];
    },
    release(to) {
      for (const e of events) to.publish(e);
      for (const f of facts) to.recordCall(f);
      events = [];
      facts = [];
    },
  };
}

/** The channel of {@link CallFact}s: no call id starts with it. */
const CALL_FACTS = "call-facts";

/** A call's own progress channel; the prefix keeps it apart from the main one ("event"). */
function progressChannel(id: string): string {
  return `progress:${id}`;
}

/** How often one server's `catalogue` events reach a browser at most (see {@link gatherRefetchEvents}). */
export const CATALOGUE_GATHER_MS = 1_000;

/** How often resource-read events (`resources`, all servers together) reach a browser at most. */
export const RESOURCES_GATHER_MS = 1_000;

/**
 * How often `call` events (all calls together) reach a browser at most. Shorter than the
 * catalogue's: a reviewer acts on the pending queue, so a new call must show within half a
 * second during a burst; agents making thousands of calls a second still cost each open page at
 * most two refetches per window, not one a call.
 */
export const CALL_GATHER_MS = 500;

/**
 * Which events are thinned together, and over how long: one server's catalogue events, all
 * resource reads, all calls. `null`: the event passes at once (a server's state, grants).
 */
function gatherWindow(event: LiveEvent): { key: string; ms: number } | null {
  switch (event.type) {
    case "catalogue":
      return { key: `catalogue:${event.server}`, ms: CATALOGUE_GATHER_MS };
    case "resources":
      return { key: "resources", ms: RESOURCES_GATHER_MS };
    case "call":
      return { key: "call", ms: CALL_GATHER_MS };
    case "server":
    case "grants":
    case "oauth":
    case "token":
      return null;
  }
}

/**
 * `listener`, but with the events that only mean "refetch" thinned per key, each key to at most
 * one event per its window: the first of a burst passes at once, and if more came meanwhile, the
 * last of them passes when the window ends (which opens the next one). The last one alone says
 * all, so a server whose tools flap, an owner's bulk action or agents' thousands of calls a
 * second cost each browser a refetch a window, not one an event. Each server's `catalogue`
 * events are thinned apart ({@link CATALOGUE_GATHER_MS}); resource reads ({@link
 * RESOURCES_GATHER_MS}) and calls ({@link CALL_GATHER_MS}) each all together, so a held `call`
 * event's `id` and `status` are only the latest call's: a reader must take it as "refetch the
 * calls", never as the story of one call. Other events pass at once. For browsers only: whoever
 * needs every event (a long-poll, a held MCP request, the notifier) subscribes to the bus itself.
 * `stop` drops what is held and cancels the timers (unref'd, never keeping the process up).
 */
export function gatherRefetchEvents(listener: (event: LiveEvent) => void): {
  listener: (event: LiveEvent) => void;
  stop(): void;
} {
  const windows = new Map<string, { timer: NodeJS.Timeout; held: LiveEvent | null }>();
  const open = (key: string, ms: number) => {
    const timer = setTimeout(() => {
      const held = windows.get(key)?.held ?? null;
      windows.delete(key);
      if (!held) return;
      listener(held);
      open(key, ms);
    }, ms);
    timer.unref();
    windows.set(key, { timer, held: null });
  };
  return {
    listener(event) {
      const gather = gatherWindow(event);
      if (gather === null) return listener(event);
      const window = windows.get(gather.key);
      if (window) {
        window.held = event;
        return;
      }
      listener(event);
      open(gather.key, gather.ms);
    },
    stop() {
      for (const { timer } of windows.values()) clearTimeout(timer);
      windows.clear();
    },
  };
}
