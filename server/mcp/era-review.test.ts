/**
 * Outbound era edge cases found in review of the SDK v2 port, against real fixture processes:
 * a modern-only server that answers the 2025 handshake with -32022 (slow to start, or upgraded in
 * place), a probe whose stream breaks, a tool call the server answers with -32020 or
 * `input_required`, a listen request answered with an error that is no refusal, and two
 * Reconnects in a row. Waits are on supervisor events and on the fixtures' REQUEST_LOG files
 * (fs.watch); the only poll is on process liveness, which has no event.
 */
import { spawn } from "node:child_process";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { freePort, httpServerConfig, RestartableServer, stopHttpServers } from "@/test/support/http-servers";
import {
  expectGatehouseError,
  FIXTURES,
  gatehouse,
  Harness,
  NODE,
  tempDir,
} from "@/test/support/mcp-harness";
import type { ServerConfig } from "../config";
import { Fixture, killFixtures } from "./hostile-fixtures";
import {
  isGone,
  logged,
  pollUntil,
  registerLifecycleCleanup,
  rejection,
  SLOW,
  seenPids,
  stdioServer,
  untilLogged,
} from "./lifecycle-fixtures";

const V1 = join(FIXTURES, "v1-tools.mjs");
const V2 = join(FIXTURES, "v2-tools.mjs");
const SLOW_START = join(FIXTURES, "slow-start.mjs");
const CALL_FAULTS = join(FIXTURES, "modern-call-faults.mjs");
const STREAM_FAULTS = join(FIXTURES, "modern-stream-faults.mjs");
const MODERN = "2026-07-28";
const LEGACY = "2025-11-25";
/** Short dial backoff, so a retried dial comes at once. */
const QUICK = { baseMs: 50, capMs: 100 };

registerLifecycleCleanup();
afterEach(stopHttpServers);
afterEach(killFixtures);

/** A raw HTTP fixture started by the test, and a manager dialling it as server "fx". */
async function rawHttp(script: string, env: Record<string, string>, over: Partial<ServerConfig> = {}) {
  const log = join(tempDir(), "requests.log");
  const fixture = new Fixture(
    spawn(NODE, [script], {
      env: { ...process.env, REQUEST_LOG: log, ...env },
      stdio: ["ignore", "pipe", "pipe"],
    }),
  );
  const port = (await fixture.waitForOutput("stdout", /listening (\d+)\n/))[1];
  const config = httpServerConfig("fx", `http://127.0.0.1:${port}/mcp`, { timeoutMs: 2000, ...over });
  const harness = new Harness(gatehouse([config]), QUICK);
  await harness.manager.start();
  return { harness, log };
}

/** The first ready or failed state of "fx" at or after event `from`. */
function settled(harness: Harness, from = 0) {
  return harness.waitFor(
    "ready or failed",
    () =>
      harness.events
        .slice(from)
        .find((e) => e.name === "fx" && (e.state === "ready" || e.state === "failed")),
    20_000,
  );
}

describe("a server that refuses the 2025 handshake naming 2026-07-28", () => {
  it(
    "a modern-only stdio server slower to start than the probe ends ready on 2026-07-28 after one backoff",
    async () => {
      const log = join(tempDir(), "requests.log");
      const config = stdioServer("fx", SLOW_START, {
        args: [SLOW_START, "--era", "modern", "--transport", "stdio"],
        // Slower than the 3 s stdio probe, quicker than the server's timeoutMs.
        env: { REQUEST_LOG: log, START_DELAY_MS: "3500" },
        timeoutMs: 6000,
      });
      const harness = new Harness(gatehouse([config]), QUICK);
      await harness.manager.start();
      const end = await settled(harness);
      expect(end.state, String(end.lastError)).toBe("ready");
      expect(end.protocolVersion).toBe(MODERN);
      expect(harness.statesOf("fx").filter((s) => s === "backoff")).toHaveLength(1);
    },
    SLOW,
  );

  it(
    "a 2025 HTTP server upgraded in place to 2026-only is dialled again and ends ready on 2026-07-28",
    async () => {
      const port = await freePort();
      const log = join(tempDir(), "requests.log");
      const spec = (args: string[]) => ({ args, env: { REQUEST_LOG: log }, ready: /listening \d+\n/ });
      const v1 = new RestartableServer(port, spec([V1, "--transport", "http"]));
      await v1.start();
      const harness = new Harness(gatehouse([httpServerConfig("fx", v1.url, { timeoutMs: 2000 })]), QUICK);
      await harness.manager.start();
      await harness.waitForState("fx", "ready");
      expect(harness.manager.get("fx").snapshot().protocolVersion).toBe(LEGACY);
      await v1.kill();
      const v2 = new RestartableServer(port, spec([V2, "--era", "modern", "--transport", "http"]));
      await v2.start();
      const from = harness.events.length;
      // The call meets the upgraded server (its 2025 session is gone); what it answers is its own.
      await harness.manager.callTool("fx", "echo", { text: "x" }).catch(() => undefined);
      const end = await settled(harness, from);
      expect(end.state, String(end.lastError)).toBe("ready");
      expect(end.protocolVersion).toBe(MODERN);
    },
    SLOW,
  );
});

describe("a stdio server that leaves the server/discover probe unanswered", () => {
  it(
    "a dual-era server slower to start than the probe is not taken for a 2025 one: the unanswered probe is a failed try, said in its history, and it ends ready on 2026-07-28",
    async () => {
      const log = join(tempDir(), "requests.log");
      const config = stdioServer("fx", SLOW_START, {
        // Dual: a 2025 `initialize` after the unanswered probe would be answered, as 2025.
        args: [SLOW_START, "--era", "dual", "--transport", "stdio"],
        env: { REQUEST_LOG: log, START_DELAY_MS: "3500" },
        timeoutMs: 6000,
      });
      const harness = new Harness(gatehouse([config]), QUICK);
      await harness.manager.start();
      const end = await settled(harness);
      expect(end.state, String(end.lastError)).toBe("ready");
      expect(end.protocolVersion).toBe(MODERN);
      const backoffs = end.history.filter((h) => h.state === "backoff");
      expect(backoffs).toHaveLength(1);
      expect(backoffs[0]?.detail).toMatch(/did not answer server\/discover within 3000 ms/);
      expect(logged(log)).not.toContain("request initialize");
    },
    SLOW,
  );

  it(
    "a 2025 server silent before initialize connects on the patient try, and is probed again at its next dial rather than remembered as 2025",
    async () => {
      const log = join(tempDir(), "requests.log");
      const config = stdioServer("fx", V1, {
        args: [V1, "--transport", "stdio"],
        env: { REQUEST_LOG: log, SILENT_BEFORE_INITIALIZE: "1" },
        timeoutMs: 2000,
      });
      const harness = new Harness(gatehouse([config]), QUICK);
      await harness.manager.start();
      const first = await settled(harness);
      expect(first.state, String(first.lastError)).toBe("ready");
      expect(first.protocolVersion).toBe(LEGACY);
      expect(first.history.filter((h) => h.state === "backoff")).toHaveLength(1);
      expect(first.history.at(-1)?.detail).toMatch(
        /did not answer server\/discover.*2025 on this connection/,
      );

      // The child dies: the next dial probes again (patiently), and falls back again.
      const from = harness.events.length;
      const pids = logged(log)
        .filter((l) => l.startsWith("started "))
        .map((l) => Number(l.split(" ")[1]));
      for (const pid of pids) seenPids.add(pid);
      const live = pids.at(-1);
      if (live === undefined) throw new Error("no child started");
      process.kill(live, "SIGKILL");
      const second = await settled(harness, from);
      expect(second.state, String(second.lastError)).toBe("ready");
      const requests = logged(log).filter((l) => l === "request server/discover");
      expect(requests).toHaveLength(3);
    },
    SLOW,
  );
});

describe("a 2026-07-28 server whose server/discover probe fails once", () => {
  it(
    "a probe whose stream breaks gets no made-up answer: it is retried and the server ends ready on 2026-07-28",
    async () => {
      const { harness, log } = await rawHttp(STREAM_FAULTS, { PROBE_MODE: "sse-reset-once" });
      const end = await settled(harness);
      expect(end.state, String(end.lastError)).toBe("ready");
      expect(end.protocolVersion).toBe(MODERN);
      expect(harness.statesOf("fx")).toContain("backoff");
      expect(logged(log).filter((l) => l === "request server/discover").length).toBeGreaterThanOrEqual(2);
    },
    SLOW,
  );
});

describe("a tool call to a 2026-07-28 server", () => {
  it(
    "a call answered with -32020 is sent once, with the listed definition: no re-listing, no resend",
    async () => {
      const { harness, log } = await rawHttp(CALL_FAULTS, {
        MODE: "mismatch",
        PAGES: "3",
        PAGE_DELAY_MS: "500",
      });
      await harness.waitForState("fx", "ready");
      const before = logged(log).length;
      await rejection(harness.manager.callTool("fx", "t0", {}));
      const after = logged(log).slice(before);
      expect(after.filter((l) => l === "request tools/call")).toHaveLength(1);
      expect(after.filter((l) => l.startsWith("request tools/list"))).toHaveLength(0);
    },
    SLOW,
  );

  it(
    "input_required is answered for one round at most: the call is sent twice, then fails",
    async () => {
      const { harness, log } = await rawHttp(CALL_FAULTS, {
        MODE: "input",
        PAGES: "1",
        PAGE_DELAY_MS: "100",
      });
      await harness.waitForState("fx", "ready");
      const before = logged(log).length;
      expectGatehouseError(await rejection(harness.manager.callTool("fx", "t0", {})), "upstream_error");
      expect(
        logged(log)
          .slice(before)
          .filter((l) => l === "request tools/call"),
      ).toHaveLength(2);
    },
    SLOW,
  );

  it(
    "a call whose input_required round would end past timeoutMs fails as a timeout: timeoutMs bounds the whole call",
    async () => {
      // Each answer takes 1.5 s of a 2 s timeout: every leg is within a per-request deadline,
      // but the second ends 3 s after the call was made, past its total deadline.
      const { harness } = await rawHttp(CALL_FAULTS, { MODE: "input", PAGES: "1", PAGE_DELAY_MS: "1500" });
      await harness.waitForState("fx", "ready");
      expectGatehouseError(await rejection(harness.manager.callTool("fx", "t0", {})), "upstream_timeout");
    },
    SLOW,
  );
});

describe("a listen request answered with an error that is not a refusal of the stream", () => {
  for (const [mode, what] of [
    ["internal-once", "-32603"],
    ["capacity-once", "a capacity refusal (-32000)"],
  ] as const) {
    it(
      `a listen answered with ${what} is retried after a backoff, and the stream opens`,
      async () => {
        const { harness, log } = await rawHttp(STREAM_FAULTS, { LISTEN_MODE: mode });
        await harness.waitForState("fx", "ready");
        await untilLogged(log, "a second listen request", (lines) => lines.includes("listen 2"));
        expect(harness.manager.get("fx").snapshot().state).toBe("ready");
      },
      SLOW,
    );
  }
});

describe("two Reconnects in a row", () => {
  it(
    "leave one child process, not two",
    async () => {
      const log = join(tempDir(), "requests.log");
      const config = stdioServer("fx", V2, {
        args: [V2, "--era", "modern", "--transport", "stdio"],
        env: { REQUEST_LOG: log },
      });
      const harness = new Harness(gatehouse([config]), QUICK);
      await harness.manager.start();
      await harness.waitForState("fx", "ready");
      const from = harness.events.length;
      const supervisor = harness.manager.get("fx");
      supervisor.reconnectNow();
      supervisor.reconnectNow();
      await harness.waitForState("fx", "ready", from);
      const started = () =>
        logged(log)
          .filter((l) => l.startsWith("started "))
          .map((l) => Number(l.split(" ")[1]));
      // The first child, and one per Reconnect (the second may overtake the first's dial).
      const pids = started();
      for (const pid of pids) seenPids.add(pid);
      expect(pids.length).toBeGreaterThanOrEqual(2);
      await pollUntil("all but one child gone", () => started().filter((pid) => !isGone(pid)).length === 1);
      const live = started().filter((pid) => !isGone(pid));
      expect(live).toHaveLength(1);
      expect(harness.manager.get("fx").snapshot().state).toBe("ready");
    },
    SLOW,
  );
});
