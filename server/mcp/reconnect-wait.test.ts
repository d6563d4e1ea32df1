import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import {
  cleanUp,
  expectGatehouseError,
  FIXTURES,
  gatehouse,
  Harness,
  rejection,
  stdioServer,
  tempDir,
  text,
} from "@/test/support/mcp-harness";
import type { ReconnectWait } from "./manager";

/**
 * A call asked to wait for a server that is reconnecting (`McpManager.callTool`'s `reconnect`),
 * against real fixture servers: it waits for `ready`, no longer than the server's `timeoutMs`, and
 * not at all for a server that is not coming back by itself.
 */

/** Per-test timeout: the machine has 2 cores and every test starts real processes. */
const SLOW = 20_000;

afterEach(cleanUp);

describe("a call for a server that is reconnecting", () => {
  it(
    "a call asked to wait for a server in backoff runs once it is ready again, and says what it waited",
    async () => {
      const runsFile = join(tempDir(), "runs.txt");
      const harness = new Harness(
        gatehouse([
          stdioServer("frail", join(FIXTURES, "dies-after-work.mjs"), { env: { RUNS_FILE: runsFile } }),
        ]),
      );
      await harness.manager.start();
      const ready = await harness.waitForState("frail", "ready");
      await rejection(harness.manager.callTool("frail", "write_then_die", { text: "a" }), performance.now());
      await harness.waitForState("frail", "backoff", ready.index + 1);

      const waits: ReconnectWait[] = [];
      const result = await harness.manager.callTool(
        "frail",
        "echo",
        { text: "back" },
        { reconnect: { onWaited: (w) => waits.push(w) } },
      );
      expect(text(result)).toBe("echo: back");
      expect(waits).toHaveLength(1);
      expect(waits[0]).toMatchObject({ from: "backoff", to: "ready" });
    },
    SLOW,
  );

  it(
    "a call asked to wait for a server that never comes back fails as unavailable after its timeoutMs",
    async () => {
      const missing = join(tempDir(), "no-such-server");
      const harness = new Harness(
        gatehouse([stdioServer("ghost", "", { command: missing, args: [], timeoutMs: 300 })]),
      );
      await harness.manager.start();
      await harness.waitForState("ghost", "backoff");
      const waits: ReconnectWait[] = [];
      const { error } = await rejection(
        harness.manager.callTool("ghost", "x", {}, { reconnect: { onWaited: (w) => waits.push(w) } }),
        performance.now(),
      );
      expectGatehouseError(error, "server_unavailable");
      expect(waits).toHaveLength(1);
      expect(waits[0]?.to).not.toBe("ready");
    },
    SLOW,
  );

  it(
    "a call for a stopped server fails at once even when asked to wait, and waits for nothing",
    async () => {
      const harness = new Harness(gatehouse([stdioServer("env", join(FIXTURES, "env-echo.mjs"))]));
      await harness.manager.start();
      await harness.waitForState("env", "ready");
      await harness.manager.get("env").stop();
      const waits: ReconnectWait[] = [];
      const { error } = await rejection(
        harness.manager.callTool("env", "pid", {}, { reconnect: { onWaited: (w) => waits.push(w) } }),
        performance.now(),
      );
      expectGatehouseError(error, "server_unavailable");
      expect(waits).toEqual([]);
    },
    SLOW,
  );
});
