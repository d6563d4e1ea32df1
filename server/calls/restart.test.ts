/**
 * Never lost, never re-run (PRODUCT.md §6.6) with a real host process killed
 * with SIGKILL: test/fixtures/host-runtime.ts runs the real runtime (store, MCP manager, broker)
 * in a child process on a SQLite file in a temp dir (in the postgres project, on a PostgreSQL
 * database); the test kills it at the worst moment and starts another on the same store. The tool servers count their real runs in files.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, watch, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { createInterface } from "node:readline";
import { afterEach, describe, expect, it } from "vitest";
import type { CallView } from "@/lib/api-types";
import { DEMO_SERVER, REPO_ROOT } from "@/test/support/runtime";
import { freshDatabaseUrl, testDialect } from "@/test/support/store";
import { freePort, receiver } from "../notify/notify-fixtures";

const HOST_SCRIPT = path.join(REPO_ROOT, "test", "fixtures", "host-runtime.ts");
const SLOW_SERVER = path.join(REPO_ROOT, "test", "fixtures", "servers", "slow.mjs");
/** Two host starts with real tool servers on a 2-core machine shared with others. */
const SLOW_TEST = 60_000;

type Reply = { n: number; ok: boolean; error?: { code: string; message: string } } & Record<string, unknown>;

/** One host process, spoken to in JSON lines. */
class Host {
  private next = 1;
  private readonly waiting = new Map<number, (r: Reply) => void>();
  private output = "";
  readonly exited: Promise<void>;
  readonly started: Promise<void>;

  constructor(readonly child: ChildProcess) {
    this.exited = new Promise((resolve) => child.once("exit", () => resolve()));
    let onStarted: () => void = () => {};
    this.started = new Promise<void>((resolve, reject) => {
      onStarted = resolve;
      child.once("exit", (code, signal) =>
        reject(new Error(`host exited (${code ?? signal}) before starting:\n${this.output}`)),
      );
    });
    child.stderr?.setEncoding("utf8").on("data", (chunk: string) => {
      this.output += chunk;
    });
    createInterface({ input: child.stdout as NodeJS.ReadableStream }).on("line", (line) => {
      if (!line.startsWith("HOST ")) return;
      const message = JSON.parse(line.slice(5)) as Reply & { event?: string };
      if (message.event === "started") onStarted();
      this.waiting.get(message.n)?.(message);
      this.waiting.delete(message.n);
    });
  }

  /** Sends a command and resolves with its answer (failing if the host dies first). */
  send(cmd: string, params: Record<string, unknown> = {}): Promise<Reply> {
    const n = this.next++;
    return new Promise((resolve, reject) => {
      this.waiting.set(n, resolve);
      void this.exited.then(() => reject(new Error(`host exited during ${cmd}:\n${this.output}`)));
      this.child.stdin?.write(`${JSON.stringify({ n, cmd, ...params })}\n`);
    });
  }

  /** Like send, but fails unless the command succeeded. */
  async ok(cmd: string, params: Record<string, unknown> = {}): Promise<Reply> {
    const reply = await this.send(cmd, params);
    if (!reply.ok) throw new Error(`${cmd} failed: ${JSON.stringify(reply.error)}`);
    return reply;
  }

  async kill9(): Promise<void> {
    this.child.kill("SIGKILL");
    await this.exited;
  }

  async stop(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    this.child.kill("SIGTERM");
    await this.exited;
  }
}

const hosts: Host[] = [];
const dirs: string[] = [];
const pidFiles: string[] = [];

afterEach(async () => {
  await Promise.all(hosts.splice(0).map((h) => h.stop()));
  // Tool servers orphaned by a killed host (they are in their own process group).
  for (const file of pidFiles.splice(0)) {
    if (!existsSync(file)) continue;
    for (const pid of readFileSync(file, "utf8").split("\n").filter(Boolean).map(Number)) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        // Already gone.
      }
    }
  }
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function tempDir(): string {
  const dir = mkdtempSync(path.join(tmpdir(), "gatehouse-restart-test-"));
  dirs.push(dir);
  return dir;
}

/** The PostgreSQL database of each temp dir's hosts (postgres project): a restart finds the same one. */
const databases = new Map<string, string>();

/**
 * Starts a host on `dir`'s gatehouse.json and gatehouse.db (in the postgres project, on the
 * database kept for `dir`); resolves once crash recovery has run.
 */
async function startHost(dir: string): Promise<Host> {
  let database: Record<string, string> = {};
  if (testDialect === "postgres") {
    const url = databases.get(dir) ?? (await freshDatabaseUrl());
    databases.set(dir, url);
    // A short lease: on PostgreSQL the next host ends what a killed one left once its lease ran out.
    database = {
      DATABASE_URL: url,
      GATEHOUSE_SECRET_KEY: "a".repeat(64),
      GATEHOUSE_REPLICA_LEASE_SECONDS: "2",
    };
  }
  // Only what the host needs, not the test runner's environment.
  const hostEnv: Record<string, string> = {
    PATH: process.env.PATH ?? "/usr/bin:/bin",
    HOME: process.env.HOME ?? dir,
    TMPDIR: tmpdir(),
    GATEHOUSE_CONFIG: path.join(dir, "gatehouse.json"),
    GATEHOUSE_DB: path.join(dir, "gatehouse.db"),
    GATEHOUSE_LOG_LEVEL: "warn",
    ...database,
  };
  const child = spawn(process.execPath, ["--conditions=react-server", "--import", "tsx", HOST_SCRIPT], {
    cwd: REPO_ROOT,
    // Next's ProcessEnv type requires NODE_ENV, which the host does not need.
    env: hostEnv as NodeJS.ProcessEnv,
    stdio: ["pipe", "pipe", "pipe"],
  });
  const host = new Host(child);
  hosts.push(host);
  await host.started;
  return host;
}

/** Resolves once `read()` holds, woken by changes in `file`'s folder (inotify), not by a timer loop. */
function fileSays(file: string, read: () => boolean, what: string, timeoutMs = 20_000): Promise<void> {
  return new Promise((resolve, reject) => {
    const check = () => {
      let ok = false;
      try {
        ok = read();
      } catch {
        ok = false;
      }
      if (!ok) return;
      clearTimeout(timer);
      watcher.close();
      resolve();
    };
    const watcher = watch(path.dirname(file), check);
    const timer = setTimeout(() => {
      watcher.close();
      reject(new Error(`timed out waiting for ${what}`));
    }, timeoutMs);
    check();
  });
}

const agent = { kind: "agent", name: "agent-a" } as const;

describe("a host killed with SIGKILL", () => {
  it(
    "keeps a pending call pending across the restart, and approving it then runs it exactly once",
    async () => {
      const dir = tempDir();
      const stateFile = path.join(dir, "demo-state.json");
      const runs = () =>
        existsSync(stateFile)
          ? (JSON.parse(readFileSync(stateFile, "utf8")) as { addNoteRuns: number }).addNoteRuns
          : 0;
      writeFileSync(
        path.join(dir, "gatehouse.json"),
        JSON.stringify({
          mcpServers: {
            demo: {
              command: process.execPath,
              args: [DEMO_SERVER],
              env: { DEMO_STATE_FILE: stateFile },
              enabled: true,
            },
          },
        }),
      );

      const first = await startHost(dir);
      await first.ok("ready", { server: "demo", tools: ["demo_add_note"] });
      await first.ok("enable", { tool: "demo_add_note" });
      const requested = await first.ok("request", {
        requester: agent,
        tool: "demo_add_note",
        arguments: { text: "survives a crash" },
      });
      const call = requested.call as CallView;
      expect(call.status).toBe("pending");
      await first.kill9();
      expect(first.child.signalCode).toBe("SIGKILL");
      expect(runs()).toBe(0);

      const second = await startHost(dir);
      const after = (await second.ok("get", { id: call.id })).call as CallView;
      expect(after).toMatchObject({ status: "pending", arguments: { text: "survives a crash" } });
      await second.ok("ready", { server: "demo", tools: ["demo_add_note"] });
      const approved = await second.ok("approve", { reviewer: "alice", id: call.id });
      expect((approved.call as CallView).status).toBe("running");
      const done = (await second.ok("wait", { id: call.id, status: "succeeded" })).call as CallView;
      expect(done.result).toMatchObject({
        content: [{ type: "text", text: "Added note 1: survives a crash" }],
      });
      expect(runs()).toBe(1);

      // A second approval is refused: the approval was single-use.
      const again = await second.send("approve", { reviewer: "bob", id: call.id });
      expect(again.error?.code).toBe("already_decided");
      expect(runs()).toBe(1);
      expect((await second.ok("audit", { id: call.id })).actions).toEqual([
        "call.pending",
        "call.approved",
        "call.succeeded",
      ]);
    },
    SLOW_TEST,
  );

  it(
    "marks a call that was running when it died interrupted (outcome unknown) and never runs it again",
    async () => {
      const dir = tempDir();
      const runsFile = path.join(dir, "slow-runs.json");
      const pidFile = path.join(dir, "slow-pids.txt");
      pidFiles.push(pidFile);
      const runs = (): { started: number; finished: number } =>
        existsSync(runsFile)
          ? (JSON.parse(readFileSync(runsFile, "utf8")) as { started: number; finished: number })
          : { started: 0, finished: 0 };
      writeFileSync(
        path.join(dir, "gatehouse.json"),
        JSON.stringify({
          mcpServers: {
            slow: {
              command: process.execPath,
              args: [SLOW_SERVER],
              env: { RUNS_FILE: runsFile, PID_FILE: pidFile, SLOW_MS: "30000" },
              timeoutMs: 60_000,
              enabled: true,
            },
          },
        }),
      );

      const first = await startHost(dir);
      await first.ok("ready", { server: "slow", tools: ["slow_write"] });
      await first.ok("enable", { tool: "slow_write" });
      const call = (await first.ok("request", { requester: agent, tool: "slow_write", arguments: {} }))
        .call as CallView;
      expect(call.status).toBe("pending");
      await first.ok("approve", { reviewer: "alice", id: call.id });
      // The tool server has really started the work when the host dies.
      await fileSays(runsFile, () => runs().started === 1, "the slow tool to start");
      await first.kill9();

      const second = await startHost(dir);
      // SQLite: at once (one process per store: whatever ran before is dead). PostgreSQL: once
      // the dead host's lease has run out, as another replica would find it.
      const after = (await second.ok("wait", { id: call.id, status: "interrupted" })).call as CallView;
      expect(after.status).toBe("interrupted");
      expect(after.error).toEqual({
        code: "interrupted",
        message: "Gatehouse stopped while the call was running: outcome unknown",
      });
      expect(after.finishedAt).not.toBeNull();
      await second.ok("ready", { server: "slow", tools: ["slow_write"] });
      // Nobody can run it again by approving it.
      const again = await second.send("approve", { reviewer: "bob", id: call.id });
      expect(again.error?.code).toBe("already_decided");
      expect((await second.ok("get", { id: call.id })).call).toMatchObject({ status: "interrupted" });
      expect(runs().started).toBe(1);
      expect((await second.ok("audit", { id: call.id })).actions).toEqual([
        "call.pending",
        "call.approved",
        "call.interrupted",
      ]);
    },
    SLOW_TEST,
  );

  it(
    "sends a notification queued when it died after the restart, exactly once, with the same deliveryId",
    async () => {
      const dir = tempDir();
      // Nothing listens here while the first host runs: its tries are refused, the row stays queued.
      const port = await freePort();
      writeFileSync(
        path.join(dir, "gatehouse.json"),
        JSON.stringify({
          mcpServers: {
            demo: {
              command: process.execPath,
              args: [DEMO_SERVER],
              env: { DEMO_STATE_FILE: path.join(dir, "demo-state.json") },
              enabled: true,
            },
          },
          notifications: {
            publicUrl: "https://gatehouse.example.test",
            webhooks: [
              {
                name: "ops",
                url: `http://127.0.0.1:${port}/hook`,
                allowPrivate: true,
                events: ["call.pending"],
              },
            ],
          },
        }),
      );

      const first = await startHost(dir);
      await first.ok("ready", { server: "demo", tools: ["demo_add_note"] });
      await first.ok("enable", { tool: "demo_add_note" });
      const call = (
        await first.ok("request", {
          requester: agent,
          tool: "demo_add_note",
          arguments: { text: "tell someone" },
        })
      ).call as CallView;
      const [queued] = (await first.ok("deliveries")).deliveries as { deliveryId: string; status: string }[];
      expect(queued).toMatchObject({ status: "queued", callId: call.id, event: "call.pending" });
      await first.kill9();

      const rx = await receiver([204], port);
      try {
        const second = await startHost(dir);
        const delivered = (await second.ok("delivery", { deliveryId: queued?.deliveryId })).delivery;
        expect(delivered).toMatchObject({ status: "delivered", deliveryId: queued?.deliveryId });
        // A graceful stop ends every try in flight: whatever the receiver has now is all it gets.
        await second.stop();
        expect(rx.received).toHaveLength(1);
        const body = JSON.parse(rx.received[0]?.body ?? "{}");
        expect(body).toMatchObject({
          event: "call.pending",
          deliveryId: queued?.deliveryId,
          call: { id: call.id, status: "pending" },
          url: `https://gatehouse.example.test/approvals/${call.id}`,
        });
      } finally {
        await rx.close();
      }
    },
    SLOW_TEST,
  );
});
