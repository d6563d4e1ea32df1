/**
 * Limits per agent on the call path, on the store of the project under test: `callsPerMinute` as
 * a token bucket (REST 429 `rate_limited` with `Retry-After`; a JSON-RPC error on `/mcp`),
 * `maxPendingCalls` (the next call that would wait is refused `too_many_pending`, reads still
 * run), each refusal audited once a minute however many come. The buckets themselves, with a
 * clock the test moves, in memory and in the store (shared by two limiters on one store).
 */
import { join } from "node:path";
import { ErrorCode } from "@modelcontextprotocol/sdk/types.js";
import { and, eq } from "drizzle-orm";
import { afterEach, describe, expect, it } from "vitest";
import type { TokenActivityView } from "@/lib/api-types";
import { connectMcp } from "@/test/support/mcp";
import { FIXTURES } from "@/test/support/mcp-harness";
import {
  ADD_NOTE,
  bodyOf,
  createAgentToken,
  createTestUser,
  enableTool,
  LIST_NOTES,
  request,
  startTestRuntime,
  type TestRuntime,
  waitForServersReady,
} from "@/test/support/runtime";
import { rpcRefusal } from "../agent-mcp/files-fixtures";
import { RATE_LIMITED_RPC } from "../agent-mcp/tools";
import { auditEvents, calls } from "../store/schema";
import { MemoryRates, StoreRates } from "./rates";

let rt: TestRuntime | undefined;
const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
  await rt?.stop();
  rt = undefined;
});

async function start(config: Record<string, unknown>): Promise<TestRuntime> {
  rt = await startTestRuntime({ config });
  await enableTool(rt.runtime, LIST_NOTES);
  await enableTool(rt.runtime, ADD_NOTE);
  return rt;
}

const limitedRows = (t: TestRuntime, actor: string) =>
  t.runtime.db
    .select()
    .from(auditEvents)
    .where(and(eq(auditEvents.action, "agent.limited"), eq(auditEvents.actor, actor)));

describe("callsPerMinute", () => {
  it("in memory: the 61st call in a minute is refused with when to retry, and the next minute lets 60 through", async () => {
    const rates = new MemoryRates();
    const t0 = Date.parse("2026-12-07T10:00:00Z");
    for (let i = 0; i < 60; i++) expect(await rates.take("bot", 60, t0)).toBeNull();
    expect(await rates.take("bot", 60, t0)).toBe(1);
    // Another token has its own bucket.
    expect(await rates.take("other", 60, t0)).toBeNull();
    const t1 = t0 + 60_000;
    for (let i = 0; i < 60; i++) expect(await rates.take("bot", 60, t1)).toBeNull();
    expect(await rates.take("bot", 60, t1)).toBe(1);
    // Refills evenly: one call back after a second, at 60 a minute.
    expect(await rates.take("bot", 60, t1 + 1000)).toBeNull();
    expect(await rates.take("bot", 60, t1 + 1000)).toBe(1);
  });

  it("in the store: two limiters on one store share each bucket, and a clock that lags takes nothing back", async () => {
    const t = await start({});
    const a = new StoreRates(t.runtime.db);
    const b = new StoreRates(t.runtime.db);
    const t0 = Date.parse("2026-12-07T10:00:00Z");
    const taken = await Promise.all(
      Array.from({ length: 8 }, (_, i) => (i % 2 === 0 ? a : b).take("bot", 5, t0)),
    );
    expect(taken.filter((r) => r === null)).toHaveLength(5);
    expect(taken.filter((r) => r !== null)).toEqual([12, 12, 12]);
    // A replica whose clock is behind refills nothing.
    expect(await b.take("bot", 5, t0 - 30_000)).toBe(12);
    expect(await a.take("bot", 5, t0 + 12_000)).toBeNull();
    expect(await b.take("bot", 5, t0 + 12_000)).toBe(12);
  });

  it("REST answers 429 rate_limited with Retry-After, /mcp a JSON-RPC error; the refusals are one audit row", async () => {
    const t = await start({ toolSets: { quick: { tools: ["demo_*"], limits: { callsPerMinute: 3 } } } });
    const bot = await createAgentToken(t.runtime, "quick-bot", { toolSet: "quick" });
    const free = await createAgentToken(t.runtime, "free-bot");
    for (let i = 0; i < 3; i++) {
      const ok = await request("POST", "/api/calls", { bearer: bot, body: { tool: LIST_NOTES } });
      expect(ok.status).toBe(200);
    }
    const refused = await request("POST", "/api/calls", { bearer: bot, body: { tool: LIST_NOTES } });
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    expect(((await refused.json()) as { error: { code: string } }).error.code).toBe("rate_limited");
    // A token without a set has agentLimits, here none: not slowed by another's bucket.
    for (let i = 0; i < 5; i++) {
      expect((await request("POST", "/api/calls", { bearer: free, body: { tool: LIST_NOTES } })).status).toBe(
        200,
      );
    }

    const { client, close } = await connectMcp({ token: bot });
    cleanups.push(close);
    const failure = await rpcRefusal(client.callTool({ name: LIST_NOTES, arguments: {} }));
    expect(failure.code).toBe(RATE_LIMITED_RPC);
    expect((failure.data as { retryAfterSeconds?: number }).retryAfterSeconds).toBeGreaterThanOrEqual(1);
    expect(failure.code).not.toBe(ErrorCode.InternalError);

    const rows = await limitedRows(t, "quick-bot");
    expect(rows).toHaveLength(1);
    expect(rows[0]?.subject).toBe("rate_limited");
    // No call row for a refusal by a limit: the three that ran, nothing else.
    expect(await t.runtime.db.select().from(calls).where(eq(calls.requesterName, "quick-bot"))).toHaveLength(
      3,
    );
  });
});

describe("maxPendingCalls", () => {
  it("the 21st call that would wait is refused too_many_pending, writing nothing, while reads still run", async () => {
    const t = await start({});
    const bot = await createAgentToken(t.runtime, "busy-bot");
    for (let i = 0; i < 20; i++) {
      const held = await request("POST", "/api/calls", {
        bearer: bot,
        body: { tool: ADD_NOTE, arguments: { text: `n${i}` } },
      });
      expect(held.status).toBe(202);
    }
    for (let i = 0; i < 2; i++) {
      const refused = await request("POST", "/api/calls", {
        bearer: bot,
        body: { tool: ADD_NOTE, arguments: { text: "one too many" } },
      });
      expect(refused.status).toBe(429);
      expect(refused.headers.get("retry-after")).toBe("30");
      const body = (await refused.json()) as { error: { code: string; message: string } };
      expect(body.error.code).toBe("too_many_pending");
      expect(body.error.message).toMatch(/20 calls waiting/);
    }
    const read = await request("POST", "/api/calls", { bearer: bot, body: { tool: LIST_NOTES } });
    expect(read.status).toBe(200);
    const pending = await t.runtime.db
      .select()
      .from(calls)
      .where(and(eq(calls.requesterName, "busy-bot"), eq(calls.status, "pending")));
    expect(pending).toHaveLength(20);
    expect(await limitedRows(t, "busy-bot")).toHaveLength(1);
    // Another agent's calls still wait as usual.
    const other = await createAgentToken(t.runtime, "calm-bot");
    expect(
      (
        await request("POST", "/api/calls", {
          bearer: other,
          body: { tool: ADD_NOTE, arguments: { text: "x" } },
        })
      ).status,
    ).toBe(202);
  });

  it("a set's limit overrides agentLimits; 0 turns it off", async () => {
    const t = await start({
      agentLimits: { maxPendingCalls: 0 },
      toolSets: { tight: { tools: ["demo_*"], limits: { maxPendingCalls: 2 } } },
    });
    const tight = await createAgentToken(t.runtime, "tight-bot", { toolSet: "tight" });
    const loose = await createAgentToken(t.runtime, "loose-bot");
    const post = (bearer: string) =>
      request("POST", "/api/calls", { bearer, body: { tool: ADD_NOTE, arguments: { text: "x" } } });
    expect((await post(tight)).status).toBe(202);
    expect((await post(tight)).status).toBe(202);
    expect((await post(tight)).status).toBe(429);
    for (let i = 0; i < 25; i++) expect((await post(loose)).status).toBe(202);
  });
});

describe("maxConcurrentCalls", () => {
  it("the call that would run beside the token's most is refused too_many_concurrent_calls; one that waits is not; an answer frees a place", async () => {
    rt = await startTestRuntime({
      servers: {
        slow: {
          command: process.execPath,
          args: [join(FIXTURES, "silent-cancel.mjs")],
          timeoutMs: 3000,
          enabled: true,
        },
      },
      config: {
        rules: [{ name: "hang-runs", tools: ["slow_hang"], decision: "allow" }],
        toolSets: { one: { tools: ["slow_*", "demo_*"], limits: { maxConcurrentCalls: 1 } } },
      },
    });
    const t = rt;
    await waitForServersReady(t.runtime, ["slow"]);
    for (const tool of [LIST_NOTES, ADD_NOTE, "slow_hang"]) await enableTool(t.runtime, tool);
    const one = await createAgentToken(t.runtime, "one-bot", { toolSet: "one" });
    const free = await createAgentToken(t.runtime, "free-bot");
    // A call run at once is told of as a fact of the process (no event goes to browsers).
    const started = new Promise<void>((resolve) => {
      const stop = t.runtime.bus.observeCalls((fact) => {
        if (fact.call.tool !== "slow_hang" || fact.call.status !== "running") return;
        stop();
        resolve();
      });
    });
    const hung = request("POST", "/api/calls", { bearer: one, body: { tool: "slow_hang" } });
    await started;

    const second = await request("POST", "/api/calls", { bearer: one, body: { tool: LIST_NOTES } });
    expect(second.status).toBe(429);
    expect(second.headers.get("retry-after")).toBe("1");
    expect((await bodyOf<{ error: { code: string } }>(second)).error.code).toBe("too_many_concurrent_calls");
    // A call that would wait for a reviewer runs nothing now: it is not held back.
    const held = await request("POST", "/api/calls", {
      bearer: one,
      body: { tool: ADD_NOTE, arguments: { text: "later" } },
    });
    expect(held.status).toBe(202);
    // Another token has its own count.
    expect((await request("POST", "/api/calls", { bearer: free, body: { tool: LIST_NOTES } })).status).toBe(
      200,
    );
    // /mcp says the same as a back-off error.
    const { client, close } = await connectMcp({ token: one });
    cleanups.push(close);
    const failure = await rpcRefusal(client.callTool({ name: LIST_NOTES, arguments: {} }));
    expect(failure.code).toBe(RATE_LIMITED_RPC);
    expect((failure.data as { code?: string }).code).toBe("too_many_concurrent_calls");

    // The hung call ends at its deadline (outcome unknown): its place is free again.
    expect((await bodyOf<{ status: string }>(await hung)).status).toBe("interrupted");
    expect((await request("POST", "/api/calls", { bearer: one, body: { tool: LIST_NOTES } })).status).toBe(
      200,
    );
    const rows = await limitedRows(t, "one-bot");
    expect(rows.map((r) => r.subject)).toEqual(["too_many_concurrent_calls"]);
  });
});

describe("token activity", () => {
  it("owners see each token's calls in the last hour, its calls waiting now, and when a limit last refused it", async () => {
    const t = await start({ toolSets: { quick: { tools: ["demo_*"], limits: { callsPerMinute: 2 } } } });
    const quick = await createAgentToken(t.runtime, "quick-bot", { toolSet: "quick" });
    const writer = await createAgentToken(t.runtime, "writer-bot");
    await createAgentToken(t.runtime, "idle-bot");
    for (let i = 0; i < 3; i++)
      await request("POST", "/api/calls", { bearer: quick, body: { tool: LIST_NOTES } });
    await request("POST", "/api/calls", { bearer: writer, body: { tool: LIST_NOTES } });
    const held = await request("POST", "/api/calls", {
      bearer: writer,
      body: { tool: ADD_NOTE, arguments: { text: "waits" } },
    });
    expect(held.status).toBe(202);

    const owner = await createTestUser(t.runtime, "olga", ["owner"]);
    const res = await request("GET", "/api/tokens", { cookie: owner.cookie });
    expect(res.status).toBe(200);
    const { activity } = await bodyOf<{ activity: Record<string, TokenActivityView> }>(res);
    expect(activity["quick-bot"]).toMatchObject({ callsLastHour: 2, pendingNow: 0 });
    expect(Date.parse(activity["quick-bot"]?.lastLimitedAt ?? "")).toBeGreaterThan(Date.now() - 60_000);
    expect(activity["writer-bot"]).toEqual({ callsLastHour: 2, pendingNow: 1, lastLimitedAt: null });
    expect(activity["idle-bot"]).toBeUndefined();
    // Agents do not see it.
    expect((await request("GET", "/api/tokens", { bearer: writer })).status).toBe(403);
  });
});
