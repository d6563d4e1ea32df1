import { type ChildProcessByStdio, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { createWriteStream, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import type { Readable, Writable } from "node:stream";
import { fileURLToPath } from "node:url";
import type { APIRequestContext } from "@playwright/test";
// @ts-expect-error: a plain ES module script without types.
import { startPostgres as startPostgresUntyped } from "../../scripts/postgres.mjs";
import { freePort } from "./instance";
import { RoundRobinProxy } from "./round-robin";

const startPostgres = startPostgresUntyped as (opts?: {
  maxConnections?: number;
}) => Promise<{ url: string; stop(): Promise<void> }>;

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..");

/** How long a replica may miss heartbeats before a survivor takes it for dead, in the cluster. */
export const LEASE_SECONDS = 3;

/** How long the slow fixture's `write` sleeps: far longer than any test waits on it. */
const SLOW_MS = 30_000;

/** People and the agent token the cluster is created with (by the CLI, before any replica starts). */
export const crew = {
  owner: { name: "olive", password: "olive-owner-pass-1" },
  reviewer: { name: "rita", password: "rita-reviewer-pass-1" },
  agent: "fleet-bot",
} as const;

/** One Gatehouse replica, started as users start it: `node scripts/start.mjs` on a fixed port. */
export class Replica {
  private child: ChildProcessByStdio<null, Readable, Readable> | null = null;
  private exited: Promise<void> = Promise.resolve();
  /** How many times it has been started (its log files are numbered by it). */
  private starts = 0;

  constructor(
    readonly index: number,
    readonly port: number,
    private readonly env: Record<string, string>,
    private readonly dir: string,
  ) {}

  get origin(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** Whether its process is running (it may still be starting). */
  get running(): boolean {
    return this.child !== null && this.child.exitCode === null && this.child.signalCode === null;
  }

  /** Its log (stdout and stderr) of the current, or last, start. */
  get logFile(): string {
    return path.join(this.dir, `replica-${this.index}-${this.starts}.log`);
  }

  /**
   * Starts it in a process group of its own and resolves once it says it listens; rejects,
   * naming its log, when it exits first or says nothing within 120 s (the first start of three
   * replicas at once on two cores compiles nothing, but still boots three Next servers).
   */
  async start(): Promise<void> {
    if (this.running) return;
    this.starts += 1;
    const log = createWriteStream(this.logFile);
    const child = spawn(process.execPath, [path.join(root, "scripts", "start.mjs")], {
      cwd: root,
      env: { ...process.env, ...this.env, PORT: String(this.port) },
      stdio: ["ignore", "pipe", "pipe"],
      detached: true,
    });
    this.child = child;
    this.exited = new Promise((resolve) => child.once("exit", () => resolve()));
    child.stderr.pipe(log);
    await new Promise<void>((resolve, reject) => {
      let seen = "";
      const timer = setTimeout(() => {
        reject(new Error(`replica ${this.index} did not listen within 120 s; see ${this.logFile}`));
      }, 120_000);
      child.stdout.on("data", (chunk: Buffer) => {
        log.write(chunk);
        seen += chunk.toString("utf8");
        if (seen.includes("Gatehouse listening on")) {
          clearTimeout(timer);
          resolve();
        }
      });
      child.once("exit", (code, signal) => {
        clearTimeout(timer);
        reject(new Error(`replica ${this.index} exited (${code ?? signal}); see ${this.logFile}`));
      });
    });
  }

  /**
   * Sends `signal` to its whole process group (`npm start`'s process and the server under it;
   * tool servers run in groups of their own, as they do for users) and resolves once it exited.
   * SIGKILL is a machine dying: nothing of Gatehouse runs any exit code.
   */
  async stop(signal: "SIGTERM" | "SIGKILL" = "SIGTERM"): Promise<void> {
    const pid = this.child?.pid;
    if (!this.running || pid === undefined) return;
    process.kill(-pid, signal);
    const forced = setTimeout(() => process.kill(-pid, "SIGKILL"), 15_000);
    await this.exited;
    clearTimeout(forced);
  }
}

/** Three replicas on one throwaway PostgreSQL, a round-robin proxy in front. */
export interface Cluster {
  replicas: [Replica, Replica, Replica];
  proxy: RoundRobinProxy;
  /** The agent token's secret. */
  agentSecret: string;
  /** Replica `index` (0 to 2); throws for any other. */
  replica(index: number): Replica;
  /** The demo server's state (its `addNoteRuns` counts runs of `add_note`), shared by every copy. */
  demoRuns(): number;
  /** How many times the slow fixture's `write` began, over every copy of it. */
  slowStarts(): number;
  /** Starts every replica that is not running (after a test killed one). */
  ensureRunning(): Promise<void>;
  stop(): Promise<void>;
}

/**
 * Starts PostgreSQL (scripts/postgres.mjs), creates the owner, the reviewer and the agent token
 * with the CLI, then three replicas of the production build (`npm run build` first) on it, each
 * with the same config, secret key and public origin (the proxy's), and the proxy.
 */
export async function startCluster(): Promise<Cluster> {
  const dir = mkdtempSync(path.join(os.tmpdir(), "gatehouse-e2e-replicas-"));
  const pg = await startPostgres({ maxConnections: 200 });
  const slowPids = path.join(dir, "slow.pids");
  const demoState = path.join(dir, "demo-state.json");
  const slowRuns = path.join(dir, "slow-runs.json");
  const replicas: Replica[] = [];
  let proxy: RoundRobinProxy | null = null;
  const stop = async () => {
    await proxy?.close();
    await Promise.all(replicas.map((r) => r.stop("SIGTERM")));
    // Copies of the slow fixture a killed replica left behind, still sleeping on a call.
    for (const pid of readLines(slowPids)) {
      try {
        process.kill(Number(pid), "SIGKILL");
      } catch {
        // Gone already.
      }
    }
    await pg.stop();
    if (!process.env.E2E_KEEP) rmSync(dir, { recursive: true, force: true });
  };
  try {
    const ports = await distinctPorts(3);
    proxy = await RoundRobinProxy.start(ports);
    const configFile = path.join(dir, "gatehouse.json");
    writeFileSync(
      configFile,
      JSON.stringify({
        mcpServers: {
          demo: {
            command: process.execPath,
            args: [path.join(root, "demo", "server.mjs")],
            cwd: root,
            env: { DEMO_STATE_FILE: demoState },
            enabled: true,
          },
          slow: {
            command: process.execPath,
            args: [path.join(root, "test", "fixtures", "servers", "slow.mjs")],
            cwd: root,
            env: { RUNS_FILE: slowRuns, SLOW_MS: String(SLOW_MS), PID_FILE: slowPids },
            enabled: true,
          },
        },
        approvals: { expireAfterSeconds: 900, waitSeconds: 60, selfApproval: false },
      }),
    );
    const env = {
      DATABASE_URL: pg.url,
      GATEHOUSE_SECRET_KEY: randomBytes(32).toString("hex"),
      GATEHOUSE_CONFIG: configFile,
      GATEHOUSE_PUBLIC_ORIGIN: proxy.origin,
      GATEHOUSE_REPLICA_LEASE_SECONDS: String(LEASE_SECONDS),
      HOST: "127.0.0.1",
    };
    // The CLI migrates the empty database; done before the replicas, so none prints a setup link.
    await cli(env, ["user", "add", crew.owner.name, "--role", "owner"], crew.owner.password);
    await cli(env, ["user", "add", crew.reviewer.name, "--role", "reviewer"], crew.reviewer.password);
    const created = await cli(env, ["token", "create", crew.agent]);
    const agentSecret = created.trim().split("\n").at(-1) ?? "";
    for (const [index, port] of ports.entries()) replicas.push(new Replica(index, port, env, dir));
    await Promise.all(replicas.map((r) => r.start()));
    const ensureRunning = async () => {
      await Promise.all(replicas.filter((r) => !r.running).map((r) => r.start()));
    };
    return {
      replicas: replicas as [Replica, Replica, Replica],
      proxy,
      agentSecret,
      demoRuns: () => readJson<{ addNoteRuns: number }>(demoState)?.addNoteRuns ?? 0,
      slowStarts: () => readJson<{ started: number }>(slowRuns)?.started ?? 0,
      replica: (index) => {
        const replica = replicas[index];
        if (!replica) throw new Error(`no replica ${index}`);
        return replica;
      },
      ensureRunning,
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}

function readJson<T>(file: string): T | null {
  try {
    return JSON.parse(readFileSync(file, "utf8")) as T;
  } catch {
    return null;
  }
}

function readLines(file: string): string[] {
  try {
    return readFileSync(file, "utf8").split("\n").filter(Boolean);
  } catch {
    return [];
  }
}

async function distinctPorts(n: number): Promise<number[]> {
  const ports = new Set<number>();
  while (ports.size < n) ports.add(await freePort());
  return [...ports];
}

/** `npm run gatehouse -- <args>` with `input` on stdin; resolves with its stdout, rejects on failure. */
function cli(env: Record<string, string>, args: string[], input = ""): Promise<string> {
  const child: ChildProcessByStdio<Writable, Readable, Readable> = spawn(
    process.execPath,
    ["--conditions=react-server", "--import", "tsx", path.join(root, "server", "cli", "main.ts"), ...args],
    { cwd: root, env: { ...process.env, ...env }, stdio: ["pipe", "pipe", "pipe"] },
  );
  let out = "";
  let err = "";
  child.stdout.on("data", (c: Buffer) => {
    out += c.toString("utf8");
  });
  child.stderr.on("data", (c: Buffer) => {
    err += c.toString("utf8");
  });
  child.stdin.end(`${input}\n`);
  return new Promise((resolve, reject) => {
    child.once("exit", (code) =>
      code === 0 ? resolve(out) : reject(new Error(`gatehouse ${args.join(" ")}: exit ${code}\n${err}`)),
    );
  });
}

type Playwright = { request: { newContext: (o: object) => Promise<APIRequestContext> } };

/** An API context signed in as `who` at `origin` (a replica, or the proxy). */
export async function signedIn(
  playwright: Playwright,
  origin: string,
  who: { name: string; password: string },
): Promise<APIRequestContext> {
  const api = await playwright.request.newContext({ baseURL: origin, extraHTTPHeaders: { Origin: origin } });
  const res = await api.post("/api/session", { data: who });
  if (res.status() !== 200) throw new Error(`sign-in of ${who.name} at ${origin}: ${res.status()}`);
  return api;
}

/** An API context carrying the agent token, at `origin`. */
export function agentAt(playwright: Playwright, origin: string, secret: string): Promise<APIRequestContext> {
  return playwright.request.newContext({
    baseURL: origin,
    extraHTTPHeaders: { Authorization: `Bearer ${secret}` },
  });
}

/** Enables `names` as the owner (`owner`: a signed-in context), with the definitions listed now. */
export async function enableTools(owner: APIRequestContext, names: string[]): Promise<void> {
  const listed = (await (await owner.get("/api/catalogue")).json()) as {
    tools: { localName: string; definitionHash: string; status: string }[];
  };
  for (const name of names) {
    const tool = listed.tools.find((t) => t.localName === name);
    if (!tool) throw new Error(`${name} is not in the catalogue`);
    if (tool.status === "enabled") continue;
    const res = await owner.patch(`/api/catalogue/${name}`, {
      data: { status: "enabled", expectedHash: tool.definitionHash },
    });
    if (res.status() !== 200) throw new Error(`enabling ${name}: ${res.status()} ${await res.text()}`);
  }
}

/** What one replica says of a server: its state and where it runs. */
export interface HeldView {
  state: string;
  tools: { listed: number };
  replica: { label: string | null; here: boolean } | null;
}

/** `server` as the replica behind `owner` (an owner's context at that replica) sees it. */
export async function serverAt(owner: APIRequestContext, server: string): Promise<HeldView | null> {
  const res = await owner.get("/api/servers");
  if (res.status() !== 200) return null;
  const { servers } = (await res.json()) as { servers: ({ name: string } & HeldView)[] };
  return servers.find((s) => s.name === server) ?? null;
}

/**
 * The index of the replica that holds `server` and has it ready, asking each replica in
 * `owners` (owner contexts, one per replica, null for a replica that is down); null when none
 * says so now.
 */
export async function holderOf(owners: (APIRequestContext | null)[], server: string): Promise<number | null> {
  for (const [index, owner] of owners.entries()) {
    if (!owner) continue;
    const view = await serverAt(owner, server).catch(() => null);
    if (view?.replica?.here && view.state === "ready") return index;
  }
  return null;
}

/**
 * Polls `check` until it gives a value other than null (every 200 ms, one check at a time),
 * resolving with it; rejects naming `what` when `timeoutMs` passes first.
 */
export async function until<T>(what: string, timeoutMs: number, check: () => Promise<T | null>): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== null) return value;
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}
