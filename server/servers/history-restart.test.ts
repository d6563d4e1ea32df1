/**
 * The runtime keeps servers' history in its store: a real runtime with the demo server,
 * stopped and started again on the same directory as a restart of Gatehouse does.
 */
import { describe, expect, it } from "vitest";
import { startTestRuntime } from "@/test/support/runtime";

describe("a server's history across a Gatehouse restart", () => {
  it("shows the earlier run's changes before this run's, each run's first change marked as a start", async () => {
    const first = await startTestRuntime();
    const earlier = first.runtime.manager.get("demo").snapshot().history;
    expect(earlier.map((e) => e.state)).toEqual(["connecting", "ready"]);
    const dir = first.dir;
    await first.stop({ keepDir: true });

    const second = await startTestRuntime({
      dir,
      ...(first.databaseUrl ? { databaseUrl: first.databaseUrl } : {}),
    });
    try {
      const history = second.runtime.manager.get("demo").snapshot().history;
      // The earlier run's changes (a stop records none), then this run's, which starts afresh.
      expect(history.slice(0, 2)).toEqual(earlier);
      const starts = history.filter((e) => e.started).map((e) => e.state);
      expect(starts).toEqual(["connecting", "connecting"]);
      expect(history.at(-1)?.state).toBe("ready");
      expect(history.findLastIndex((e) => e.started)).toBeGreaterThanOrEqual(2);
    } finally {
      await second.stop();
    }
  });
});
