import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { freePort } from "@/test/support/http-servers";
import {
  cleanUp,
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
import { type ServerConfig, validateConfig } from "../config";
import { INHERITED_ENV } from "./stdio-transport";

/**
 * Integration tests of the MCP manager against real programs: the bundled demo server, the
 * reference server-everything (stdio and streamable HTTP), and one-misbehaviour fixture servers
 * in test/fixtures/servers. Nothing of ours is mocked; waits are bounded waits on events.
 */

/** Per-test timeout: the machine has 2 cores and every test starts real processes. */
const SLOW = 20_000;

function httpServer(name: string, url: string, allowPrivate: boolean): ServerConfig {
  return {
    ...stdioServer(name, ""),
    transport: "http",
    command: null,
    args: [],
    cwd: null,
    url,
    allowPrivate,
  };
}

afterEach(cleanUp);

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ESRCH") return false;
    throw err;
  }
}

describe("the demo server over stdio", () => {
  function demo(): { harness: Harness; stateFile: string } {
    const dir = tempDir();
    const stateFile = join(dir, "demo-state.json");
    // Through validateConfig, as boot does: defaults applied, cwd resolved against the base dir.
    const result = validateConfig(
      {
        mcpServers: {
          demo: { command: NODE, args: [DEMO], env: { DEMO_STATE_FILE: stateFile }, enabled: true },
        },
        catalogue: { refreshSeconds: 0 },
      },
      { env: {}, baseDir: dir },
    );
    expect(result.errors).toEqual([]);
    if (!result.config) throw new Error("config did not validate");
    return { harness: new Harness(result.config), stateFile };
  }

  it(
    "start() returns at once and the server then becomes ready with list_notes and add_note",
    async () => {
      const { harness } = demo();
      const t0 = performance.now();
      await harness.manager.start();
      const startMs = performance.now() - t0;
      // Boot never waits for the handshake: right after start() nothing is known yet.
      expect(harness.manager.list().map((s) => s.status.state)).toEqual(["connecting"]);
      expect(harness.tools.size).toBe(0);
      expect(startMs).toBeLessThan(500);

      const { snapshot } = await harness.waitForState("demo", "ready");
      expect(snapshot.serverInfo).toEqual({ name: "gatehouse-demo", version: "1.0.0" });
      expect(snapshot.listedTools).toBe(2);
      expect(snapshot.lastError).toBeNull();
      const tools = harness.tools.get("demo") ?? [];
      expect(tools.map((t) => t.name).sort()).toEqual(["add_note", "list_notes"]);
      expect(tools.find((t) => t.name === "list_notes")?.annotations).toEqual({ readOnlyHint: true });
      expect(tools.find((t) => t.name === "add_note")?.annotations).toBeUndefined();
    },
    SLOW,
  );

  it(
    "callTool list_notes returns the notebook's text",
    async () => {
      const { harness } = demo();
      await harness.manager.start();
      await harness.waitForState("demo", "ready");
      const result = await harness.manager.callTool("demo", "list_notes", {});
      expect(result.isError).toBeFalsy();
      expect(text(result)).toBe("The notebook is empty.");
    },
    SLOW,
  );

  it(
    "callTool add_note mutates the state file exactly once",
    async () => {
      const { harness, stateFile } = demo();
      await harness.manager.start();
      await harness.waitForState("demo", "ready");
      expect(existsSync(stateFile)).toBe(false);

      const added = await harness.manager.callTool("demo", "add_note", { text: "buy milk" });
      expect(added.isError).toBeFalsy();
      expect(text(added)).toBe("Added note 1: buy milk");
      expect(JSON.parse(readFileSync(stateFile, "utf8"))).toEqual({ notes: ["buy milk"], addNoteRuns: 1 });

      const listed = await harness.manager.callTool("demo", "list_notes", {});
      expect(text(listed)).toBe("1. buy milk");
      // Reading did not run add_note again.
      expect(JSON.parse(readFileSync(stateFile, "utf8")).addNoteRuns).toBe(1);
    },
    SLOW,
  );
});

describe("server-everything over stdio", () => {
  it(
    "becomes ready, lists echo with its annotations, and echoes",
    async () => {
      const harness = new Harness(
        gatehouse([stdioServer("everything", EVERYTHING, { args: [EVERYTHING, "stdio"] })]),
      );
      await harness.manager.start();
      const { snapshot } = await harness.waitForState("everything", "ready");
      expect(snapshot.listedTools).toBeGreaterThan(1);
      const echo = harness.tools.get("everything")?.find((t) => t.name === "echo");
      expect(echo?.annotations).toEqual({
        readOnlyHint: true,
        destructiveHint: false,
        idempotentHint: true,
        openWorldHint: false,
      });
      const result = await harness.manager.callTool("everything", "echo", { message: "hello over stdio" });
      expect(text(result)).toBe("Echo: hello over stdio");
    },
    SLOW,
  );
});

/** Resolves once `child` writes `marker` to stderr; rejects if it exits first or after `timeoutMs`. */
function stderrLine(child: ChildProcess, marker: string, timeoutMs: number): Promise<void> {
  return new Promise((resolve, reject) => {
    let seen = "";
    const timer = setTimeout(
      () => reject(new Error(`no "${marker}" within ${timeoutMs} ms; stderr: ${seen}`)),
      timeoutMs,
    );
    child.stderr?.setEncoding("utf8");
    child.stderr?.on("data", (chunk: string) => {
      seen += chunk;
      if (seen.includes(marker)) {
        clearTimeout(timer);
        resolve();
      }
    });
    child.once("exit", (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`server exited (${signal ?? code}) before "${marker}"; stderr: ${seen}`));
    });
  });
}

describe("server-everything over streamable HTTP", () => {
  let child: ChildProcess | null = null;
  let url = "";

  beforeAll(async () => {
    const port = await freePort();
    child = spawn(NODE, [EVERYTHING, "streamableHttp"], {
      env: { ...process.env, PORT: String(port) },
      stdio: ["ignore", "ignore", "pipe"],
    });
    await stderrLine(child, `listening on port ${port}`, 15_000);
    url = `http://127.0.0.1:${port}/mcp`;
  }, SLOW);

  afterAll(async () => {
    const c = child;
    if (!c || c.exitCode !== null || c.signalCode !== null) return;
    const exited = new Promise((resolve) => c.once("exit", resolve));
    c.kill("SIGKILL");
    await exited;
  });

  it(
    "with allowPrivate it becomes ready, lists echo and echoes",
    async () => {
      const harness = new Harness(gatehouse([httpServer("everything", url, true)]));
      await harness.manager.start();
      const { snapshot } = await harness.waitForState("everything", "ready");
      expect(snapshot.serverInfo?.name).toBeTruthy();
      const echo = harness.tools.get("everything")?.find((t) => t.name === "echo");
      expect(echo?.annotations?.readOnlyHint).toBe(true);
      const result = await harness.manager.callTool("everything", "echo", { message: "hello over http" });
      expect(text(result)).toBe("Echo: hello over http");
    },
    SLOW,
  );

  it(
    "without allowPrivate the guard refuses the loopback address at dial time and the server is failed, not retried",
    async () => {
      const harness = new Harness(gatehouse([httpServer("everything", url, false)]));
      await harness.manager.start();
      const { snapshot } = await harness.waitForState("everything", "failed");
      expect(snapshot.lastError).toContain("refused");
      expect(snapshot.lastError).toContain("loopback");
      expect(snapshot.nextRetryAt).toBeNull();
      expect(harness.statesOf("everything")).toEqual(["connecting", "failed"]);
      expect(harness.statesOf("everything")).not.toContain("ready");
      expect(harness.tools.has("everything")).toBe(false);
    },
    SLOW,
  );
});

describe("supervision of stdio servers", () => {
  it(
    "a disabled server stays dark and spawns nothing",
    async () => {
      const marker = join(tempDir(), "spawned");
      const harness = new Harness(
        gatehouse([
          stdioServer("off", "", {
            args: ["-e", `require("node:fs").writeFileSync(${JSON.stringify(marker)}, "ran")`],
            enabled: false,
          }),
          stdioServer("on", join(FIXTURES, "env-echo.mjs")),
        ]),
      );
      await harness.manager.start();
      // The enabled neighbour spawning, booting and handshaking is ample time for a spawn to show.
      await harness.waitForState("on", "ready");
      expect(harness.manager.get("off").snapshot().state).toBe("dark");
      expect(harness.statesOf("off").every((s) => s === "dark")).toBe(true);
      expect(existsSync(marker)).toBe(false);
      const { error } = await rejection(harness.manager.callTool("off", "anything", {}), performance.now());
      expectGatehouseError(error, "server_unavailable");
    },
    SLOW,
  );

  it(
    "a command that does not exist goes to backoff with a clear lastError, and snapshot() still answers",
    async () => {
      const missing = join(tempDir(), "no-such-server");
      const harness = new Harness(gatehouse([stdioServer("ghost", "", { command: missing, args: [] })]));
      await harness.manager.start();
      const { snapshot } = await harness.waitForState("ghost", "backoff");
      expect(snapshot.lastError).toContain(`could not start ${missing}`);
      expect(snapshot.lastError).toContain("ENOENT");
      expect(snapshot.nextRetryAt).not.toBeNull();

      const t0 = performance.now();
      const listed = harness.manager.list();
      expect(performance.now() - t0).toBeLessThan(50);
      expect(listed.map((s) => [s.config.name, s.status.state])).toEqual([["ghost", "backoff"]]);
      const { error } = await rejection(harness.manager.callTool("ghost", "x", {}), performance.now());
      // The state, not the system error: that is on the status, for owners.
      const told = expectGatehouseError(error, "server_unavailable").message;
      expect(told).toContain("server ghost is in backoff");
      expect(told).not.toContain("ENOENT");
    },
    SLOW,
  );

  describe("environment", () => {
    const SECRET = "GATEHOUSE_TEST_SECRET";
    let saved: string | undefined;
    beforeAll(() => {
      saved = process.env[SECRET];
      process.env[SECRET] = "do-not-leak-this-value";
    });
    afterAll(() => {
      if (saved === undefined) delete process.env[SECRET];
      else process.env[SECRET] = saved;
    });

    it(
      "a stdio child gets only its configured env plus the inherited safe set",
      async () => {
        const harness = new Harness(
          gatehouse([
            stdioServer("env", join(FIXTURES, "env-echo.mjs"), {
              env: { GATEHOUSE_CONFIGURED: "configured-value" },
            }),
          ]),
        );
        await harness.manager.start();
        await harness.waitForState("env", "ready");
        const childEnv = JSON.parse(text(await harness.manager.callTool("env", "env", {}))) as Record<
          string,
          string
        >;
        expect(process.env[SECRET]).toBe("do-not-leak-this-value");
        expect(childEnv[SECRET]).toBeUndefined();
        expect(childEnv.GATEHOUSE_CONFIGURED).toBe("configured-value");
        expect(childEnv.PATH).toBe(process.env.PATH);
        const allowed = new Set<string>([...INHERITED_ENV, "GATEHOUSE_CONFIGURED"]);
        expect(Object.keys(childEnv).filter((k) => !allowed.has(k))).toEqual([]);
      },
      SLOW,
    );
  });

  it(
    "a server that exits mid-call fails the call promptly, backs off, and reconnects to ready",
    async () => {
      const harness = new Harness(gatehouse([stdioServer("crashy", join(FIXTURES, "crash-on-call.mjs"))]));
      await harness.manager.start();
      const first = await harness.waitForState("crashy", "ready");

      const t0 = performance.now();
      const { error, ms } = await rejection(harness.manager.callTool("crashy", "crash", {}), t0);
      console.info(`[timing] crash-on-call: call rejected after ${ms.toFixed(0)} ms (timeoutMs 10000)`);
      expect(expectGatehouseError(error, "upstream_error").message).toContain("crashy");
      expect(ms).toBeLessThan(2000);

      const backoff = await harness.waitForState("crashy", "backoff", first.index + 1);
      expect(backoff.snapshot.lastError).toContain("exited");
      expect(backoff.snapshot.lastError).toContain("code 3");
      // First retry is at most 1 s away (base 1 s with jitter), so this is the real backoff.
      const retryIn = Date.parse(backoff.snapshot.nextRetryAt ?? "") - Date.now();
      expect(retryIn).toBeLessThanOrEqual(1000);

      const again = await harness.waitForState("crashy", "ready", backoff.index + 1);
      expect(again.snapshot.lastError).toBeNull();
      console.info(
        `[timing] crash-on-call: ready again ${(performance.now() - t0).toFixed(0)} ms after the call`,
      );
    },
    SLOW,
  );

  it(
    "a frame larger than maxFrameBytes fails the call at once and the server backs off",
    async () => {
      const harness = new Harness(
        gatehouse([
          stdioServer("flood", join(FIXTURES, "flood.mjs"), { maxFrameBytes: MiB, timeoutMs: 10_000 }),
        ]),
      );
      await harness.manager.start();
      const ready = await harness.waitForState("flood", "ready");
      const pid = Number(/\+pid\.(\d+)$/.exec(ready.snapshot.serverInfo?.version ?? "")?.[1]);
      expect(isAlive(pid)).toBe(true);

      const t0 = performance.now();
      const { error, ms } = await rejection(harness.manager.callTool("flood", "flood", {}), t0);
      console.info(`[timing] flood: call rejected after ${ms.toFixed(0)} ms (timeoutMs 10000)`);
      expectGatehouseError(error, "upstream_error");
      // At once: neither the 10 s deadline nor the 1 s grace of the staged stop of a child that
      // ignores its closed stdin (this one only dies of SIGTERM).
      expect(ms).toBeLessThan(500);

      const { snapshot } = await harness.waitForState("flood", "backoff", ready.index + 1);
      expect(snapshot.lastError).toContain("maxFrameBytes");
      // The child ignores its closed stdin; by the time the failure is reported it has been killed.
      expect(isAlive(pid)).toBe(false);
    },
    SLOW,
  );

  it(
    "a silent stdio server times out without blocking status",
    async () => {
      const harness = new Harness(
        gatehouse([stdioServer("silent", join(FIXTURES, "silent.mjs"), { timeoutMs: 500 })]),
      );
      await harness.manager.start();
      await harness.waitForState("silent", "ready");

      const t0 = performance.now();
      const call = rejection(harness.manager.callTool("silent", "hang", {}), t0);
      // While the call hangs, status reads answer at once.
      const t1 = performance.now();
      const listed = harness.manager.list();
      const listMs = performance.now() - t1;
      expect(listMs).toBeLessThan(50);
      expect(listed.map((s) => s.status.state)).toEqual(["ready"]);

      const { error, ms } = await call;
      console.info(`[timing] silent: upstream_timeout after ${ms.toFixed(0)} ms (timeoutMs 500)`);
      expect(expectGatehouseError(error, "upstream_timeout").message).toContain("500 ms");
      expect(ms).toBeGreaterThanOrEqual(450);
      expect(ms).toBeLessThan(2500);
      // A timeout is the call's failure, not the connection's.
      expect(harness.manager.get("silent").snapshot().state).toBe("ready");
    },
    SLOW,
  );

  it(
    "stop() kills the child process",
    async () => {
      const harness = new Harness(gatehouse([stdioServer("env", join(FIXTURES, "env-echo.mjs"))]));
      await harness.manager.start();
      await harness.waitForState("env", "ready");
      const pid = Number(text(await harness.manager.callTool("env", "pid", {})));
      expect(Number.isInteger(pid) && pid > 0).toBe(true);
      expect(isAlive(pid)).toBe(true);

      await harness.manager.stop();
      expect(() => process.kill(pid, 0)).toThrow(expect.objectContaining({ code: "ESRCH" }));
      expect(harness.manager.get("env").snapshot().state).toBe("closed");
    },
    SLOW,
  );
});
