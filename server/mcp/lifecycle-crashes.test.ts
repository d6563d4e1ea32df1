/**
 * Crashes and restarts against real misbehaving programs: a crash loop ends in "failed" and
 * starts no more processes until the owner reconnects, and the backoff exponent resets only
 * after the connection has stayed ready (fake clock, real processes). Shared bookkeeping and
 * probes are in lifecycle-fixtures.ts.
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it, vi } from "vitest";
import { FIXTURES, gatehouse, Harness, tempDir } from "@/test/support/mcp-harness";
import { realSetTimeout, registerLifecycleCleanup, rejection, SLOW, stdioServer } from "./lifecycle-fixtures";
import { CRASH_LOOP, STABLE_AFTER_MS } from "./supervision";

const CRASH_ON_START = join(FIXTURES, "crash-on-start.mjs");
const CRASH_ON_CALL = join(FIXTURES, "crash-on-call.mjs");

registerLifecycleCleanup();

describe("crash loop", () => {
  /** Small steps so that five crashes take well under a second of backoff. */
  const SMALL_BACKOFF = { baseMs: 50, capMs: 200 };
  /**
   * The one fixed wait of this file, proving an absence: after "failed" no process may start.
   * Were a retry still scheduled, it would fire within capMs (200 ms) and its process would log
   * its start within a few hundred ms more even on a busy 2-core machine; 1.5 s is several
   * times that. Nothing else could be awaited: a retry that does not happen emits nothing.
   */
  const QUIET_MS = 1500;

  function starts(log: string): number {
    return existsSync(log) ? readFileSync(log, "utf8").split("\n").filter(Boolean).length : 0;
  }

  it.each(["start", "initialize"] as const)(
    "a server that dies at %s five times is failed with its last error, starts no more processes, until reconnectNow()",
    async (crashAt) => {
      const startLog = join(tempDir(), "starts.log");
      const harness = new Harness(
        gatehouse([stdioServer("loop", CRASH_ON_START, { env: { START_LOG: startLog, CRASH_AT: crashAt } })]),
        SMALL_BACKOFF,
      );
      const t0 = performance.now();
      await harness.manager.start();

      const failed = await harness.waitForState("loop", "failed");
      const failedMs = performance.now() - t0;
      const { snapshot } = failed;
      expect(snapshot.lastError).toBeTruthy();
      // Every failure is said by the process's exit, the first (at the era probe) included:
      // never the SDK's account of a negotiation the server never took part in.
      const reasons = snapshot.history.filter((h) => h.state === "backoff" || h.state === "failed");
      expect(reasons.map((h) => h.detail)).toEqual(reasons.map(() => "server process exited (code 7)"));
      expect(snapshot.nextRetryAt).toBeNull();
      expect(snapshot.history.at(-1)).toEqual({
        at: expect.any(String),
        state: "failed",
        detail: snapshot.lastError,
      });
      // Four backoffs, then the fifth crash within the window is the crash loop.
      expect(harness.statesOf("loop").filter((s) => s === "backoff")).toHaveLength(CRASH_LOOP.crashes - 1);
      expect(harness.statesOf("loop")).not.toContain("ready");
      expect(starts(startLog)).toBe(CRASH_LOOP.crashes);

      await new Promise((resolve) => realSetTimeout(resolve, QUIET_MS));
      expect(starts(startLog)).toBe(CRASH_LOOP.crashes);
      expect(harness.events).toHaveLength(failed.index + 1);
      expect(harness.manager.get("loop").snapshot().state).toBe("failed");
      const refused = await rejection(harness.manager.callTool("loop", "anything", {}));
      expect(String(refused)).toContain("failed");

      harness.manager.get("loop").reconnectNow();
      const again = await harness.waitForState("loop", "connecting", failed.index + 1);
      // The owner's reconnect starts a fresh count: the next crash is a backoff, not "failed".
      const next = await harness.waitFor("the next failure after reconnecting", () => {
        const e = harness.events
          .slice(again.index + 1)
          .find((s) => s.state === "backoff" || s.state === "failed");
        return e?.state;
      });
      expect(next).toBe("backoff");
      expect(starts(startLog)).toBe(CRASH_LOOP.crashes + 1);
      console.info(
        `[timing] crash loop (${crashAt}): failed after ${failedMs.toFixed(0)} ms and ${CRASH_LOOP.crashes} starts (backoff base ${SMALL_BACKOFF.baseMs} ms, cap ${SMALL_BACKOFF.capMs} ms); lastError "${snapshot.lastError}"`,
      );
    },
    SLOW,
  );
});

describe("backoff reset and crash window (fake clock, real processes)", () => {
  /**
   * Only the clock is faked (timers and Date); the child processes, pipes and the MCP exchange
   * are real. Crashes are made by calling `crash` on crash-on-call.mjs, retries by advancing the
   * fake clock by exactly the announced delay.
   */
  function crashyHarness(): {
    harness: Harness;
    crash(): Promise<number>;
    retry(delayMs: number): Promise<void>;
  } {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "setInterval", "clearInterval", "Date"] });
    const harness = new Harness(gatehouse([stdioServer("crashy", CRASH_ON_CALL)]));
    // No history store: started at once.
    void harness.manager.start();
    return {
      harness,
      /** Crashes the ready server; resolves with the backoff delay it announced. */
      async crash() {
        const from = harness.events.length;
        await rejection(harness.manager.callTool("crashy", "crash", {}));
        const { snapshot } = await harness.waitForState("crashy", "backoff", from);
        return Date.parse(snapshot.nextRetryAt ?? "") - Date.now();
      },
      /** Moves the clock to the retry and waits for the new connection to be ready. */
      async retry(delayMs: number) {
        const from = harness.events.length;
        vi.advanceTimersByTime(delayMs);
        await harness.waitForState("crashy", "ready", from);
      },
    };
  }

  /** The jittered delay of retry number `attempt` lies in [50 %, 100 %] of 1 s · 2^(attempt-1). */
  function expectAttempt(delayMs: number, attempt: number): void {
    const step = 1000 * 2 ** (attempt - 1);
    expect(delayMs).toBeGreaterThanOrEqual(step / 2);
    expect(delayMs).toBeLessThanOrEqual(step);
  }

  it(
    "the backoff exponent resets only once the connection has stayed ready for STABLE_AFTER_MS",
    async () => {
      const { harness, crash, retry } = crashyHarness();
      await harness.waitForState("crashy", "ready");

      const d1 = await crash();
      expectAttempt(d1, 1);
      await retry(d1);
      // Crashing again at once: the exponent grows.
      const d2 = await crash();
      expectAttempt(d2, 2);
      await retry(d2);
      // Ready for just under STABLE_AFTER_MS is not yet stable.
      vi.advanceTimersByTime(STABLE_AFTER_MS - 1);
      const d3 = await crash();
      expectAttempt(d3, 3);
      await retry(d3);
      // Ready for STABLE_AFTER_MS: the next failure starts over at the first step.
      vi.advanceTimersByTime(STABLE_AFTER_MS);
      const d4 = await crash();
      expectAttempt(d4, 1);
      expect(harness.statesOf("crashy")).not.toContain("failed");
      console.info(`[timing] backoff reset: delays ${[d1, d2, d3, d4].join(", ")} ms (fake clock)`);
    },
    SLOW,
  );

  it(
    "crashes spread wider than the crash-loop window never make the server failed",
    async () => {
      const { harness, crash, retry } = crashyHarness();
      await harness.waitForState("crashy", "ready");
      // Seven crashes, each after a stable minute: never more than three in any 3-minute window.
      const crashes = CRASH_LOOP.crashes + 2;
      for (let i = 0; i < crashes; i++) {
        vi.advanceTimersByTime(STABLE_AFTER_MS + 1000);
        const delay = await crash();
        expectAttempt(delay, 1);
        if (i < crashes - 1) await retry(delay);
      }
      expect(harness.statesOf("crashy").filter((s) => s === "backoff")).toHaveLength(crashes);
      expect(harness.statesOf("crashy")).not.toContain("failed");
    },
    SLOW,
  );
});
