import "server-only";
import type { Readable } from "node:stream";
import { StringDecoder } from "node:string_decoder";
import { discard } from "../net/guarded-fetch";

/**
 * Event streams (`text/event-stream`) from HTTP tool servers, read from the response body as it
 * comes, each event capped at the server's `maxFrameBytes`. The SDK parses an event stream
 * through web streams (a `TextDecoderStream` and an `EventSourceParserStream` per response),
 * which cost more per answer than the answer itself; an SDK server answers every request this
 * way by default, so the answers to our own requests are read here (http-transport.ts).
 */

export class FrameTooLargeError extends Error {
  readonly code = "GATEHOUSE_FRAME_TOO_LARGE";
}

export function tooLarge(what: string, max: number): FrameTooLargeError {
  return new FrameTooLargeError(`server sent ${what} larger than maxFrameBytes (${max} bytes)`);
}

/**
 * Counts the bytes of an event stream since its last event boundary (a blank line), across
 * chunks: the function returned answers, for each chunk, whether the event in progress has now
 * passed `max` bytes. The over-long event is never held whole.
 */
export function eventSizeCounter(max: number): (chunk: Uint8Array) => boolean {
  let count = 0;
  let lineEmpty = true;
  return (chunk) => {
    let pos = 0;
    for (;;) {
      const nl = chunk.indexOf(10, pos);
      if (nl === -1) {
        const rest = chunk.byteLength - pos;
        if (rest > 1 || (rest === 1 && chunk[pos] !== 13)) lineEmpty = false;
        count += rest;
        break;
      }
      const len = nl - pos;
      const content = len > 0 && chunk[nl - 1] === 13 ? len - 1 : len;
      count = lineEmpty && content === 0 ? 0 : count + len + 1;
      lineEmpty = true;
      pos = nl + 1;
    }
    return count > max;
  };
}

/** One dispatched event: its type (`message` when none was given) and its data. */
export interface StreamEvent {
  event: string;
  data: string;
}

/**
 * The event-stream format's parser (the HTML standard's "interpret an event stream"): lines end
 * at CRLF, LF or CR; a blank line dispatches the event; `data` lines join with LF; `event` sets
 * the type; comments and `id`/`retry` (resumption, which answers to our own requests do not
 * need: a stream that ends unanswered fails its requests) are read and dropped. Text is decoded
 * as UTF-8 across chunk boundaries; a leading BOM is skipped.
 */
export class EventStreamParser {
  private readonly decoder = new StringDecoder("utf8");
  /** The text of the line in progress, in the pieces it came in. */
  private pending: string[] = [];
  private data: string[] = [];
  private type = "";
  private started = false;
  /** The last chunk ended with CR: an LF opening the next one belongs to that line end. */
  private afterCr = false;

  push(chunk: Buffer): StreamEvent[] {
    let text = this.decoder.write(chunk);
    if (!this.started && text.length > 0) {
      this.started = true;
      if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
    }
    if (this.afterCr && text.charCodeAt(0) === 10) text = text.slice(1);
    this.afterCr = false;
    const out: StreamEvent[] = [];
    let pos = 0;
    // Where the next LF and CR are from `pos` (-1: none left), each searched again only once
    // passed, so a long text is scanned once, not once per line.
    let lf = text.indexOf("\n");
    let cr = text.indexOf("\r");
    for (;;) {
      if (lf !== -1 && lf < pos) lf = text.indexOf("\n", pos);
      if (cr !== -1 && cr < pos) cr = text.indexOf("\r", pos);
      let end = lf === -1 ? cr : cr === -1 ? lf : Math.min(lf, cr);
      if (end === -1) break;
      let line = text.slice(pos, end);
      if (this.pending.length > 0) {
        line = this.pending.join("") + line;
        this.pending = [];
      }
      this.line(line, out);
      if (end === cr) {
        if (end + 1 === text.length) this.afterCr = true;
        else if (text.charCodeAt(end + 1) === 10) end++;
      }
      pos = end + 1;
    }
    // A line still open is kept in pieces, joined once it ends: appending each chunk to one
    // growing string would copy it again per chunk, many times the event's size in garbage.
    if (pos < text.length) this.pending.push(text.slice(pos));
    return out;
  }

  private line(line: string, out: StreamEvent[]): void {
    if (line === "") {
      if (this.data.length > 0) out.push({ event: this.type || "message", data: this.data.join("\n") });
      this.data = [];
      this.type = "";
      return;
    }
    if (line.charCodeAt(0) === 58) return;
    const colon = line.indexOf(":");
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? "" : line.slice(colon + 1);
    if (value.charCodeAt(0) === 32) value = value.slice(1);
    if (field === "data") this.data.push(value);
    else if (field === "event") this.type = value;
  }
}

/**
 * Reads `body` as an event stream, handing each event to `onEvent` as it completes. Over `max`
 * bytes in one event, the body is dropped and `onEnd` gets a {@link FrameTooLargeError}. `onEnd`
 * runs once: when the body ends (null), breaks (its error) or is cut off by the cap.
 */
export function readEventStream(
  body: Readable,
  max: number,
  onEvent: (event: StreamEvent) => void,
  onEnd: (error: Error | null) => void,
): void {
  const over = eventSizeCounter(max);
  const parser = new EventStreamParser();
  let ended = false;
  const end = (error: Error | null) => {
    if (ended) return;
    ended = true;
    onEnd(error);
  };
  body.on("data", (chunk: Buffer) => {
    if (ended) return;
    if (over(chunk)) {
      discard(body);
      end(tooLarge("an event", max));
      return;
    }
    for (const event of parser.push(chunk)) onEvent(event);
  });
  body.once("end", () => end(null));
  // A body that breaks (network error, server reset, our own abort) never ends.
  body.once("error", (err) => end(err));
}
