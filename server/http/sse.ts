import "server-only";
import { type EventBus, gatherCatalogueEvents } from "../events";

/** Comment line sent this often so proxies and browsers keep the stream open. */
const HEARTBEAT_MS = 15_000;

/**
 * A `text/event-stream` response carrying every bus event as `event: <type>` +
 * `data: <json>`, until the client disconnects (`signal`); each server's `catalogue` events at
 * most once a second (see {@link gatherCatalogueEvents}).
 */
export function eventStream(bus: EventBus, signal: AbortSignal): Response {
  const encoder = new TextEncoder();
  let cleanup = () => {};
  const stream = new ReadableStream<Uint8Array>({
    start(controller) {
      const send = (text: string) => {
        try {
          controller.enqueue(encoder.encode(text));
        } catch {
          cleanup();
        }
      };
      send(": connected\n\nretry: 2000\n\n");
      const gathered = gatherCatalogueEvents((e) => send(`event: ${e.type}\ndata: ${JSON.stringify(e)}\n\n`));
      const unsubscribe = bus.subscribe(gathered.listener);
      const heartbeat = setInterval(() => send(": ping\n\n"), HEARTBEAT_MS);
      heartbeat.unref();
      cleanup = () => {
        unsubscribe();
        gathered.stop();
        clearInterval(heartbeat);
        try {
          controller.close();
        } catch {
          // Already closed by the client.
        }
      };
      signal.addEventListener("abort", () => cleanup(), { once: true });
    },
    cancel() {
      cleanup();
    },
  });
  return new Response(stream, {
    headers: {
      "Content-Type": "text/event-stream; charset=utf-8",
      "Cache-Control": "no-store, no-transform",
      Connection: "keep-alive",
      "X-Accel-Buffering": "no",
    },
  });
}
