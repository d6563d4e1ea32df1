/**
 * The event-stream reader that takes HTTP tool servers' answers: the format's parsing rules
 * (every line ending, split anywhere, multi-line data, comments, types, a BOM, split UTF-8), and
 * the per-event cap on a real body stream.
 */
import { PassThrough } from "node:stream";
import { describe, expect, it } from "vitest";
import { EventStreamParser, FrameTooLargeError, readEventStream, type StreamEvent } from "./event-stream";

function parseAll(chunks: (string | Buffer)[]): StreamEvent[] {
  const parser = new EventStreamParser();
  return chunks.flatMap((c) => parser.push(typeof c === "string" ? Buffer.from(c) : c));
}

describe("the event-stream parser", () => {
  it("reads events ended by a blank line, whatever the line endings, however the bytes are split", () => {
    const text = 'event: message\ndata: {"a":1}\n\ndata: {"b":2}\r\n\r\ndata: {"c":3}\r\rdata: {"d":4}\n\n';
    const expected = ['{"a":1}', '{"b":2}', '{"c":3}', '{"d":4}'].map((data) => ({ event: "message", data }));
    expect(parseAll([text])).toEqual(expected);
    // Every split point, CR and LF of one line end in different chunks included.
    for (let i = 1; i < text.length; i++) {
      expect(parseAll([text.slice(0, i), text.slice(i)])).toEqual(expected);
    }
    expect(parseAll([...text])).toEqual(expected);
  });

  it("joins data lines with LF, keeps the type, drops comments, ids and retries, and needs data to dispatch", () => {
    const text =
      ": keep-alive\nid: 7\nretry: 100\nevent: note\ndata: one\ndata:two\ndata\n\nevent: empty\n\n";
    expect(parseAll([text])).toEqual([{ event: "note", data: "one\ntwo\n" }]);
  });

  it("skips a leading byte-order mark and decodes UTF-8 split across chunks", () => {
    const bytes = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('data: "héllo ✓"\n\n')]);
    const events: StreamEvent[] = [];
    const parser = new EventStreamParser();
    for (const byte of bytes) events.push(...parser.push(Buffer.from([byte])));
    expect(events).toEqual([{ event: "message", data: '"héllo ✓"' }]);
  });

  it("an event without its closing blank line is never dispatched", () => {
    expect(parseAll(['data: {"cut":true}\n'])).toEqual([]);
  });
});

describe("reading a body as an event stream", () => {
  it("hands events on as they come and ends once, with null at the body's end", async () => {
    const body = new PassThrough();
    const seen: string[] = [];
    const ended = new Promise<Error | null>((resolve) =>
      readEventStream(body, 1024, (e) => seen.push(e.data), resolve),
    );
    body.write("data: 1\n\n");
    body.write("data: 2\n");
    body.end("\n");
    expect(await ended).toBeNull();
    expect(seen).toEqual(["1", "2"]);
  });

  it("an event over the cap ends the read with FrameTooLargeError, though it never came whole", async () => {
    const body = new PassThrough();
    const seen: string[] = [];
    const ended = new Promise<Error | null>((resolve) =>
      readEventStream(body, 64, (e) => seen.push(e.data), resolve),
    );
    body.write("data: small\n\n");
    body.write(`data: ${"x".repeat(100)}`);
    const error = await ended;
    expect(error).toBeInstanceOf(FrameTooLargeError);
    expect(seen).toEqual(["small"]);
  });

  it("a body that breaks ends the read with its error", async () => {
    const body = new PassThrough();
    const ended = new Promise<Error | null>((resolve) => readEventStream(body, 1024, () => {}, resolve));
    body.destroy(new Error("reset"));
    expect((await ended)?.message).toBe("reset");
  });
});
