/**
 * Process hygiene against real misbehaving programs: the death of an npx-style wrapper is
 * noticed although its grandchild holds the pipes, stop() ends the whole process group in
 * stages, and Gatehouse stopped by a signal leaves no orphan. Shared bookkeeping and probes are
 * in lifecycle-fixtures.ts.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { FIXTURES, gatehouse, Harness, NODE, quiet, ROOT, tempDir, text } from "@/test/support/mcp-harness";
import {
  bootChildren,
  isGone,
  isReaped,
  pollUntil,
  readPids,
  realClearTimeout,
  realSetTimeout,
  registerLifecycleCleanup,
  runtimes,
  SLOW,
  seenPids,
  stdioServer,
} from "./lifecycle-fixtures";
import { BoundedStdioTransport, LineRing } from "./stdio-transport";
import { ServerSupervisor } from "./supervisor";

const WRAPPER = join(FIXTURES, "npx-wrapper.mjs");
const STUBBORN = join(FIXTURES, "stubborn.mjs");
/** The staged stop's default grace periods (stdio-transport.ts): stdin close, then SIGTERM. */
const STOP_GRACE_MS = 1000 + 2000;

registerLifecycleCleanup();

describe("process hygiene", () => {
  it(
    "kill -9 of an npx-style wrapper is noticed although its grandchild holds the pipes, and the grandchild is killed",
    async () => {
      const pidsFile = join(tempDir(), "pids.json");
      // The grandchild must outlive its closed stdin: Node destroys a child's stdin when the child
      // exits, and a plain server (env-echo, the demo) then exits on its own and closes the pipes,
      // which would let a host that only listens for 'close' notice after all.
      const harness = new Harness(
        gatehouse([stdioServer("wrapped", WRAPPER, { env: { PIDS_FILE: pidsFile, GRANDCHILD: STUBBORN } })]),
      );
      await harness.manager.start();
      const ready = await harness.waitForState("wrapped", "ready");
      const pids = readPids(pidsFile);
      // The MCP conversation is with the grandchild, through pipes it inherited from the wrapper.
      expect(Number(text(await harness.manager.callTool("wrapped", "pid", {})))).toBe(pids.grandchild);
      expect(isGone(pids.wrapper) || isGone(pids.grandchild)).toBe(false);

      const t0 = performance.now();
      process.kill(pids.wrapper, "SIGKILL");
      const { snapshot } = await harness.waitForState("wrapped", "backoff", ready.index + 1);
      const noticedMs = performance.now() - t0;
      expect(snapshot.lastError).toContain("SIGKILL");
      expect(harness.statesOf("wrapped", ready.index + 1)[0]).toBe("backoff");
      // Polled: the grandchild is not our child, so no event reports its death.
      const goneMs = await pollUntil("the grandchild's death", () => isGone(pids.grandchild), 5000);
      console.info(
        `[timing] wrapper kill -9: backoff after ${noticedMs.toFixed(0)} ms; grandchild gone ${goneMs.toFixed(0)} ms after that`,
      );
    },
    SLOW,
  );

  it(
    "stop() ends both the wrapper and a grandchild that ignores SIGTERM (the whole process group)",
    async () => {
      const pidsFile = join(tempDir(), "pids.json");
      const harness = new Harness(
        gatehouse([stdioServer("wrapped", WRAPPER, { env: { PIDS_FILE: pidsFile, GRANDCHILD: STUBBORN } })]),
      );
      await harness.manager.start();
      await harness.waitForState("wrapped", "ready");
      const pids = readPids(pidsFile);
      expect(Number(text(await harness.manager.callTool("wrapped", "pid", {})))).toBe(pids.grandchild);

      const t0 = performance.now();
      await harness.manager.stop();
      const stopMs = performance.now() - t0;
      // Our own child is reaped by the time stop() resolves.
      expect(isReaped(pids.wrapper)).toBe(true);
      const goneMs = await pollUntil("the grandchild's death", () => isGone(pids.grandchild), 2000);
      expect(harness.manager.get("wrapped").snapshot().state).toBe("closed");
      console.info(
        `[timing] stop() of wrapper + stubborn grandchild: ${stopMs.toFixed(0)} ms; grandchild gone ${goneMs.toFixed(0)} ms later`,
      );
    },
    SLOW,
  );

  it(
    "stop() ends a server that ignores SIGTERM and its closed stdin, at the SIGKILL stage",
    async () => {
      const harness = new Harness(gatehouse([stdioServer("stubborn", STUBBORN)]));
      await harness.manager.start();
      await harness.waitForState("stubborn", "ready");
      const pid = Number(text(await harness.manager.callTool("stubborn", "pid", {})));
      seenPids.add(pid);
      expect(isGone(pid)).toBe(false);

      const t0 = performance.now();
      await harness.manager.stop();
      const stopMs = performance.now() - t0;
      expect(isReaped(pid)).toBe(true);
      // It outlived both earlier stages, so only SIGKILL can have ended it.
      expect(stopMs).toBeGreaterThanOrEqual(STOP_GRACE_MS - 50);
      expect(stopMs).toBeLessThan(STOP_GRACE_MS + 2000);
      console.info(
        `[timing] stop() of stubborn: ${stopMs.toFixed(0)} ms (grace 1000 + 2000 ms, then SIGKILL)`,
      );
    },
    SLOW,
  );

  it(
    "stop() while a dial still negotiates the protocol era ends the child before it resolves (a switch off right after a switch on)",
    async () => {
      const pidsFile = join(tempDir(), "pids.json");
      // The wrapper's grandchild reads nothing for a while: the dial's server/discover probe waits.
      const supervisor = new ServerSupervisor(
        stdioServer("late", WRAPPER, {
          env: { PIDS_FILE: pidsFile, GRANDCHILD: join(FIXTURES, "slow-start.mjs"), START_DELAY_MS: "20000" },
        }),
        { log: quiet, refreshSeconds: 0, onState: () => {}, onTools: () => {} },
      );
      runtimes.push(supervisor);
      await supervisor.start();
      await pollUntil("the wrapper's start", () => existsSync(pidsFile));
      const pids = readPids(pidsFile);
      expect(supervisor.snapshot().state).toBe("connecting");
      await supervisor.stop();
      expect(isReaped(pids.wrapper)).toBe(true);
      await pollUntil("the grandchild's death", () => isGone(pids.grandchild), 2000);
    },
    SLOW,
  );

  it("a stdio connection closed before it was started never spawns its server (a switch off racing a switch on's dial)", async () => {
    const pidFile = join(tempDir(), "pids");
    const transport = new BoundedStdioTransport({
      command: NODE,
      args: [join(FIXTURES, "slow.mjs")],
      env: { RUNS_FILE: join(tempDir(), "runs.json"), PID_FILE: pidFile },
      cwd: null,
      maxFrameBytes: 1 << 20,
      stderr: new LineRing(),
    });
    await transport.close();
    await expect(transport.start()).rejects.toThrow("closed before the server was started");
    expect(transport.pid).toBeUndefined();
    expect(existsSync(pidFile)).toBe(false);
  });
});

describe("Gatehouse stopped by a signal", () => {
  /** Resolves once `output()` matches every pattern; rejects if the child exits first or after `timeoutMs`. */
  function outputMatches(child: ChildProcess, output: () => string, patterns: RegExp[], timeoutMs: number) {
    return new Promise<void>((resolve, reject) => {
      const done = () => {
        realClearTimeout(timer);
        child.stdout?.off("data", check);
        child.stderr?.off("data", check);
        child.off("exit", exited);
      };
      const check = () => {
        if (patterns.every((p) => p.test(output()))) {
          done();
          resolve();
        }
      };
      const exited = (code: number | null, signal: string | null) => {
        done();
        reject(new Error(`Gatehouse exited (${signal ?? code}) before it was ready; output:\n${output()}`));
      };
      const timer = realSetTimeout(() => {
        done();
        reject(new Error(`Gatehouse not ready within ${timeoutMs} ms; output:\n${output()}`));
      }, timeoutMs);
      child.stdout?.on("data", check);
      child.stderr?.on("data", check);
      child.once("exit", exited);
      check();
    });
  }

  it.each(["SIGTERM", "SIGINT"] as const)(
    "on %s Gatehouse stops every stdio child (an npx-style wrapper's grandchild too), exits 0 and leaves no orphan",
    async (signal) => {
      const dir = tempDir();
      const configFile = join(dir, "gatehouse.json");
      const pidsFile = join(dir, "wrapper-pids.json");
      const stubbornPidFile = join(dir, "stubborn.pid");
      writeFileSync(
        configFile,
        JSON.stringify({
          mcpServers: {
            wrapped: {
              command: NODE,
              args: [WRAPPER],
              env: { PIDS_FILE: pidsFile, GRANDCHILD: STUBBORN },
              enabled: true,
            },
            stubborn: { command: NODE, args: [STUBBORN], env: { PID_FILE: stubbornPidFile }, enabled: true },
          },
          catalogue: { refreshSeconds: 0 },
        }),
      );
      // Only what boot needs, not the test runner's environment.
      const bootEnv: Record<string, string> = {
        PATH: process.env.PATH ?? "/usr/bin:/bin",
        HOME: process.env.HOME ?? dir,
        TMPDIR: tmpdir(),
        GATEHOUSE_CONFIG: configFile,
        GATEHOUSE_DB: join(dir, "data", "gatehouse.db"),
        GATEHOUSE_LOG_LEVEL: "info",
      };
      const child = spawn(
        NODE,
        [
          "--conditions=react-server",
          "--import",
          "tsx",
          "-e",
          "import('./server/boot.ts').then(m => m.boot())",
        ],
        {
          cwd: ROOT,
          // Next's ProcessEnv type requires NODE_ENV, which boot does not need.
          env: bootEnv as NodeJS.ProcessEnv,
          stdio: ["ignore", "pipe", "pipe"],
        },
      );
      bootChildren.push(child);
      let output = "";
      child.stdout?.setEncoding("utf8");
      child.stderr?.setEncoding("utf8");
      child.stdout?.on("data", (chunk: string) => {
        output += chunk;
      });
      child.stderr?.on("data", (chunk: string) => {
        output += chunk;
      });
      const exit = new Promise<{ code: number | null; signal: string | null }>((resolve) =>
        child.once("exit", (code, sig) => resolve({ code, signal: sig })),
      );

      await outputMatches(
        child,
        () => output,
        [/\[mcp\] server wrapped ready/, /\[mcp\] server stubborn ready/],
        20_000,
      );
      const pids = readPids(pidsFile);
      const stubborn = Number(readFileSync(stubbornPidFile, "utf8"));
      seenPids.add(stubborn);
      const all = [pids.wrapper, pids.grandchild, stubborn];
      expect(all.filter(isGone)).toEqual([]);

      const t0 = performance.now();
      expect(child.kill(signal)).toBe(true);
      const exited = await Promise.race([
        exit,
        new Promise<never>((_, reject) =>
          realSetTimeout(() => reject(new Error(`Gatehouse did not exit; output:\n${output}`)), 15_000),
        ),
      ]);
      const exitMs = performance.now() - t0;
      expect(exited).toEqual({ code: 0, signal: null });
      expect(output).toContain(`${signal}: stopping tool servers`);
      // Polled: once Gatehouse has exited none of these is our child, and no event reports them.
      const goneMs = await pollUntil("every tool server process's death", () => all.every(isGone), 2000);
      console.info(
        `[timing] boot ${signal}: exit 0 after ${exitMs.toFixed(0)} ms; all ${all.length} pids gone ${goneMs.toFixed(0)} ms after exit`,
      );
    },
    SLOW,
  );
});
