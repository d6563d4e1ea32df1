/**
 * A JSON answer read every way a `Response` is read (Next streams its `body`, tests call
 * `json()`), once each, with its status and headers.
 */
import { describe, expect, it } from "vitest";
import { JsonResponse } from "./json-response";

const answer = () => new JsonResponse(JSON.stringify({ ok: "é✓" }), { status: 202, headers: { "X-A": "1" } });

describe("JsonResponse", () => {
  it("reads as JSON, text, bytes or a stream, with its status and a JSON content type", async () => {
    const a = answer();
    expect(a.status).toBe(202);
    expect(a.headers.get("content-type")).toBe("application/json");
    expect(a.headers.get("x-a")).toBe("1");
    expect(await a.json()).toEqual({ ok: "é✓" });
    expect(await answer().text()).toBe('{"ok":"é✓"}');
    expect(Buffer.from(await answer().arrayBuffer()).toString("utf8")).toBe('{"ok":"é✓"}');
    // As Next passes a handler's answer on: its body as a stream, into a new Response.
    const passed = answer();
    expect(await new Response(passed.body, passed).json()).toEqual({ ok: "é✓" });
  });

  it("is read once, as any Response; a clone is read apart", async () => {
    const a = answer();
    const copy = a.clone();
    expect(a.bodyUsed).toBe(false);
    await a.text();
    expect(a.bodyUsed).toBe(true);
    await expect(a.json()).rejects.toThrow(TypeError);
    expect(() => a.clone()).toThrow(TypeError);
    expect(await copy.json()).toEqual({ ok: "é✓" });
    const streamed = answer();
    const reader = streamed.body.getReader();
    expect(streamed.bodyUsed).toBe(true);
    reader.releaseLock();
  });
});
