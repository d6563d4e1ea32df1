/** The one JSON body reader and the one reading of `X-Forwarded-Proto`, row by row. */
import { describe, expect, it } from "vitest";
import { forwardedHttps, MAX_REQUEST_BODY_BYTES, readJsonBody } from "./request";

function post(body: BodyInit | null, headers: Record<string, string> = {}): Request {
  return new Request("http://127.0.0.1:3000/x", {
    method: "POST",
    body,
    headers,
    duplex: "half",
  } as RequestInit);
}

/** A body stream of `chunks` bytes each, `count` times, with no declared length. */
function chunked(chunk: number, count: number): ReadableStream<Uint8Array> {
  let sent = 0;
  return new ReadableStream<Uint8Array>({
    pull(controller) {
      if (sent++ === count) controller.close();
      else controller.enqueue(new Uint8Array(chunk).fill(0x20));
    },
  });
}

describe("readJsonBody", () => {
  it("the cap is 4 MiB unless told otherwise", () => {
    expect(MAX_REQUEST_BODY_BYTES).toBe(4 * 1024 * 1024);
  });

  it("a JSON body is its value, multi-byte characters split across chunks included", async () => {
    expect(await readJsonBody(post('{"a":[1,"é"]}'))).toEqual({ ok: true, value: { a: [1, "é"] } });
    const bytes = new TextEncoder().encode('{"a":"é"}');
    let i = 0;
    const oneByteAtATime = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (i === bytes.length) controller.close();
        else controller.enqueue(bytes.slice(i, ++i));
      },
    });
    expect(await readJsonBody(post(oneByteAtATime))).toEqual({ ok: true, value: { a: "é" } });
  });

  it.each([
    ["empty", ""],
    ["no body at all", null],
    ["not JSON", "{nope"],
  ])("%s is not_json", async (_, body) => {
    expect(await readJsonBody(post(body))).toEqual({ ok: false, problem: "not_json" });
  });

  it("a declared Content-Length over the cap is too_large", async () => {
    const req = post("{}", { "content-length": "11" });
    expect(await readJsonBody(req, 10)).toEqual({ ok: false, problem: "too_large" });
  });

  it("a stream that passes the cap is too_large; exactly the cap is read", async () => {
    expect(await readJsonBody(post(chunked(4, 3)), 11)).toEqual({ ok: false, problem: "too_large" });
    // Twelve spaces are not JSON, but they were read: the cap let them through.
    expect(await readJsonBody(post(chunked(4, 3)), 12)).toEqual({ ok: false, problem: "not_json" });
  });
});

describe("forwardedHttps", () => {
  it.each([
    [undefined, false],
    ["https", true],
    ["http", false],
    ["https, http", true],
    [" https ,http", true],
    ["http, https", false],
    ["HTTPS", false],
    ["wss", false],
  ])("X-Forwarded-Proto %j → %s", (value, expected) => {
    const headers = new Headers(value === undefined ? {} : { "x-forwarded-proto": value });
    expect(forwardedHttps(headers)).toBe(expected);
  });
});
