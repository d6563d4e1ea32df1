import { join } from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import { freePort, httpServerConfig, RestartableServer, stopHttpServers } from "@/test/support/http-servers";
import {
  expectGatehouseError,
  FIXTURES,
  gatehouse,
  Harness,
  recordingLogger,
  tempDir,
  text,
} from "@/test/support/mcp-harness";
import type { ServerConfig } from "../config";
import {
  logged,
  registerLifecycleCleanup,
  rejection,
  SLOW,
  stdioServer,
  untilLogged,
} from "./lifecycle-fixtures";

const V2 = join(FIXTURES, "v2-tools.mjs");
const V1 = join(FIXTURES, "v1-tools.mjs");
const MODERN = "2026-07-28";
/** What the v1 SDK (1.32.2) agrees to when asked for the newest 2025 revision. */
const LEGACY = "2025-11-25";

registerLifecycleCleanup();
afterEach(stopHttpServers);

type Transport = "stdio" | "http";

interface Era {
  name: string;
  script: string;
  args: string[];
  /** The revision Gatehouse must end up speaking with it. */
  protocolVersion: string;
}

const ERAS: Era[] = [
  { name: "modern-only (SDK v2)", script: V2, args: ["--era", "modern"], protocolVersion: MODERN },
  { name: "dual (SDK v2)", script: V2, args: ["--era", "dual"], protocolVersion: MODERN },
  { name: "legacy-only (SDK v1)", script: V1, args: [], protocolVersion: LEGACY },
];
const CELLS = ERAS.flatMap((era) =>
  (["stdio", "http"] as const).map((transport) => ({
    ...era,
    transport,
    label: `${era.name} over ${transport}`,
  })),
);

const count = (lines: string[], line: string) => lines.filter((l) => l === line).length;

/**
 * The fixture of `cell` started (HTTP: on a free port, as a process of its own; stdio: by
 * Gatehouse), with a manager connected to it as server "fx", ready. The periodic refresh is off.
 */
async function connected(
  cell: { script: string; args: string[]; transport: Transport },
  over: Partial<ServerConfig> = {},
): Promise<{ harness: Harness; log: string; server: RestartableServer | null; gatehouseLog: string[] }> {
  const log = join(tempDir(), "requests.log");
  const args = [cell.script, ...cell.args, "--transport", cell.transport];
  let server: RestartableServer | null = null;
  let config: ServerConfig;
  if (cell.transport === "http") {
    server = new RestartableServer(await freePort(), {
      args,
      env: { REQUEST_LOG: log },
      ready: /listening \d+\n/,
    });
    await server.start();
    config = httpServerConfig("fx", server.url, over);
  } else {
    config = stdioServer("fx", cell.script, { args, env: { REQUEST_LOG: log }, ...over });
  }
  const recorded = recordingLogger();
  const harness = new Harness(gatehouse([config]), undefined, recorded.log);
  await harness.manager.start();
  await harness.waitForState("fx", "ready");
  return { harness, log, server, gatehouseLog: recorded.lines };
}

describe.each(CELLS.map((cell) => [cell.label, cell] as const))("%s", (_label, cell) => {
  const modern = cell.protocolVersion === MODERN;

  it(
    modern
      ? `dials with server/discover and no initialize, is ready speaking ${MODERN}, lists the tools whole and calls them`
      : `falls back to initialize, is ready speaking ${LEGACY}, lists the tools whole and calls them`,
    async () => {
      const { harness, log } = await connected(cell);
      const fx = harness.manager.get("fx");

      expect(fx.snapshot()).toMatchObject({
        state: "ready",
        protocolVersion: cell.protocolVersion,
        lastError: null,
      });
      const requests = logged(log).filter((l) => l.startsWith("request "));
      // One process, one connection: the probe and any fallback share it.
      expect(logged(log).filter((l) => l.startsWith("started "))).toHaveLength(1);
      if (modern) {
        expect(requests[0]).toBe("request server/discover");
        expect(requests).not.toContain("request initialize");
      } else {
        // At most one probe, answered "not found" or 400 by the v1 server, then the 2025 handshake.
        expect(count(requests, "request server/discover")).toBeLessThanOrEqual(1);
        expect(count(requests, "request initialize")).toBe(1);
      }

      const tools = harness.tools.get("fx") ?? [];
      expect(tools.map((t) => t.name)).toEqual(["echo", "add_tool", "slow", "forecast"]);
      expect(tools.find((t) => t.name === "forecast")).toMatchObject({
        title: "Forecast",
        outputSchema: { type: "object", required: ["city", "celsius"] },
      });
      expect(text(await harness.manager.callTool("fx", "echo", { text: "hello" }))).toBe("echo: hello");
      const forecast = await harness.manager.callTool("fx", "forecast", { city: "Oslo" });
      expect(forecast.structuredContent).toEqual({ city: "Oslo", celsius: 21 });
    },
    SLOW,
  );

  it(
    modern
      ? "hears a tool added by add_tool on its listen stream and re-lists, without the periodic refresh or a reconnect"
      : "hears a tool added by add_tool as notifications/tools/list_changed and re-lists, without the periodic refresh or a reconnect",
    async () => {
      const { harness, log } = await connected(cell);
      const from = harness.events.length;

      // Straight after `ready`: a modern connection is ready only once its listen stream is open.
      expect(text(await harness.manager.callTool("fx", "add_tool", {}))).toBe("added extra_1");

      const names = await harness.waitFor("extra_1 in the tool list", () => {
        const listed = harness.tools.get("fx")?.map((t) => t.name);
        return listed?.includes("extra_1") ? listed : undefined;
      });
      expect(names).toEqual(["echo", "add_tool", "slow", "forecast", "extra_1"]);
      expect(harness.statesOf("fx", from)).not.toContain("connecting");
      const history = harness.manager.get("fx").snapshot().history;
      expect(history.filter((h) => h.state === "connecting")).toHaveLength(1);
      expect(text(await harness.manager.callTool("fx", "extra_1", {}))).toBe("ran extra_1");
      const lines = logged(log);
      expect(count(lines, "request initialize")).toBe(modern ? 0 : 1);
      if (modern) expect(count(lines, "acknowledged subscriptions/listen")).toBe(1);
    },
    SLOW,
  );

  it(
    "a call to slow past timeoutMs fails as upstream_timeout, the server sees the cancellation, and the next call works",
    async () => {
      const timeoutMs = 3000;
      const { harness, log } = await connected(cell, { timeoutMs });

      const error = await rejection(harness.manager.callTool("fx", "slow", { ms: 600_000 }));

      expect(expectGatehouseError(error, "upstream_timeout").message).toContain(`${timeoutMs} ms`);
      // Over modern HTTP the cancellation is the request's stream closing; otherwise
      // notifications/cancelled. Either way the tool stops.
      await untilLogged(log, "cancellation of slow at the server", (lines) =>
        lines.includes("slow cancelled"),
      );
      expect(logged(log)).not.toContain("slow finished");
      expect(harness.manager.get("fx").snapshot().state).toBe("ready");
      expect(text(await harness.manager.callTool("fx", "echo", { text: "still here" }))).toBe(
        "echo: still here",
      );
    },
    SLOW,
  );
});

describe("a modern-only HTTP server (SDK v2) restarts between two calls", () => {
  it(
    "the next call succeeds and a list change after the restart is heard on a reopened listen stream",
    async () => {
      const cell = ERAS[0];
      if (!cell) throw new Error("no modern-only era");
      const { harness, log, server, gatehouseLog } = await connected({ ...cell, transport: "http" });
      if (!server) throw new Error("no HTTP server");
      expect(text(await harness.manager.callTool("fx", "echo", { text: "before" }))).toBe("echo: before");
      expect(count(logged(log), "acknowledged subscriptions/listen")).toBe(1);
      // The acknowledgement has Gatehouse list the tools again (debounced): let that listing end
      // before the restart. Landing while the old process is gone and the new one not yet
      // listening, it would find no server, and a listing that fails fails the connection
      // (backoff), as specified: that would be the restart of a server Gatehouse was talking to,
      // not the restart between two calls this test is about.
      const dialList = harness.tools.get("fx");
      await harness.waitFor("the listing after the listen acknowledgement", () =>
        harness.tools.get("fx") !== dialList ? true : undefined,
      );

      await server.restart();

      // Stateless: nothing the new process lacks, so the very next call is answered.
      expect(text(await harness.manager.callTool("fx", "echo", { text: "after" }))).toBe("echo: after");
      // The old listen stream died with the process; Gatehouse opens a new one on its own.
      await untilLogged(log, "a second acknowledged listen stream", (lines) => {
        return count(lines, "acknowledged subscriptions/listen") === 2;
      });
      // The new process knows no extra tools yet: this is its first.
      expect(text(await harness.manager.callTool("fx", "add_tool", {}))).toBe("added extra_1");
      await harness.waitFor("extra_1 in the tool list after the restart", () =>
        harness.tools.get("fx")?.some((t) => t.name === "extra_1") ? true : undefined,
      );
      const after = harness.manager.get("fx").snapshot();
      expect(after).toMatchObject({ state: "ready", protocolVersion: MODERN });
      // The end of the old listen stream, and any failed reopening of it, failed nothing.
      expect(after.history.map((h) => h.state)).toEqual(["connecting", "ready"]);
      expect(logged(log)).not.toContain("request initialize");
      // The end of the old listen stream is no news above debug: no answer was made up for it
      // (the SDK had let its id go, and would warn of an answer to an unknown request).
      expect(gatehouseLog.filter((l) => /unknown message id/i.test(l))).toEqual([]);
    },
    SLOW,
  );
});

describe("a 2026-07-28 server's cache hint on its tool list", () => {
  it(
    "the periodic refresh skips a tool list the server said is still fresh, and re-lists one it did not",
    async () => {
      // Only the periodic timer is faked: the children, their pipes and the re-list's debounce run
      // in real time.
      vi.useFakeTimers({ toFake: ["setInterval", "clearInterval"] });
      try {
        const dir = tempDir();
        const freshLog = join(dir, "fresh.log");
        const staleLog = join(dir, "stale.log");
        const modern = ["--era", "modern", "--transport", "stdio"];
        const harness = new Harness(
          gatehouse(
            [
              stdioServer("fresh", V2, {
                args: [V2, ...modern, "--tools-ttl-ms", "3600000"],
                env: { REQUEST_LOG: freshLog },
              }),
              stdioServer("stale", V2, { args: [V2, ...modern], env: { REQUEST_LOG: staleLog } }),
            ],
            1,
          ),
        );
        await harness.manager.start();
        const lists = (file: string) => count(logged(file), "request tools/list");
        // Each listed at the dial, and again once its listen stream was acknowledged.
        for (const file of [freshLog, staleLog]) {
          await untilLogged(file, "the listing after the listen acknowledgement", () => lists(file) >= 2);
        }
        const [freshBefore, staleBefore] = [lists(freshLog), lists(staleLog)];

        vi.advanceTimersByTime(5_000);
        await untilLogged(
          staleLog,
          "a periodic re-list of the server without a hint",
          () => lists(staleLog) > staleBefore,
        );
        // The fresh server's pipe is ordered: a re-list sent before this call would be logged first.
        expect(text(await harness.manager.callTool("fresh", "echo", { text: "x" }))).toBe("echo: x");
        expect(lists(freshLog)).toBe(freshBefore);
      } finally {
        vi.useRealTimers();
      }
    },
    SLOW,
  );
});
