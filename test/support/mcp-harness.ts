/**
 * What the MCP manager's integration tests share: paths, server configs, and a manager whose
 * onState/onTools events are recorded with bounded waits on them (never sleeps).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { CallToolResult, Tool } from "@modelcontextprotocol/client";
import { expect } from "vitest";
import { GatehouseError } from "@/lib/errors";
import type { GatehouseConfig, ServerConfig } from "@/server/config";
import type { Logger } from "@/server/log";
import { McpManager } from "@/server/mcp/manager";
import type { SupervisorDeps, SupervisorSnapshot } from "@/server/mcp/supervisor";

export const ROOT = fileURLToPath(new URL("../..", import.meta.url));
export const FIXTURES = join(ROOT, "test/fixtures/servers");
export const DEMO = join(ROOT, "demo/server.mjs");
export const EVERYTHING = join(ROOT, "node_modules/@modelcontextprotocol/server-everything/dist/index.js");
export const NODE = process.execPath;
export const MiB = 1024 * 1024;

// Captured at load, before any test fakes timers: the harness's deadlines are real time.
const realSetTimeout = globalThis.setTimeout;
const realClearTimeout = globalThis.clearTimeout;

export const quiet: Logger = { debug() {}, info() {}, warn() {}, error() {} };

/** A logger that keeps every line as `<level> <message>`, for tests of what reaches the log. */
export function recordingLogger(): { log: Logger; lines: string[] } {
  const lines: string[] = [];
  const at =
    (level: string) =>
    (message: string): void => {
      lines.push(`${level} ${message}`);
    };
  return { log: { debug: at("debug"), info: at("info"), warn: at("warn"), error: at("error") }, lines };
}

const tempDirs: string[] = [];

/** A temp dir removed by {@link cleanUp}. */
export function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "gatehouse-mcp-test-"));
  tempDirs.push(dir);
  return dir;
}

/** A stdio server running `node script`, in its own temp dir, with the product's defaults. */
export function stdioServer(name: string, script: string, over: Partial<ServerConfig> = {}): ServerConfig {
  return {
    name,
    transport: "stdio",
    command: NODE,
    args: [script],
    env: {},
    cwd: tempDir(),
    url: null,
    headers: {},
    allowPrivate: false,
    allowTools: null,
    maxTools: 12,
    timeoutMs: 10_000,
    minIntervalMs: 0,
    maxFrameBytes: 4 * MiB,
    enabled: true,
    ...over,
  };
}

/**
 * A config object built directly rather than through `validateConfig`, so that a test may use
 * `refreshSeconds: 1` (the validator's minimum is 10 s; 0 disables the periodic refresh).
 */
export function gatehouse(servers: ServerConfig[], refreshSeconds = 0): GatehouseConfig {
  return {
    path: "",
    servers,
    approvals: { expireAfterSeconds: 900, waitSeconds: 60, selfApproval: false },
    catalogue: { descriptionMaxChars: 1024, refreshSeconds },
    notifications: { publicUrl: null, webhooks: [], email: null },
    rules: [],
    toolSets: [],
    agentLimits: { callsPerMinute: 0, maxPendingCalls: 20, maxConcurrentCalls: 0 },
  };
}

const harnesses: Harness[] = [];

/** A manager whose onState/onTools events are recorded, with bounded waits on them. */
export class Harness {
  readonly events: SupervisorSnapshot[] = [];
  readonly tools = new Map<string, Tool[]>();
  readonly manager: McpManager;
  private readonly listeners = new Set<() => void>();

  constructor(config: GatehouseConfig, backoff?: SupervisorDeps["backoff"], log: Logger = quiet) {
    this.manager = new McpManager(config, {
      log,
      backoff,
      onState: (snapshot) => {
        this.events.push(snapshot);
        this.notify();
      },
      onTools: (server, tools) => {
        this.tools.set(server.name, tools);
        this.notify();
      },
    });
    harnesses.push(this);
  }

  private notify(): void {
    for (const listener of [...this.listeners]) listener();
  }

  /** Resolves with the first defined value of `probe`, checked now and after every event. */
  waitFor<T>(what: string, probe: () => T | undefined, timeoutMs = 15_000): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const done = () => {
        realClearTimeout(timer);
        this.listeners.delete(check);
      };
      const check = () => {
        const value = probe();
        if (value !== undefined) {
          done();
          resolve(value);
        }
      };
      const timer = realSetTimeout(() => {
        done();
        const seen = this.events.map((e) => `${e.name}:${e.state}${e.lastError ? ` (${e.lastError})` : ""}`);
        reject(new Error(`no ${what} within ${timeoutMs} ms; states seen: ${seen.join(", ") || "none"}`));
      }, timeoutMs);
      this.listeners.add(check);
      check();
    });
  }

  /** The first event at or after `from` in which `server` is in `state`, and its index. */
  waitForState(
    server: string,
    state: SupervisorSnapshot["state"],
    from = 0,
  ): Promise<{ snapshot: SupervisorSnapshot; index: number }> {
    return this.waitFor(`"${state}" state of ${server}`, () => {
      for (let i = from; i < this.events.length; i++) {
        const snapshot = this.events[i];
        if (snapshot?.name === server && snapshot.state === state) return { snapshot, index: i };
      }
      return undefined;
    });
  }

  /** States `server` went through in events from index `from` on. */
  statesOf(server: string, from = 0): string[] {
    return this.events
      .slice(from)
      .filter((e) => e.name === server)
      .map((e) => e.state);
  }
}

/** Stops every harness's manager (and so its children) and removes the temp dirs; for afterEach. */
export async function cleanUp(): Promise<void> {
  await Promise.all(harnesses.splice(0).map((h) => h.manager.stop()));
  for (const dir of tempDirs.splice(0)) rmSync(dir, { recursive: true, force: true });
}

/** The text of a tool result's first content block (a result of either SDK's types). */
export function text(result: { content?: unknown }): string {
  const content = Array.isArray(result.content) ? (result.content as CallToolResult["content"]) : [];
  const first = content[0];
  if (first?.type !== "text") throw new Error(`expected text content, got ${JSON.stringify(result.content)}`);
  return first.text;
}

/** Awaits `promise`, which must reject; returns the error and how long it took from `start`. */
export async function rejection(
  promise: Promise<unknown>,
  start: number,
): Promise<{ error: unknown; ms: number }> {
  try {
    await promise;
  } catch (error) {
    return { error, ms: performance.now() - start };
  }
  throw new Error("expected the promise to reject, but it resolved");
}

export function expectGatehouseError(error: unknown, code: string): GatehouseError {
  expect(error).toBeInstanceOf(GatehouseError);
  const e = error as GatehouseError;
  expect(e.code).toBe(code);
  return e;
}
