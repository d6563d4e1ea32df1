import { spawn } from "node:child_process";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { freePort } from "@/test/support/http-servers";
import {
  DEMO,
  EVERYTHING,
  expectGatehouseError,
  FIXTURES,
  gatehouse,
  Harness,
  MiB,
  NODE,
  recordingLogger,
  rejection,
  stdioServer,
  tempDir,
  text,
} from "@/test/support/mcp-harness";
import type { ServerConfig } from "../config";
import { Fixture, httpServer, killFixtures, mib, poll, SLOW } from "./hostile-fixtures";
import type { SupervisorSnapshot } from "./supervisor";

/**
 * The guarantees of hostile.test.ts (PRODUCT.md §3) on a 2026-07-28 connection: the same fixture
 * programs started with `--modern` (test/fixtures/servers/modern-era.mjs), where they answer
 * `server/discover`, refuse `initialize` and refuse any request without the revision's `_meta`
 * envelope, so a server that becomes ready was dialled in the modern era; each test also checks
 * that the connection says so. Where a misbehaviour means something else in that era, the test
 * says what, and the fixture's header says why. Nothing of ours is mocked; waits are bounded
 * waits on events, or short polls with a deadline where no event exists.
 */

const MODERN = "2026-07-28";

/** A stdio server running `node script --modern`, otherwise as {@link stdioServer}. */
function modernStdio(name: string, script: string, over: Partial<ServerConfig> = {}): ServerConfig {
  return stdioServer(name, script, { args: [script, "--modern"], ...over });
}

function expectModern(snapshot: SupervisorSnapshot): void {
  expect(snapshot.protocolVersion).toBe(MODERN);
}

afterEach(killFixtures);

/** Runs `call`, which must reject, sampling this process's RSS every 5 ms meanwhile. */
async function sampled(call: () => Promise<unknown>) {
  const before = process.memoryUsage().rss;
  let peak = before;
  const sample = () => {
    peak = Math.max(peak, process.memoryUsage().rss);
  };
  const sampler = setInterval(sample, 5);
  let outcome: { error: unknown; ms: number };
  try {
    const t0 = performance.now();
    outcome = await rejection(call(), t0);
  } finally {
    clearInterval(sampler);
    sample();
  }
  return { outcome, before, peak, growth: peak - before };
}

describe("impostor answers (2026-07-28)", () => {
  it(
    "on a 2026-07-28 connection, server requests and stray frames carrying the call's id never answer it: the requests are dropped unanswered, the real answer resolves the call",
    async () => {
      const recorded = recordingLogger();
      const harness = new Harness(
        gatehouse([modernStdio("impostor", join(FIXTURES, "impostor.mjs"))]),
        undefined,
        recorded.log,
      );
      harness.manager.start();
      const ready = await harness.waitForState("impostor", "ready");
      expectModern(ready.snapshot);

      type Answer = { callId: number | string; protocolVersion: string; received: unknown[] };
      const first = await harness.manager.callTool("impostor", "answer", {});
      expect(first.isError).toBeFalsy();
      // Only the fixture's real answer carries this JSON: not the empty frame, the unknown-id
      // response, nor any of the four requests that carried the call's id.
      const one = JSON.parse(text(first)) as Answer;
      expect(one.callId).toEqual(expect.anything());
      expect(one.protocolVersion).toBe(MODERN);
      expect(one.received).toEqual([]);

      // The revision has no server-to-client requests: Gatehouse wrote no answer to the four
      // (each would have carried the first call's id). stdin is one ordered pipe, so an answer
      // written before the second call would have reached the fixture before it.
      const second = await harness.manager.callTool("impostor", "answer", {});
      const two = JSON.parse(text(second)) as Answer;
      expect(two.callId).not.toEqual(one.callId);
      expect(two.received).toEqual([]);

      // None of it cost the connection: no state change since ready.
      expect(harness.manager.get("impostor").snapshot().state).toBe("ready");
      expect(harness.statesOf("impostor", ready.index + 1)).toEqual([]);
      // The SDK reports each dropped request; none reaches the log above debug, so a server
      // cannot fill it one line per request.
      expect(
        recorded.lines.filter((l) => l.startsWith("debug ") && l.includes("Dropped inbound")),
      ).not.toEqual([]);
      expect(recorded.lines.filter((l) => !l.startsWith("debug ") && l.includes("Dropped inbound"))).toEqual(
        [],
      );
    },
    SLOW,
  );

  it(
    "on a 2026-07-28 connection, a tool call answered with an empty result is an upstream error, never an empty success",
    async () => {
      const harness = new Harness(gatehouse([modernStdio("hollow", join(FIXTURES, "empty-result.mjs"))]));
      harness.manager.start();
      const ready = await harness.waitForState("hollow", "ready");
      expectModern(ready.snapshot);

      // `content: []`: well-formed on this revision, and empty.
      const blank = await rejection(harness.manager.callTool("hollow", "blank", {}), performance.now());
      const b = expectGatehouseError(blank.error, "upstream_error");
      expect(b.message).toContain("hollow");
      expect(b.message).toContain("empty result");

      // No `content` at all: this revision's schema requires it, so the SDK refuses the result as
      // malformed before Gatehouse sees it. The agent still hears that the answer held none, as
      // on 2025, not what the SDK's schema check printed.
      const none = await rejection(harness.manager.callTool("hollow", "nothing", {}), performance.now());
      const n = expectGatehouseError(none.error, "upstream_error");
      expect(n.message).toContain("hollow");
      expect(n.message).toMatch(/returned an? (empty|malformed) result/);
      expect(n.message).not.toContain("invalid_type");
    },
    SLOW,
  );
});

describe("stdio flood (2026-07-28)", () => {
  const maxFrameBytes = 4 * MiB;
  /** The same allowance as in hostile.test.ts (young generation and allocator slack). */
  const allowance = 48 * MiB;

  it(
    "on a 2026-07-28 connection, a stdio line of ~300 MB without a newline is refused past maxFrameBytes: the call fails at once, RSS stays within two frames",
    async () => {
      const harness = new Harness(
        gatehouse([
          modernStdio("flood", join(FIXTURES, "flood.mjs"), {
            maxFrameBytes,
            timeoutMs: 30_000,
            env: { FLOOD_BYTES: String(300 * MiB) },
          }),
        ]),
      );
      harness.manager.start();
      const ready = await harness.waitForState("flood", "ready");
      expectModern(ready.snapshot);
      const { outcome, before, peak, growth } = await sampled(() =>
        harness.manager.callTool("flood", "flood", {}),
      );
      console.log(
        `[figures] stdio flood (2026-07-28): call rejected after ${outcome.ms.toFixed(0)} ms (timeoutMs 30000); ` +
          `RSS before ${mib(before)} MiB, peak ${mib(peak)} MiB, growth ${mib(growth)} MiB ` +
          `(limit ${mib(2 * maxFrameBytes + allowance)} MiB)`,
      );
      const e = expectGatehouseError(outcome.error, "upstream_error");
      expect(e.message).toContain("the connection failed during the request");
      expect(outcome.ms).toBeLessThan(5_000);
      expect(growth).toBeLessThanOrEqual(2 * maxFrameBytes + allowance);
      const { snapshot } = await harness.waitForState("flood", "backoff", ready.index + 1);
      expect(snapshot.lastError).toContain("maxFrameBytes");
      await harness.manager.stop();
    },
    SLOW,
  );
});

/** Starts test/fixtures/servers/http-flood.mjs --modern in `mode`; resolves once it listens. */
async function httpFlood(mode: string): Promise<{ fixture: Fixture; url: string }> {
  const fixture = new Fixture(
    spawn(NODE, [join(FIXTURES, "http-flood.mjs"), "--modern"], {
      env: { ...process.env, PORT: "0", MODE: mode },
      stdio: ["ignore", "pipe", "pipe"],
    }),
  );
  const match = await fixture.waitForOutput("stdout", /listening (\d+)\n/);
  return { fixture, url: `http://127.0.0.1:${match[1]}/mcp` };
}

describe("HTTP flood (2026-07-28)", () => {
  const maxFrameBytes = 4 * MiB;
  /** The same allowance as in hostile.test.ts, where it is explained. */
  const allowance = 48 * MiB;

  for (const [mode, what] of [
    ["sse-event", "one SSE event"],
    ["json-body", "a JSON response body"],
  ] as const) {
    it(
      `on a 2026-07-28 connection, ${what} of ~300 MB is refused past maxFrameBytes: the call fails at once, RSS stays within two frames, the server backs off`,
      async () => {
        const { fixture, url } = await httpFlood(mode);
        const harness = new Harness(
          gatehouse([httpServer("flood", url, { transport: "http", maxFrameBytes, timeoutMs: 30_000 })]),
        );
        harness.manager.start();
        const ready = await harness.waitForState("flood", "ready");
        expectModern(ready.snapshot);

        const { outcome, before, peak, growth } = await sampled(() =>
          harness.manager.callTool("flood", "flood", {}),
        );
        const { error, ms } = outcome;
        const sent = await fixture.waitForOutput(
          "stderr",
          /flood (stopped by the client|complete) after (\d+) bytes/,
        );
        console.log(
          `[figures] http flood (${mode}, 2026-07-28): call rejected after ${ms.toFixed(0)} ms (timeoutMs 30000); ` +
            `RSS before ${mib(before)} MiB, peak ${mib(peak)} MiB, growth ${mib(growth)} MiB ` +
            `(limit ${mib(2 * maxFrameBytes + allowance)} MiB); fixture ${sent[1]} after ${mib(Number(sent[2]))} MiB`,
        );

        const e = expectGatehouseError(error, "upstream_error");
        expect(e.message).toMatch(/the connection failed during the request|could not be reached/);
        expect(ms).toBeLessThan(5_000);
        expect(growth).toBeLessThanOrEqual(2 * maxFrameBytes + allowance);
        // The client hung up long before the 300 MB were sent.
        expect(sent[1]).toBe("stopped by the client");

        const { snapshot } = await harness.waitForState("flood", "backoff", ready.index + 1);
        expect(snapshot.lastError).toContain("maxFrameBytes");
        expect(snapshot.nextRetryAt).not.toBeNull();
      },
      SLOW,
    );
  }
});

describe("broken streams (2026-07-28)", () => {
  for (const [mode, what] of [
    ["sse-end", "ends"],
    ["sse-reset", "breaks"],
  ] as const) {
    it(
      `on a 2026-07-28 connection, an SSE response that ${what} before the answer fails the call at once, not at its timeout`,
      async () => {
        const { url } = await httpFlood(mode);
        const harness = new Harness(
          gatehouse([httpServer("broken", url, { transport: "http", timeoutMs: 30_000 })]),
        );
        harness.manager.start();
        const ready = await harness.waitForState("broken", "ready");
        expectModern(ready.snapshot);

        const t0 = performance.now();
        const { error, ms } = await rejection(harness.manager.callTool("broken", "flood", {}), t0);
        console.log(
          `[figures] broken stream (${mode}, 2026-07-28): call rejected after ${ms.toFixed(0)} ms (timeoutMs 30000)`,
        );
        const e = expectGatehouseError(error, "upstream_error");
        expect(e.message).toContain("its answer did not arrive whole");
        expect(ms).toBeLessThan(2_000);
      },
      SLOW,
    );
  }
});

describe("legacy HTTP+SSE transport (no 2026-07-28 counterpart)", () => {
  it(
    "server-everything in sse mode stays on a 2025 revision, becomes ready, lists echo and echoes",
    async () => {
      // HTTP+SSE is a 2024 transport: the 2026-07-28 revision has no such leg, so the modern case
      // is that negotiation leaves it alone.
      const port = await freePort();
      const fixture = new Fixture(
        spawn(NODE, [EVERYTHING, "sse"], {
          env: { ...process.env, PORT: String(port) },
          stdio: ["ignore", "pipe", "pipe"],
        }),
      );
      await fixture.waitForOutput("stderr", new RegExp(`running on port ${port}`));
      const harness = new Harness(
        gatehouse([httpServer("legacy", `http://127.0.0.1:${port}/sse`, { transport: "sse" })]),
      );
      harness.manager.start();
      const { snapshot } = await harness.waitForState("legacy", "ready");
      expect(snapshot.protocolVersion).toMatch(/^2025-/);
      expect(harness.tools.get("legacy")?.map((t) => t.name)).toContain("echo");
      const result = await harness.manager.callTool("legacy", "echo", { message: "hello over legacy sse" });
      expect(text(result)).toBe("Echo: hello over legacy sse");
    },
    SLOW,
  );
});

describe("silent server (2026-07-28)", () => {
  it(
    "on a 2026-07-28 connection, a call to a silent server times out at timeoutMs with notifications/cancelled, while listing and calling another server stay prompt",
    async () => {
      const timeoutMs = 800;
      const harness = new Harness(
        gatehouse([
          modernStdio("silent", join(FIXTURES, "silent-cancel.mjs"), { timeoutMs }),
          // The other server is the 2025 demo: a hung modern server holds up no server of either era.
          stdioServer("demo", DEMO, { env: { DEMO_STATE_FILE: join(tempDir(), "demo-state.json") } }),
        ]),
      );
      harness.manager.start();
      const [silentReady] = await Promise.all([
        harness.waitForState("silent", "ready"),
        harness.waitForState("demo", "ready"),
      ]);
      expectModern(silentReady.snapshot);

      const t0 = performance.now();
      let settled = false;
      const call = rejection(harness.manager.callTool("silent", "hang", {}), t0).finally(() => {
        settled = true;
      });

      const t1 = performance.now();
      const listed = harness.manager.list();
      const listMs = performance.now() - t1;
      const t2 = performance.now();
      const other = await harness.manager.callTool("demo", "list_notes", {});
      const otherMs = performance.now() - t2;
      // Both were measured while the silent call was still in flight.
      expect(settled).toBe(false);
      expect(listed.map((s) => [s.config.name, s.status.state])).toEqual([
        ["silent", "ready"],
        ["demo", "ready"],
      ]);
      expect(text(other)).toBe("The notebook is empty.");

      const { error, ms } = await call;
      console.log(
        `[figures] silent (2026-07-28): upstream_timeout after ${ms.toFixed(0)} ms (timeoutMs ${timeoutMs}); ` +
          `meanwhile list() took ${listMs.toFixed(1)} ms, a demo call ${otherMs.toFixed(1)} ms`,
      );
      expect(listMs).toBeLessThan(200);
      expect(otherMs).toBeLessThan(200);
      expect(expectGatehouseError(error, "upstream_timeout").message).toContain(`${timeoutMs} ms`);
      expect(ms).toBeGreaterThanOrEqual(timeoutMs * 0.9);
      expect(ms).toBeLessThanOrEqual(timeoutMs * 1.1);

      // Over stdio the revision still cancels with notifications/cancelled.
      const silent = harness.manager.get("silent");
      const line = await poll("cancellation on the silent server's stderr", () =>
        silent.snapshot().stderrTail.find((l) => l.startsWith("cancelled ")),
      );
      expect(line).toMatch(/^cancelled \S+$/);
    },
    SLOW,
  );
});
