/**
 * What the endpoint's tests share: a real runtime with the demo server, endpoints with
 * test-sized limits, SDK clients closed after each test, and the shape of a refusal.
 */
import { afterEach, expect, vi } from "vitest";
import { connectMcp } from "@/test/support/mcp";
import { startTestRuntime, type TestRuntime } from "@/test/support/runtime";
import { logger } from "../log";
import { AgentMcpEndpoint, type AgentMcpOptions } from "./endpoint";

export interface EndpointFixtures {
  /** Starts the test runtime; it is stopped after the test. */
  start(opts?: Parameters<typeof startTestRuntime>[0]): Promise<TestRuntime>;
  /** The test stopped its runtime itself (a restart): nothing to stop afterwards. */
  forget(): void;
  /** A second endpoint on the test runtime with test-sized limits (and optionally another config). */
  endpoint(
    t: TestRuntime,
    options: AgentMcpOptions,
    config?: TestRuntime["runtime"]["config"],
  ): AgentMcpEndpoint;
  /** An SDK client on `/mcp`, closed after the test. */
  connect(opts: Parameters<typeof connectMcp>[0]): ReturnType<typeof connectMcp>;
}

/**
 * The fixtures of one test file: call it once at the top level, where it registers the
 * `afterEach` that closes clients, then endpoints, then the runtime, and restores real timers.
 */
export function endpointFixtures(): EndpointFixtures {
  let rt: TestRuntime | undefined;
  const endpoints: AgentMcpEndpoint[] = [];
  const cleanups: (() => Promise<void>)[] = [];

  afterEach(async () => {
    vi.useRealTimers();
    for (const c of cleanups.splice(0).reverse()) await c();
    for (const e of endpoints.splice(0)) await e.close();
    await rt?.stop();
    rt = undefined;
  });

  return {
    async start(opts = {}) {
      rt = await startTestRuntime(opts);
      return rt;
    },
    forget() {
      rt = undefined;
    },
    endpoint(t, options, config = t.runtime.config) {
      const r = t.runtime;
      const e = new AgentMcpEndpoint(
        { db: r.db, bus: r.bus, broker: r.broker, manager: r.manager, config, log: logger("test-mcp") },
        { env: {}, ...options },
      );
      endpoints.push(e);
      return e;
    },
    async connect(opts) {
      const c = await connectMcp(opts);
      cleanups.push(() => c.close());
      return c;
    },
  };
}

type RpcError = { jsonrpc: string; id: null; error: { code: number; message: string } };

/** Asserts a JSON-RPC refusal with `status` and resolves with its message. */
export async function expectRefused(res: Response, status: number): Promise<string> {
  expect(res.status).toBe(status);
  expect(res.headers.get("content-type")).toContain("application/json");
  const body = (await res.json()) as RpcError;
  expect(body.jsonrpc).toBe("2.0");
  expect(body.id).toBeNull();
  expect(body.error.message.length).toBeGreaterThan(0);
  return body.error.message;
}
