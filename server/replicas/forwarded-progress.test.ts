/**
 * A tool call forwarded to the replica holding its stdio server brings the server's progress
 * notifications back as they come, before the answer, so an agent waiting on the replica it
 * called hears them as it would had that replica held the server. `talk` (progress-talk.mjs)
 * sends `progress: i, total: count` for i = 1 … count, then answers `talked <count>`.
 *
 * Replicas exist on PostgreSQL only, so the suite runs there alone.
 */
import type { Progress } from "@modelcontextprotocol/client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testDialect } from "@/test/support/store";
import { type ReplicaPair, resultText, startPair } from "./replica-fixtures";

/** Two runtimes on a loaded 2-core machine. */
const SLOW_START = 90_000;

const onPostgres = testDialect === "postgres";
let pair: ReplicaPair | null = null;

beforeAll(async () => {
  if (onPostgres) pair = await startPair({ progress: true });
}, SLOW_START);
afterAll(async () => {
  await pair?.stop();
});

/** Calls `talk` through `on`'s manager, with what it heard. */
async function talk(on: "a" | "b", count: number): Promise<{ text: string; heard: Progress[] }> {
  if (!pair) throw new Error("the replicas did not start");
  const heard: Progress[] = [];
  const result = await pair[on].runtime.manager.callTool(
    "talk",
    "talk",
    { count, message: "working" },
    { onProgress: (p) => heard.push(p) },
  );
  return { text: resultText(result), heard };
}

describe.runIf(onPostgres)("progress of a call forwarded to the holder", () => {
  it("reaches the replica that forwarded the call, every notification in order, before the answer", async () => {
    const direct = await talk("a", 5);
    const forwarded = await talk("b", 5);
    expect(forwarded.text).toBe("talked 5");
    expect(forwarded.heard.length).toBeGreaterThan(0);
    // What the holder hears, the forwarding replica hears.
    expect(forwarded.heard).toEqual(direct.heard);
    expect(forwarded.heard.map((p) => p.progress)).toEqual(
      [...forwarded.heard.map((p) => p.progress)].sort((x, y) => x - y),
    );
    expect(forwarded.heard.every((p) => p.total === 5 && p.message === "working")).toBe(true);
  });

  it("a forwarded call its caller gives up on while progress streams fails with the caller's reason, as any cancellation", async () => {
    if (!pair) throw new Error("the replicas did not start");
    const caller = new AbortController();
    const reason = new Error("the agent left");
    const call = pair.b.runtime.manager.callTool(
      "talk",
      "talk",
      { count: 50, everyMs: 100 },
      { signal: caller.signal, onProgress: () => caller.abort(reason) },
    );
    await expect(call).rejects.toBe(reason);
  });
});
