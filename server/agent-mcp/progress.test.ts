/**
 * A tool server's progress on a running call reaches the `/mcp` agent waiting on it, with the
 * agent's progress token: for a call that runs at once and for a held call once approved, in the
 * server's order and before the result, every value above the one before (Gatehouse's own
 * waiting notifications included), paced, with the message cleaned and capped; REST callers see
 * nothing new. Real tool servers (SDK v2 fixtures over stdio and HTTP,
 * `@modelcontextprotocol/server-everything`), the SDK v1 client on the real `/mcp` route.
 */
import path from "node:path";
import type { CallToolResult, Progress } from "@modelcontextprotocol/sdk/types.js";
import { afterEach, describe, expect, it } from "vitest";
import { countHiddenIn } from "@/lib/hidden-text";
import { freePort, RestartableServer, stopHttpServers } from "@/test/support/http-servers";
import { connectMcp } from "@/test/support/mcp";
import { EVERYTHING } from "@/test/support/mcp-harness";
import {
  bodyOf,
  createAgentToken,
  createTestUser,
  enableTool,
  REPO_ROOT,
  request,
  startTestRuntime,
  type TestRuntime,
  waitForServersReady,
} from "@/test/support/runtime";
import { PROGRESS_GAP_MS, PROGRESS_MESSAGE_MAX_CHARS, watchingCallStarts } from "../calls/run";
import { above, CALL_META_KEY } from "./tools";

const FIXTURES = path.join(REPO_ROOT, "test/fixtures/servers");
const V2 = path.join(FIXTURES, "v2-tools.mjs");
const TALK = path.join(FIXTURES, "progress-talk.mjs");

/** `slow` in three steps far enough apart (400 ms) that pacing (100 ms) never merges two. */
const SLOW_ARGS = { ms: 1200, steps: 3 };

let rt: TestRuntime | undefined;
const cleanups: (() => Promise<void>)[] = [];

afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
  await rt?.stop();
  rt = undefined;
  await stopHttpServers();
});

/** A runtime with `servers` besides the demo one, each ready (its catalogue rows written). */
async function start(
  servers: Record<string, unknown>,
  opts: Omit<Parameters<typeof startTestRuntime>[0] & object, "servers"> = {},
): Promise<TestRuntime> {
  const t = await startTestRuntime({ servers, ...opts });
  rt = t;
  await waitForServersReady(t.runtime, Object.keys(servers));
  return t;
}

async function agent(t: TestRuntime) {
  const c = await connectMcp({ token: await createAgentToken(t.runtime, "bot") });
  cleanups.push(() => c.close());
  return c.client;
}

/**
 * Calls `name` with a progress token; resolves with the result and the progress notifications
 * heard before it (a notification after the result is not counted: the list is read as the
 * result arrives).
 */
async function callWithProgress(
  client: Awaited<ReturnType<typeof agent>>,
  name: string,
  args: Record<string, unknown>,
  onEach: (p: Progress) => void = () => undefined,
): Promise<{ result: CallToolResult; progress: Progress[]; ms: number }> {
  const progress: Progress[] = [];
  const started = performance.now();
  const result = (await client.callTool({ name, arguments: args }, undefined, {
    onprogress: (p) => {
      progress.push(p);
      onEach(p);
    },
  })) as CallToolResult;
  return { result, progress: [...progress], ms: performance.now() - started };
}

function textOf(result: CallToolResult): string {
  return result.content.map((c) => (c.type === "text" ? c.text : "")).join("\n");
}

function expectIncreasing(progress: Progress[]): void {
  for (let i = 1; i < progress.length; i++) {
    expect(progress[i]?.progress).toBeGreaterThan(progress[i - 1]?.progress ?? Number.NEGATIVE_INFINITY);
  }
}

const numbers = (progress: Progress[]) => progress.map(({ progress, total }) => ({ progress, total }));

describe("a call that runs at once", () => {
  it.each(["stdio", "http"] as const)(
    "an agent hears the tool server's progress, in order and as the server numbered it, before the result (SDK v2 server over %s)",
    async (transport) => {
      let entry: Record<string, unknown>;
      if (transport === "stdio") {
        entry = { command: "node", args: [V2, "--era", "modern", "--transport", "stdio"], enabled: true };
      } else {
        const server = new RestartableServer(await freePort(), {
          args: [V2, "--era", "modern", "--transport", "http"],
          env: {},
          ready: /listening \d+\n/,
        });
        await server.start();
        entry = { url: server.url, allowPrivate: true, enabled: true };
      }
      const t = await start({ v2: entry });
      await enableTool(t.runtime, "v2_slow");
      const client = await agent(t);

      const { result, progress } = await callWithProgress(client, "v2_slow", SLOW_ARGS);
      expect(textOf(result)).toBe("slept 1200 ms");
      expect(numbers(progress)).toEqual([
        { progress: 1, total: 3 },
        { progress: 2, total: 3 },
        { progress: 3, total: 3 },
      ]);
      // The keys the protocol reserves speak of the hop from Gatehouse to the tool server (the
      // SDK v2 server stamps its serverInfo on every 2026-07-28 result): not the agent's to read.
      const keys = Object.keys(result._meta ?? {});
      expect(keys).toContain(CALL_META_KEY);
      expect(keys.filter((k) => k.startsWith("io.modelcontextprotocol/"))).toEqual([]);
    },
    30_000,
  );

  it("server-everything's long-running operation reports its steps to the agent", async () => {
    const t = await start({
      everything: {
        command: "node",
        args: [EVERYTHING, "stdio"],
        allowTools: ["trigger-long-running-operation"],
        enabled: true,
      },
    });
    await enableTool(t.runtime, "everything_trigger-long-running-operation");
    const client = await agent(t);

    const { result, progress } = await callWithProgress(client, "everything_trigger-long-running-operation", {
      duration: 1.2,
      steps: 3,
    });
    expect(textOf(result)).toContain("Long running operation completed");
    expect(numbers(progress)).toEqual([
      { progress: 1, total: 3 },
      { progress: 2, total: 3 },
      { progress: 3, total: 3 },
    ]);
  }, 30_000);

  it("the progress a server sends just before its answer, in the same chunk as the answer, still reaches the agent", async () => {
    const t = await start({ talk: { command: "node", args: [TALK], enabled: true } });
    await enableTool(t.runtime, "talk_talk");
    const client = await agent(t);

    const { result, progress } = await callWithProgress(client, "talk_talk", { count: 3, everyMs: 300 });
    expect(textOf(result)).toBe("talked 3");
    expect(numbers(progress)).toEqual([
      { progress: 1, total: 3 },
      { progress: 2, total: 3 },
      { progress: 3, total: 3 },
    ]);
  }, 30_000);

  it("a flood of progress notifications is paced: about ten a second pass, the last one kept, before the result", async () => {
    const t = await start({ talk: { command: "node", args: [TALK], enabled: true } });
    await enableTool(t.runtime, "talk_talk");
    const client = await agent(t);

    const { result, progress, ms } = await callWithProgress(client, "talk_talk", { count: 300, everyMs: 2 });
    expect(textOf(result)).toBe("talked 300");
    // One per gap at most, plus the one held when the call ended; the whole call bounds the span.
    expect(progress.length).toBeLessThanOrEqual(Math.floor(ms / PROGRESS_GAP_MS) + 2);
    expect(progress.length).toBeGreaterThan(1);
    expect(progress.at(-1)).toMatchObject({ progress: 300, total: 300 });
    expectIncreasing(progress);
  }, 30_000);

  it("a progress message with hidden characters and too much text arrives cleaned and capped", async () => {
    const t = await start({ talk: { command: "node", args: [TALK], enabled: true } });
    await enableTool(t.runtime, "talk_talk");
    const client = await agent(t);
    const message = `step\u202E one\u200B\u{E0041}\u{E0042} ${"x".repeat(5000)}`;

    const { progress } = await callWithProgress(client, "talk_talk", { count: 1, message });
    expect(progress).toHaveLength(1);
    const heard = progress[0]?.message ?? "";
    expect(countHiddenIn(heard)).toBe(0);
    expect(heard.startsWith("step one ")).toBe(true);
    expect(heard.length).toBeLessThanOrEqual(PROGRESS_MESSAGE_MAX_CHARS);
    expect(heard.endsWith("…")).toBe(true);
  }, 30_000);
});

describe("a held call", () => {
  it("once approved, the tool server's progress follows Gatehouse's waiting notifications, every value above the one before", async () => {
    const t = await start(
      { v2: { command: "node", args: [V2, "--era", "modern", "--transport", "stdio"], enabled: true } },
      {
        approvals: { waitSeconds: 30 },
        config: { rules: [{ name: "review-slow", tools: ["v2_slow"], decision: "review" }] },
      },
    );
    await enableTool(t.runtime, "v2_slow");
    const rita = await createTestUser(t.runtime, "rita", ["reviewer"]);
    const client = await agent(t);

    let waitingHeard: (id: string) => void = () => undefined;
    const waiting = new Promise<string>((resolve) => {
      waitingHeard = resolve;
    });
    const held = callWithProgress(client, "v2_slow", SLOW_ARGS, (p) => {
      const named = /^waiting for a reviewer to approve call ([0-9a-f-]{36})/.exec(p.message ?? "");
      if (named?.[1]) waitingHeard(named[1]);
    });
    const id = await waiting;
    expect((await request("POST", `/api/calls/${id}/approve`, { cookie: rita.cookie })).status).toBe(200);

    const { result, progress } = await held;
    expect(textOf(result)).toBe("slept 1200 ms");
    expectIncreasing(progress);
    // Gatehouse's own notifications say what it does; the server's carry no message.
    const approvedAt = progress.findIndex((p) => p.message === `call ${id} approved; running`);
    const upstream = progress.filter((p) => p.message === undefined);
    expect(approvedAt).toBeGreaterThan(0);
    expect(upstream).toHaveLength(3);
    expect(progress.indexOf(upstream[0] as Progress)).toBeGreaterThan(approvedAt);
    // Shifted past the seconds waited, the server's steps and total keep their distances.
    const base = (upstream[0]?.progress ?? 0) - 1;
    expect(base).toBeGreaterThan(progress[approvedAt]?.progress ?? Number.POSITIVE_INFINITY);
    expect(numbers(upstream)).toEqual(
      [1, 2, 3].map((step) => ({
        progress: expect.closeTo(base + step, 9),
        total: expect.closeTo(base + 3, 9),
      })),
    );
  }, 30_000);
});

describe("REST", () => {
  it("a REST call of a tool that reports progress answers as before; its progress goes to the call's own channel, never to the live-event stream", async () => {
    const t = await start({
      v2: { command: "node", args: [V2, "--era", "modern", "--transport", "stdio"], enabled: true },
    });
    await enableTool(t.runtime, "v2_slow");
    const token = await createAgentToken(t.runtime, "bot");
    const live: string[] = [];
    const unsubscribe = t.runtime.bus.subscribe((e) => live.push(e.type));
    cleanups.push(async () => unsubscribe());
    const published: number[] = [];

    // The route runs in this test's context: the call's start is told here, as to an /mcp request.
    const res = await watchingCallStarts(
      (id) => {
        const stop = t.runtime.bus.subscribeProgress(id, (e) => published.push(e.progress));
        cleanups.push(async () => stop());
      },
      () => request("POST", "/api/calls", { bearer: token, body: { tool: "v2_slow", arguments: SLOW_ARGS } }),
    );
    expect(res.status).toBe(200);
    const body = await bodyOf<{ status: string; result: CallToolResult }>(res);
    expect(body.status).toBe("succeeded");
    expect(textOf(body.result)).toBe("slept 1200 ms");
    expect(published).toEqual([1, 2, 3]);
    expect(live).not.toContain("call.progress");
    expect(live).toContain("call");
  }, 30_000);
});

describe("the scale progress values share", () => {
  it("a value Gatehouse moves on is above the last one sent, however large a server made it", () => {
    for (const last of [0, 1, 59.5, 1e10, 1e17, 1.7e308 / 8, -5]) expect(above(last)).toBeGreaterThan(last);
    expect(above(0)).toBe(1e-6);
  });
});
