import "server-only";

/**
 * How a session's answer leaves `/mcp`: as the SDK transport's event stream, or as plain JSON
 * when it is one quick message, with the endpoint told when the answer is over.
 */

/** Headers of an event stream that a JSON body does not carry. */
const STREAM_ONLY_HEADERS = ["content-type", "cache-control", "connection", "x-accel-buffering"];

/**
 * The SDK's transport answers every request with an event stream, which a client must parse
 * for what is, without a progress token, a single message. The protocol lets the server answer
 * a request with `application/json` instead, which costs both sides less. So when the stream
 * ends within `windowMs` having carried exactly one message, the response, that message goes
 * out as JSON; a stream with anything else goes out as it came. A stream still open after
 * `windowMs` (a call held for a reviewer) goes out as a stream from then on: what arrived, then
 * the rest, keep-alive comments included. `done` is called once the stream is over.
 */
export async function asJsonIfQuick(
  res: Response,
  signal: AbortSignal,
  windowMs: number,
  done: () => void,
): Promise<Response> {
  if (!res.body) {
    done();
    return res;
  }
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<"late">((resolve) => {
    timer = setTimeout(() => resolve("late"), windowMs);
  });
  let pending = reader.read();
  const onAbort = () => reader.cancel(signal.reason).catch((err: unknown) => void err);
  if (signal.aborted) onAbort();
  else signal.addEventListener("abort", onAbort, { once: true });
  try {
    for (;;) {
      const next = await Promise.race([pending, late]);
      if (next === "late") {
        signal.removeEventListener("abort", onAbort);
        // The read in flight is the stream's next chunk: the rest starts with it.
        let first: typeof pending | null = pending;
        const rest = new ReadableStream<Uint8Array>({
          start(controller) {
            for (const chunk of chunks) controller.enqueue(chunk);
          },
          async pull(controller) {
            const { value, done: end } = await (first ?? reader.read());
            first = null;
            if (end) controller.close();
            else controller.enqueue(value);
          },
          cancel: (reason) => reader.cancel(reason),
        });
        return new Response(tracked(rest, signal, done), {
          status: res.status,
          statusText: res.statusText,
          headers: res.headers,
        });
      }
      if (next.done) break;
      chunks.push(next.value);
      pending = reader.read();
    }
  } catch {
    // A stream that failed ends here; what arrived is all there is.
  } finally {
    clearTimeout(timer);
  }
  signal.removeEventListener("abort", onAbort);
  done();
  const decoder = new TextDecoder();
  const text = chunks.map((c) => decoder.decode(c, { stream: true })).join("") + decoder.decode();
  const data: string[] = [];
  for (const event of text.split(/\r?\n\r?\n/)) {
    const lines = event.split(/\r?\n/).filter((l) => l.startsWith("data:"));
    if (lines.length > 0) data.push(lines.map((l) => l.slice(5).replace(/^ /, "")).join("\n"));
  }
  const only = data.length === 1 ? parseMessage(data[0] ?? "") : null;
  if (!only || !("result" in only || "error" in only)) {
    return new Response(text, { status: res.status, statusText: res.statusText, headers: res.headers });
  }
  const headers = new Headers(res.headers);
  for (const h of STREAM_ONLY_HEADERS) headers.delete(h);
  headers.set("content-type", "application/json");
  headers.set("cache-control", "no-store");
  return new Response(data[0], { status: res.status, headers });
}

function parseMessage(text: string): Record<string, unknown> | null {
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === "object" && value !== null && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : null;
  } catch {
    return null;
  }
}

/**
 * The same bytes, with `done` called once when the stream ends, fails, is cancelled by the
 * consumer, or the client goes away (`signal`). Cancelling reaches the SDK's stream, which then
 * forgets it.
 */
export function tracked(
  body: ReadableStream<Uint8Array>,
  signal: AbortSignal,
  done: () => void,
): ReadableStream<Uint8Array> {
  const reader = body.getReader();
  let finished = false;
  const finish = () => {
    if (finished) return;
    finished = true;
    signal.removeEventListener("abort", onAbort);
    done();
  };
  const onAbort = () => {
    finish();
    // A stream that already ended or failed has nothing left to cancel.
    reader.cancel(signal.reason).catch((err: unknown) => void err);
  };
  if (signal.aborted) queueMicrotask(onAbort);
  else signal.addEventListener("abort", onAbort);
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const { value, done: end } = await reader.read();
        if (end) {
          finish();
          controller.close();
          return;
        }
        controller.enqueue(value);
      } catch (err) {
        finish();
        controller.error(err);
      }
    },
    async cancel(reason) {
      finish();
      await reader.cancel(reason);
    },
  });
}
