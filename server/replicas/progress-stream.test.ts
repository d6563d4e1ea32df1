/**
 * The forwarding replica's reading of a holder's answer sent as NDJSON (forward.ts): progress
 * lines passed on as they come, the answer line returned, however the bytes were cut into chunks.
 */
import { Readable } from "node:stream";
import type { Progress } from "@modelcontextprotocol/client";
import { describe, expect, it } from "vitest";
import type { GuardedAnswer } from "../net/guarded-fetch";
import { lastAfterProgress, PROGRESS_STREAM } from "./forward";

/** An answer whose body arrives as `chunks`. */
function answerOf(chunks: Buffer[]): GuardedAnswer {
  return {
    status: 200,
    statusText: "OK",
    headers: new Headers({ "content-type": PROGRESS_STREAM }),
    body: Readable.from(chunks),
  };
}

describe("reading a holder's progress stream", () => {
  it("keeps a character split between two chunks whole, in progress and in the answer", async () => {
    const text = `${JSON.stringify({ progress: { progress: 1, total: 2, message: "déjà vu ✓" } })}\n${JSON.stringify({ result: { text: "naïve ✓" } })}\n`;
    const bytes = Buffer.from(text, "utf8");
    // Cut inside the three bytes of the first "✓" and inside the two of "ï".
    const firstTick = bytes.indexOf(Buffer.from("✓")) + 1;
    const diaeresis = bytes.indexOf(Buffer.from("ï")) + 1;
    const chunks = [
      bytes.subarray(0, firstTick),
      bytes.subarray(firstTick, diaeresis),
      bytes.subarray(diaeresis),
    ];
    const heard: Progress[] = [];
    const answer = await lastAfterProgress(answerOf(chunks), (p) => heard.push(p));
    expect(heard).toEqual([{ progress: 1, total: 2, message: "déjà vu ✓" }]);
    expect(answer).toEqual({ result: { text: "naïve ✓" } });
  });

  it("passes on progress lines as they come and drops ones without a numeric progress", async () => {
    const lines = [
      { progress: { progress: 1 } },
      { progress: { progress: "two" } },
      { progress: { progress: 3, message: 4 } },
      { progress: { progress: 5, total: 5 } },
      { error: { code: "upstream_error", message: "no" } },
    ];
    const heard: Progress[] = [];
    const answer = await lastAfterProgress(
      answerOf([Buffer.from(lines.map((l) => `${JSON.stringify(l)}\n`).join(""))]),
      (p) => heard.push(p),
    );
    expect(heard).toEqual([{ progress: 1 }, { progress: 5, total: 5 }]);
    expect(answer).toEqual({ error: { code: "upstream_error", message: "no" } });
  });

  it("an answer that ends before its last line is an error, not a result", async () => {
    await expect(
      lastAfterProgress(
        answerOf([Buffer.from(`${JSON.stringify({ progress: { progress: 1 } })}\n`)]),
        () => {},
      ),
    ).rejects.toThrow(/ended without/);
  });
});
