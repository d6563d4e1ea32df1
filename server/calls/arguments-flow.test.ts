/**
 * Through the real `/api/calls` route: arguments over the size bounds are refused as
 * `invalid_arguments`, recorded without their bulk, and never break a later listing.
 */
import { describe, expect, it } from "vitest";
import type { CallView } from "@/lib/api-types";
import { ADD_NOTE, bodyOf, request } from "@/test/support/runtime";
import { ARGUMENT_LIMITS } from "./arguments";
import { callRow, type ErrorBody, people, runtimes } from "./call-fixtures";

const { start } = runtimes();

/** `POST /api/calls` with a body written by hand (some of these cannot be written by JSON.stringify). */
function post(bearer: string, argumentsJson: string): Promise<Response> {
  return request("POST", "/api/calls", {
    bearer,
    body: `{"tool":${JSON.stringify(ADD_NOTE)},"arguments":${argumentsJson}}`,
  });
}

async function listed(bearer: string): Promise<CallView[]> {
  const res = await request("GET", "/api/calls", { bearer });
  expect(res.status).toBe(200);
  return (await bodyOf<{ calls: CallView[] }>(res)).calls;
}

describe("arguments over the bounds, end to end", () => {
  it("a deeply nested argument is refused with 422, and the calls stay listable", async () => {
    const rt = await start();
    const { agent } = await people(rt);
    const levels = 100_000;
    const res = await post(agent, `{"text":"x","deep":${"[".repeat(levels)}${"]".repeat(levels)}}`);
    expect(res.status).toBe(422);
    const body = await bodyOf<ErrorBody>(res);
    expect(body.error).toEqual({
      code: "invalid_arguments",
      message: `arguments are nested deeper than ${ARGUMENT_LIMITS.maxDepth} levels, the most a call may send`,
    });
    const calls = await listed(agent);
    expect(calls.map((c) => c.status)).toEqual(["refused"]);
    expect(calls[0]?.arguments).toEqual({ "(not kept)": body.error.message });
  });

  it("arguments over 1 MiB are refused with their message and not stored", async () => {
    const rt = await start();
    const { agent } = await people(rt);
    const res = await post(agent, JSON.stringify({ text: "x".repeat(ARGUMENT_LIMITS.maxBytes) }));
    expect(res.status).toBe(422);
    const body = await bodyOf<ErrorBody>(res);
    expect(body.error.message).toBe(
      "arguments are over 1 MiB of JSON (1048576 bytes), the most a call may send",
    );
    const [refused] = await listed(agent);
    expect(refused?.status).toBe("refused");
    expect((await callRow(rt, refused?.id ?? ""))?.arguments.length).toBeLessThan(200);
  });
});
