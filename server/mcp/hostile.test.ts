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
  rejection,
  stdioServer,
  tempDir,
  text,
} from "@/test/support/mcp-harness";
import { Fixture, httpServer, killFixtures, mib, poll, SLOW } from "./hostile-fixtures";

/**
 * The MCP manager against hostile servers (PRODUCT.md §3): each test starts a real fixture
 * program from test/fixtures/servers with one misbehaviour, whose header comment says what a
 * correct host must do. Nothing of ours is mocked; waits are bounded waits on events, or short
 * polls with a deadline where no event exists (a stdio server's stderr lines).
 */

afterEach(killFixtures);

describe("impostor answers", () => {
  it(
    "server requests and stray frames carrying the call's id never answer it: ping and roots/list are answered, sampling and elicitation refused, the real answer resolves the call",
    async () => {
      const harness = new Harness(gatehouse([stdioServer("impostor", join(FIXTURES, "impostor.mjs"))]));
      harness.manager.start();
      const ready = await harness.waitForState("impostor", "ready");

      const result = await harness.manager.callTool("impostor", "answer", {});
      expect(result.isError).toBeFalsy();
      // The call resolved with the fixture's real answer (only it carries this JSON), not with
      // the empty frame, the unknown-id response or any of the server's own requests.
      const { callId, answers } = JSON.parse(text(result)) as {
        callId: number | string;
        answers: Record<
          string,
          { id: unknown; result?: unknown; error?: { code: unknown; message: unknown } }
        >;
      };
      // Every server request carried the pending call's id, and so did Gatehouse's answers to them.
      for (const answer of Object.values(answers)) expect(answer.id).toBe(callId);
      expect(Object.keys(answers).sort()).toEqual([
        "elicitation/create",
        "ping",
        "roots/list",
        "sampling/createMessage",
      ]);
      expect(answers.ping).toEqual({ jsonrpc: "2.0", id: callId, result: {} });
      expect(answers["roots/list"]).toEqual({ jsonrpc: "2.0", id: callId, result: { roots: [] } });
      for (const refused of ["sampling/createMessage", "elicitation/create"]) {
        const answer = answers[refused];
        expect(answer).not.toHaveProperty("result");
        expect(answer?.error).toEqual({ code: expect.any(Number), message: expect.any(String) });
      }

      // None of it cost the connection: no state change since ready, and it still serves calls.
      expect(harness.manager.get("impostor").snapshot().state).toBe("ready");
      expect(harness.statesOf("impostor", ready.index + 1)).toEqual([]);
      const again = await harness.manager.callTool("impostor", "answer", {});
      expect(JSON.parse(text(again)).answers.ping.result).toEqual({});
      expect(harness.statesOf("impostor", ready.index + 1)).toEqual([]);
    },
    SLOW,
  );

  it(
    "a tool call answered with an empty result is an upstream error, never an empty success",
    async () => {
      const harness = new Harness(gatehouse([stdioServer("hollow", join(FIXTURES, "empty-result.mjs"))]));
      harness.manager.start();
      await harness.waitForState("hollow", "ready");

      const { error } = await rejection(harness.manager.callTool("hollow", "nothing", {}), performance.now());
      const e = expectGatehouseError(error, "upstream_error");
      expect(e.message).toContain("hollow");
      expect(e.message).toContain("empty result");
    },
    SLOW,
  );
});

describe("stdio flood", () => {
  const maxFrameBytes = 4 * MiB;
  /** The same allowance as for HTTP floods below (young generation and allocator slack). */
  const allowance = 48 * MiB;

  it(
    "a stdio line of ~300 MB without a newline is refused past maxFrameBytes: the call fails at once, RSS stays within two frames",
    async () => {
      const harness = new Harness(
        gatehouse([
          stdioServer("flood", join(FIXTURES, "flood.mjs"), {
            maxFrameBytes,
            timeoutMs: 30_000,
            env: { FLOOD_BYTES: String(300 * MiB) },
          }),
        ]),
      );
      harness.manager.start();
      const ready = await harness.waitForState("flood", "ready");
      const before = process.memoryUsage().rss;
      let peak = before;
      const sample = () => {
        peak = Math.max(peak, process.memoryUsage().rss);
      };
      const sampler = setInterval(sample, 5);
      const t0 = performance.now();
      let outcome: { error: unknown; ms: number };
      try {
        outcome = await rejection(harness.manager.callTool("flood", "flood", {}), t0);
      } finally {
        clearInterval(sampler);
        sample();
      }
      const growth = peak - before;
      console.log(
        `[figures] stdio flood: call rejected after ${outcome.ms.toFixed(0)} ms (timeoutMs 30000); ` +
          `RSS before ${mib(before)} MiB, peak ${mib(peak)} MiB, growth ${mib(growth)} MiB ` +
          `(limit ${mib(2 * maxFrameBytes + allowance)} MiB)`,
      );
      const e = expectGatehouseError(outcome.error, "upstream_error");
      // The agent hears that the connection failed; why (the frame cap) is on the status.
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

/** Starts test/fixtures/servers/http-flood.mjs in `mode`; resolves once it listens. */
async function httpFlood(mode: string): Promise<{ fixture: Fixture; url: string }> {
  const fixture = new Fixture(
    spawn(NODE, [join(FIXTURES, "http-flood.mjs")], {
      env: { ...process.env, PORT: "0", MODE: mode },
      stdio: ["ignore", "pipe", "pipe"],
    }),
  );
  const match = await fixture.waitForOutput("stdout", /listening (\d+)\n/);
  return { fixture, url: `http://127.0.0.1:${match[1]}/mcp` };
}

describe("HTTP flood", () => {
  const maxFrameBytes = 4 * MiB;
  /**
   * RSS allowed on top of two frames, independent of the frame size. Reading megabytes at
   * full speed makes V8 grow its young generation to its Node 20 maximum, two 16 MiB
   * semi-spaces whose pages stay resident after a scavenge: up to 32 MiB. On top come 64 KiB
   * network chunks that are already garbage but not yet collected, and malloc'd memory
   * (llhttp, TextDecoder) that glibc keeps: seen up to ~16 MiB. Measured with the cap at
   * 4 MiB: growth 5-49 MiB (8-22 MiB with --max-semi-space-size=1); without an effective cap
   * (maxFrameBytes 512 MiB) the same floods grow RSS by 665 MiB (SSE) and 1166 MiB (JSON).
   */
  const allowance = 48 * MiB;

  for (const [mode, what] of [
    ["sse-event", "one SSE event"],
    ["json-body", "a JSON response body"],
  ] as const) {
    it(
      `${what} of ~300 MB is refused past maxFrameBytes: the call fails at once, RSS stays within two frames, the server backs off`,
      async () => {
        const { fixture, url } = await httpFlood(mode);
        const harness = new Harness(
          gatehouse([httpServer("flood", url, { transport: "http", maxFrameBytes, timeoutMs: 30_000 })]),
        );
        harness.manager.start();
        const ready = await harness.waitForState("flood", "ready");

        const before = process.memoryUsage().rss;
        let peak = before;
        const sample = () => {
          peak = Math.max(peak, process.memoryUsage().rss);
        };
        const sampler = setInterval(sample, 5);
        const t0 = performance.now();
        let outcome: { error: unknown; ms: number };
        try {
          outcome = await rejection(harness.manager.callTool("flood", "flood", {}), t0);
        } finally {
          clearInterval(sampler);
          sample();
        }
        const { error, ms } = outcome;
        const growth = peak - before;
        const sent = await fixture.waitForOutput(
          "stderr",
          /flood (stopped by the client|complete) after (\d+) bytes/,
        );
        console.log(
          `[figures] http flood (${mode}): call rejected after ${ms.toFixed(0)} ms (timeoutMs 30000); ` +
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

describe("broken streams", () => {
  for (const [mode, what] of [
    ["sse-end", "ends"],
    ["sse-reset", "breaks"],
  ] as const) {
    it(
      `an SSE response that ${what} before the answer fails the call at once, not at its timeout`,
      async () => {
        const { url } = await httpFlood(mode);
        const harness = new Harness(
          gatehouse([httpServer("broken", url, { transport: "http", timeoutMs: 30_000 })]),
        );
        harness.manager.start();
        await harness.waitForState("broken", "ready");

        const t0 = performance.now();
        const { error, ms } = await rejection(harness.manager.callTool("broken", "flood", {}), t0);
        console.log(
          `[figures] broken stream (${mode}): call rejected after ${ms.toFixed(0)} ms (timeoutMs 30000)`,
        );
        const e = expectGatehouseError(error, "upstream_error");
        expect(e.message).toContain("its answer did not arrive whole");
        expect(ms).toBeLessThan(2_000);
      },
      SLOW,
    );
  }
});

describe("legacy HTTP+SSE transport", () => {
  it(
    "server-everything in sse mode becomes ready, lists echo and echoes",
    async () => {
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
      expect(snapshot.serverInfo?.name).toBeTruthy();
      expect(harness.tools.get("legacy")?.map((t) => t.name)).toContain("echo");
      const result = await harness.manager.callTool("legacy", "echo", { message: "hello over legacy sse" });
      expect(text(result)).toBe("Echo: hello over legacy sse");
    },
    SLOW,
  );
});

describe("silent server", () => {
  it(
    "a call to a silent server times out at timeoutMs with notifications/cancelled, while listing and calling another server stay prompt",
    async () => {
      const timeoutMs = 800;
      const harness = new Harness(
        gatehouse([
          stdioServer("silent", join(FIXTURES, "silent-cancel.mjs"), { timeoutMs }),
          stdioServer("demo", DEMO, { env: { DEMO_STATE_FILE: join(tempDir(), "demo-state.json") } }),
        ]),
      );
      harness.manager.start();
      await Promise.all([harness.waitForState("silent", "ready"), harness.waitForState("demo", "ready")]);

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
        `[figures] silent: upstream_timeout after ${ms.toFixed(0)} ms (timeoutMs ${timeoutMs}); ` +
          `meanwhile list() took ${listMs.toFixed(1)} ms, a demo call ${otherMs.toFixed(1)} ms`,
      );
      expect(listMs).toBeLessThan(200);
      expect(otherMs).toBeLessThan(200);
      expect(expectGatehouseError(error, "upstream_timeout").message).toContain(`${timeoutMs} ms`);
      expect(ms).toBeGreaterThanOrEqual(timeoutMs * 0.9);
      expect(ms).toBeLessThanOrEqual(timeoutMs * 1.1);

      const silent = harness.manager.get("silent");
      const line = await poll("cancellation on the silent server's stderr", () =>
        silent.snapshot().stderrTail.find((l) => l.startsWith("cancelled ")),
      );
      expect(line).toMatch(/^cancelled \S+$/);
    },
    SLOW,
  );
});
