import "server-only";
import { EventEmitter } from "node:events";
import type { LiveEvent } from "@/lib/api-types";

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
 * The in-process event bus: call decisions wake long-polls and held MCP requests, and every
 * event is forwarded to browsers over server-sent events. Listeners must not throw.
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

/** A call's own progress channel; the prefix keeps it apart from the main one ("event"). */
function progressChannel(id: string): string {
  return `progress:${id}`;
}

/** How often one server's `catalogue` events reach a browser at most (see {@link gatherCatalogueEvents}). */
export const CATALOGUE_GATHER_MS = 1_000;

/** Which events are thinned together: one server's catalogue events, and all resource reads. */
function gatherKey(event: LiveEvent): string | null {
  if (event.type === "catalogue") return `catalogue:${event.server}`;
  if (event.type === "resources") return "resources";
  return null;
}

/**
 * `listener`, but with each server's `catalogue` events thinned to at most one per `gatherMs`:
 * the first of a burst passes at once, and if more came meanwhile, the last of them passes when
 * the window ends (which opens the next one). Every such event means "refetch the catalogue",
 * so the last one alone says all; a server whose tools flap, or an owner's bulk action, costs
 * each browser one refetch a second, not one an event. Resource reads (`resources`, "refetch
 * the reads") are thinned the same way, all servers together. Other events pass at once. `stop`
 * drops what is held and cancels the timers (unref'd, never keeping the process up).
 */
export function gatherCatalogueEvents(
  listener: (event: LiveEvent) => void,
  gatherMs: number = CATALOGUE_GATHER_MS,
): { listener: (event: LiveEvent) => void; stop(): void } {
  const windows = new Map<string, { timer: NodeJS.Timeout; held: LiveEvent | null }>();
  const open = (key: string) => {
    const timer = setTimeout(() => {
      const held = windows.get(key)?.held ?? null;
      windows.delete(key);
      if (!held) return;
      listener(held);
      open(key);
    }, gatherMs);
    timer.unref();
    windows.set(key, { timer, held: null });
  };
  return {
    listener(event) {
      const key = gatherKey(event);
      if (key === null) return listener(event);
      const window = windows.get(key);
      if (window) {
        window.held = event;
        return;
      }
      listener(event);
      open(key);
    },
    stop() {
      for (const { timer } of windows.values()) clearTimeout(timer);
      windows.clear();
    },
  };
}
