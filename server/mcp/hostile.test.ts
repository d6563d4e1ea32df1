import { spawn } from "node:child_process";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { freePort, httpServerConfig } from "@/test/support/http-servers";
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
import {
  eraStdio,
  Fixture,
  type FixtureEra,
  httpFlood,
  killFixtures,
  mib,
  poll,
  SLOW,
  sampled,
} from "./hostile-fixtures";

/**
 * The MCP manager against hostile servers (PRODUCT.md §3): each test starts a real fixture
 * program from test/fixtures/servers with one misbehaviour, whose header comment says what a
 * correct host must do, and runs once per protocol era: as a 2025 server, and started with
 * `--modern` as a modern-only 2026-07-28 server (modern-era.mjs), so a server that becomes ready
 * was dialled in that era; each test also checks that the connection says so. Where a
 * misbehaviour means something else in an era, {@link ERAS} says what, and the fixture's header
 * says why. Nothing of ours is mocked; waits are bounded waits on events, or short polls with a
 * deadline where no event exists (a stdio server's stderr lines).
 */

interface Era extends FixtureEra {
  /** The revision the connection reports once ready. */
  readonly version: RegExp;
  /**
   * What Gatehouse does with requests a server sends it (impostor.mjs): answered on 2025; the
   * 2026-07-28 revision has no server-to-client requests (what a server needs from the client
   * travels inside an `input_required` result), so there they are dropped unanswered.
   */
  readonly serverRequests: { readonly answered: boolean; readonly title: string };
  /**
   * The tools of empty-result.mjs and what the agent hears from each. With `--modern` it has two:
   * `blank` (`content: []`, well-formed and empty) and `nothing` (no `content` at all, which that
   * revision's schema requires, so the SDK refuses the result as malformed before Gatehouse sees
   * it: the agent still hears that the answer held none, not what the SDK's schema check printed).
   */
  readonly emptyResults: readonly { readonly tool: string; readonly message: string | RegExp }[];
}

const ERAS: readonly Era[] = [
  {
    name: "2025",
    args: [],
    version: /^2025-/,
    serverRequests: {
      answered: true,
      title: "ping and roots/list are answered, sampling and elicitation refused",
    },
    emptyResults: [{ tool: "nothing", message: "empty result" }],
  },
  {
    name: "2026-07-28",
    args: ["--modern"],
    version: /^2026-07-28$/,
    serverRequests: { answered: false, title: "the requests are dropped unanswered" },
    emptyResults: [
      { tool: "blank", message: "empty result" },
      { tool: "nothing", message: /returned an? (empty|malformed) result/ },
    ],
  },
];

afterEach(killFixtures);

/** A JSON-RPC response Gatehouse sent the impostor, as it reports it back. */
type Sent = { id: unknown; result?: unknown; error?: { code: unknown; message: unknown } };
/** The text of impostor.mjs's real answer: `answers` on 2025, `protocolVersion` and `received` with `--modern`. */
type ImpostorAnswer = {
  callId: number | string;
  answers?: Record<string, Sent>;
  protocolVersion?: string;
  received?: unknown[];
};

describe("impostor answers", () => {
  for (const era of ERAS) {
    it(
      `on a ${era.name} connection, server requests and stray frames carrying the call's id never answer it: ${era.serverRequests.title}, the real answer resolves the call`,
      async () => {
        const recorded = recordingLogger();
        const harness = new Harness(
          gatehouse([eraStdio(era, "impostor", join(FIXTURES, "impostor.mjs"))]),
          undefined,
          recorded.log,
        );
        await harness.manager.start();
        const ready = await harness.waitForState("impostor", "ready");
        expect(ready.snapshot.protocolVersion).toMatch(era.version);

        // Only the fixture's real answer carries this JSON: not the empty frame, the unknown-id
        // response, nor any of the four requests that carried the call's id.
        const call = async () => {
          const result = await harness.manager.callTool("impostor", "answer", {});
          expect(result.isError).toBeFalsy();
          return JSON.parse(text(result)) as ImpostorAnswer;
        };
        // None of it costs the connection: no state change since ready.
        const unharmed = () => {
          expect(harness.manager.get("impostor").snapshot().state).toBe("ready");
          expect(harness.statesOf("impostor", ready.index + 1)).toEqual([]);
        };
        const first = await call();
        unharmed();
        const second = await call();
        unharmed();

        if (era.serverRequests.answered) {
          const { callId, answers = {} } = first;
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
          expect(second.answers?.ping?.result).toEqual({});
        } else {
          expect(first.callId).toEqual(expect.anything());
          expect(first.protocolVersion).toMatch(era.version);
          expect(first.received).toEqual([]);
          // Gatehouse wrote no answer to the four (each would have carried the first call's id).
          // stdin is one ordered pipe, so an answer written before the second call would have
          // reached the fixture before it.
          expect(second.callId).not.toEqual(first.callId);
          expect(second.received).toEqual([]);
          // The SDK reports each dropped request; none reaches the log above debug, so a server
          // cannot fill it one line per request.
          const dropped = recorded.lines.filter((l) => l.includes("Dropped inbound"));
          expect(dropped.filter((l) => l.startsWith("debug "))).not.toEqual([]);
          expect(dropped.filter((l) => !l.startsWith("debug "))).toEqual([]);
        }
      },
      SLOW,
    );

    it(
      `on a ${era.name} connection, a tool call answered with an empty result is an upstream error, never an empty success`,
      async () => {
        const harness = new Harness(gatehouse([eraStdio(era, "hollow", join(FIXTURES, "empty-result.mjs"))]));
        await harness.manager.start();
        const ready = await harness.waitForState("hollow", "ready");
        expect(ready.snapshot.protocolVersion).toMatch(era.version);

        for (const { tool, message } of era.emptyResults) {
          const { error } = await rejection(harness.manager.callTool("hollow", tool, {}), performance.now());
          const e = expectGatehouseError(error, "upstream_error");
          expect(e.message).toContain("hollow");
          expect(e.message).toMatch(message);
          expect(e.message).not.toContain("invalid_type");
        }
      },
      SLOW,
    );
  }
});

describe("stdio flood", () => {
  const maxFrameBytes = 4 * MiB;
  /** The same allowance as for HTTP floods below (young generation and allocator slack). */
  const allowance = 48 * MiB;

  for (const era of ERAS) {
    it(
      `on a ${era.name} connection, a stdio line of ~300 MB without a newline is refused past maxFrameBytes: the call fails at once, RSS stays within two frames`,
      async () => {
        const harness = new Harness(
          gatehouse([
            eraStdio(era, "flood", join(FIXTURES, "flood.mjs"), {
              maxFrameBytes,
              timeoutMs: 30_000,
              env: { FLOOD_BYTES: String(300 * MiB) },
            }),
          ]),
        );
        await harness.manager.start();
        const ready = await harness.waitForState("flood", "ready");
        expect(ready.snapshot.protocolVersion).toMatch(era.version);
        const { outcome, before, peak, growth } = await sampled(() =>
          harness.manager.callTool("flood", "flood", {}),
        );
        console.log(
          `[figures] stdio flood (${era.name}): call rejected after ${outcome.ms.toFixed(0)} ms (timeoutMs 30000); ` +
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
  }
});

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

  for (const era of ERAS) {
    for (const [mode, what] of [
      ["sse-event", "one SSE event"],
      ["json-body", "a JSON response body"],
    ] as const) {
      it(
        `on a ${era.name} connection, ${what} of ~300 MB is refused past maxFrameBytes: the call fails at once, RSS stays within two frames, the server backs off`,
        async () => {
          const { fixture, url } = await httpFlood(mode, era);
          const harness = new Harness(
            gatehouse([httpServerConfig("flood", url, { maxFrameBytes, timeoutMs: 30_000 })]),
          );
          await harness.manager.start();
          const ready = await harness.waitForState("flood", "ready");
          expect(ready.snapshot.protocolVersion).toMatch(era.version);

          const { outcome, before, peak, growth } = await sampled(() =>
            harness.manager.callTool("flood", "flood", {}),
          );
          const { error, ms } = outcome;
          const sent = await fixture.waitForOutput(
            "stderr",
            /flood (stopped by the client|complete) after (\d+) bytes/,
          );
          console.log(
            `[figures] http flood (${mode}, ${era.name}): call rejected after ${ms.toFixed(0)} ms (timeoutMs 30000); ` +
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
  }
});

describe("broken streams", () => {
  for (const era of ERAS) {
    for (const [mode, what] of [
      ["sse-end", "ends"],
      ["sse-reset", "breaks"],
    ] as const) {
      it(
        `on a ${era.name} connection, an SSE response that ${what} before the answer fails the call at once, not at its timeout`,
        async () => {
          const { url } = await httpFlood(mode, era);
          const harness = new Harness(gatehouse([httpServerConfig("broken", url, { timeoutMs: 30_000 })]));
          await harness.manager.start();
          const ready = await harness.waitForState("broken", "ready");
          expect(ready.snapshot.protocolVersion).toMatch(era.version);

          const t0 = performance.now();
          const { error, ms } = await rejection(harness.manager.callTool("broken", "flood", {}), t0);
          console.log(
            `[figures] broken stream (${mode}, ${era.name}): call rejected after ${ms.toFixed(0)} ms (timeoutMs 30000)`,
          );
          const e = expectGatehouseError(error, "upstream_error");
          expect(e.message).toContain("its answer did not arrive whole");
          expect(ms).toBeLessThan(2_000);
        },
        SLOW,
      );
    }
  }
});

describe("legacy HTTP+SSE transport", () => {
  // HTTP+SSE is a 2024 transport that the 2026-07-28 revision has no leg for, so it has no modern
  // counterpart: the case for that era is that negotiation leaves such a server on 2025.
  it(
    "on a 2025 connection only, server-everything in sse mode stays on a 2025 revision, becomes ready, lists echo and echoes",
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
        gatehouse([httpServerConfig("legacy", `http://127.0.0.1:${port}/sse`, { transport: "sse" })]),
      );
      await harness.manager.start();
      const { snapshot } = await harness.waitForState("legacy", "ready");
      expect(snapshot.serverInfo?.name).toBeTruthy();
      expect(snapshot.protocolVersion).toMatch(/^2025-/);
      expect(harness.tools.get("legacy")?.map((t) => t.name)).toContain("echo");
      const result = await harness.manager.callTool("legacy", "echo", { message: "hello over legacy sse" });
      expect(text(result)).toBe("Echo: hello over legacy sse");
    },
    SLOW,
  );
});

describe("silent server", () => {
  for (const era of ERAS) {
    it(
      `on a ${era.name} connection, a call to a silent server times out at timeoutMs with notifications/cancelled, while listing and calling another server stay prompt`,
      async () => {
        const timeoutMs = 800;
        const harness = new Harness(
          gatehouse([
            eraStdio(era, "silent", join(FIXTURES, "silent-cancel.mjs"), { timeoutMs }),
            // The other server is the 2025 demo in both eras: a hung server holds up no server of either era.
            stdioServer("demo", DEMO, { env: { DEMO_STATE_FILE: join(tempDir(), "demo-state.json") } }),
          ]),
        );
        await harness.manager.start();
        const [silentReady] = await Promise.all([
          harness.waitForState("silent", "ready"),
          harness.waitForState("demo", "ready"),
        ]);
        expect(silentReady.snapshot.protocolVersion).toMatch(era.version);

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
          `[figures] silent (${era.name}): upstream_timeout after ${ms.toFixed(0)} ms (timeoutMs ${timeoutMs}); ` +
            `meanwhile list() took ${listMs.toFixed(1)} ms, a demo call ${otherMs.toFixed(1)} ms`,
        );
        expect(listMs).toBeLessThan(200);
        expect(otherMs).toBeLessThan(200);
        expect(expectGatehouseError(error, "upstream_timeout").message).toContain(`${timeoutMs} ms`);
        expect(ms).toBeGreaterThanOrEqual(timeoutMs * 0.9);
        expect(ms).toBeLessThanOrEqual(timeoutMs * 1.1);

        // Over stdio both revisions cancel with notifications/cancelled.
        const silent = harness.manager.get("silent");
        const line = await poll("cancellation on the silent server's stderr", () =>
          silent.snapshot().stderrTail.find((l) => l.startsWith("cancelled ")),
        );
        expect(line).toMatch(/^cancelled \S+$/);
      },
      SLOW,
    );
  }
});
