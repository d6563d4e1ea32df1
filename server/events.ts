import "server-only";
import { EventEmitter } from "node:events";
import type { LiveEvent } from "@/lib/api-types";

/**
 * The in-process event bus: call decisions wake long-polls and held MCP requests, and every
 * event is forwarded to browsers over server-sent events. Listeners must not throw.
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
}
