/**
 * Real HTTP MCP servers that a test starts itself (not Gatehouse), kills and starts again on the
 * same port, as an operator restarting a tool server would: a fixture program or
 * `@modelcontextprotocol/server-everything` in `streamableHttp` mode. Waits are on the program's
 * own "listening" line, never sleeps. {@link stopHttpServers} (for afterEach) kills what is left.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { createServer } from "node:net";
import type { ServerConfig } from "@/server/config";
import { EVERYTHING, NODE, stdioServer } from "./mcp-harness";

/** A free port on 127.0.0.1 (the kernel's choice, released before it is returned). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const address = srv.address();
      if (address === null || typeof address === "string") {
        reject(new Error("no port"));
        return;
      }
      srv.close(() => resolve(address.port));
    });
  });
}

/** An HTTP server entry for Gatehouse with the product's defaults; `allowPrivate` as given. */
export function httpServerConfig(name: string, url: string, over: Partial<ServerConfig> = {}): ServerConfig {
  return {
    ...stdioServer(name, ""),
    transport: "http",
    command: null,
    args: [],
    cwd: null,
    url,
    allowPrivate: true,
    ...over,
  };
}

export interface HttpServerSpec {
  /** Program arguments after `node`. */
  args: string[];
  env: Record<string, string>;
  /** The line the program writes once it accepts connections, on stdout or stderr. */
  ready: RegExp;
}

const running = new Set<ChildProcess>();

/**
 * One server program on a fixed port: `start()` runs it and resolves once it listens, `kill()`
 * SIGKILLs it (its sessions die with it) and resolves once it has exited. Start again for a
 * restart on the same port.
 */
export class RestartableServer {
  private child: ChildProcess | null = null;
  /** Output of the current run, stdout and stderr together. */
  output = "";
  /** Runs started so far. */
  starts = 0;

  constructor(
    readonly port: number,
    private readonly spec: HttpServerSpec,
  ) {}

  get url(): string {
    return `http://127.0.0.1:${this.port}/mcp`;
  }

  start(timeoutMs = 15_000): Promise<void> {
    if (this.child) throw new Error("already running");
    const child = spawn(NODE, this.spec.args, {
      env: { ...process.env, ...this.spec.env, PORT: String(this.port) },
      stdio: ["ignore", "pipe", "pipe"],
    });
    this.child = child;
    this.starts++;
    this.output = "";
    running.add(child);
    child.once("exit", () => running.delete(child));
    return new Promise((resolve, reject) => {
      const onData = (chunk: Buffer) => {
        this.output += chunk.toString("utf8");
        if (this.spec.ready.test(this.output)) {
          done();
          resolve();
        }
      };
      const onExit = (code: number | null, signal: string | null) => {
        done();
        reject(new Error(`server exited (${signal ?? code}) before listening; output: ${this.output}`));
      };
      const timer = setTimeout(() => {
        done();
        reject(new Error(`server did not listen within ${timeoutMs} ms; output: ${this.output}`));
      }, timeoutMs);
      const done = () => {
        clearTimeout(timer);
        child.off("exit", onExit);
      };
      child.stdout?.on("data", onData);
      child.stderr?.on("data", onData);
      child.once("exit", onExit);
    });
  }

  async kill(): Promise<void> {
    const child = this.child;
    this.child = null;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once("exit", resolve));
    child.kill("SIGKILL");
    await exited;
  }

  /** Kills the server and starts it again on the same port: every session it held is gone. */
  async restart(): Promise<void> {
    await this.kill();
    await this.start();
  }
}

/** `@modelcontextprotocol/server-everything` over streamable HTTP on `port`. */
export function everythingOverHttp(port: number): RestartableServer {
  return new RestartableServer(port, {
    args: [EVERYTHING, "streamableHttp"],
    env: {},
    ready: new RegExp(`listening on port ${port}`),
  });
}

/** A fixture program from test/fixtures/servers that prints "listening <port>". */
export function fixtureOverHttp(
  port: number,
  script: string,
  env: Record<string, string>,
): RestartableServer {
  return new RestartableServer(port, { args: [script], env, ready: /listening \d+\n/ });
}

/** Kills every server a test left running; for afterEach. */
export async function stopHttpServers(): Promise<void> {
  await Promise.all(
    [...running].map(async (child) => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((resolve) => child.once("exit", resolve));
      child.kill("SIGKILL");
      await exited;
    }),
  );
  running.clear();
}
