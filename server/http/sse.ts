import "server-only";
import { type EventBus, gatherRefetchEvents } from "../events";

/** Comment line sent this often so proxies and browsers keep the stream open. */
const HEARTBEAT_MS = 15_000;

/** How often, at most, {@link eventStream} asks whether its reader may still read. */
const RECHECK_MS = 1000;

/**
 * A `text/event-stream` response carrying every bus event as `event: <type>` + `data: <json>`,
 * until the client disconnects (`signal`); the events that only mean "refetch" are thinned for
 * this stream alone (see {@link gatherRefetchEvents}): each server's `catalogue` events and the
 * resource reads to about one a second, the `call` events to about one per `CALL_GATHER_MS`
 * (500 ms). `stillAllowed` (default: always) is asked before an event is sent, at most once a
 * second, and at every heartbeat: once it says no (the reader's session ended, say), the stream
 * ends without sending anything more. It reads the store, so it is awaited: messages wait for
 * it in order, none overtakes another. A check that fails (the store unreachable) counts as a
 * no: the stream ends, and the browser opens it again, which authenticates afresh.
 */
export function eventStream(
  bus: EventBus,
  signal: AbortSignal,
  stillAllowed: () => Promise<boolean> = async () => true,
): Response {
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
      let checkedAt = Date.now();
      let ended = false;
      const allowed = async (force: boolean): Promise<boolean> => {
        if (ended) return false;
        if (!force && Date.now() - checkedAt < RECHECK_MS) return true;
        checkedAt = Date.now();
        const ok = await Promise.resolve()
          .then(stillAllowed)
          .catch(() => false);
        if (ok && !ended) return true;
        cleanup();
        return false;
      };
      // Messages go out in the order they came, each once the check before it has answered.
      let queue: Promise<void> = Promise.resolve();
      const sendIfAllowed = (text: string, force: boolean) => {
        queue = queue.then(async () => {
          if (await allowed(force)) send(text);
        });
      };
      send(": connected\n\nretry: 2000\n\n");
      const gathered = gatherRefetchEvents((e) => {
        sendIfAllowed(`event: ${e.type}\ndata: ${JSON.stringify(e)}\n\n`, false);
      });
      const unsubscribe = bus.subscribe(gathered.listener);
      const heartbeat = setInterval(() => {
        sendIfAllowed(": ping\n\n", true);
      }, HEARTBEAT_MS);
      heartbeat.unref();
      cleanup = () => {
        if (ended) return;
        ended = true;
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
