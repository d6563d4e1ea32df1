/**
 * What the call-flow tests share: runtimes started per test and stopped after it, the people of
 * a flow (an agent and two reviewers), the requests they make, and the mutable fixture server
 * whose tool list a test rewrites. Real runtimes, real fixture servers, the real route modules.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { asc, eq } from "drizzle-orm";
import { afterEach, expect } from "vitest";
import type { CallStoryView, CallView } from "@/lib/api-types";
import {
  ADD_NOTE,
  bodyOf,
  createAgentToken,
  createTestUser,
  enableTool,
  LIST_NOTES,
  REPO_ROOT,
  request,
  startTestRuntime,
  type TestRuntime,
  waitForEvent,
} from "@/test/support/runtime";
import { getToolRow } from "../catalogue/catalogue";
import { closeDb, type Db, first, openDb, openStore } from "../store/db";
import { auditEvents, calls } from "../store/schema";

export type ErrorBody = { error: { code: string; message: string } };

/**
 * Registers an `afterEach` that stops every runtime the test started. `start` runtimes are
 * stopped; `extra` ones were stopped with `keepDir` to hand their folder on, and their folder is
 * removed too, in case no later runtime took it.
 */
export function runtimes(): {
  start(opts?: Parameters<typeof startTestRuntime>[0]): Promise<TestRuntime>;
  extra: TestRuntime[];
} {
  const live: TestRuntime[] = [];
  const extra: TestRuntime[] = [];
  afterEach(async () => {
    for (const r of live.splice(0)) await r.stop();
    for (const r of extra.splice(0)) {
      await r.stop();
      rmSync(r.dir, { recursive: true, force: true });
    }
  });
  return {
    async start(opts = {}) {
      const rt = await startTestRuntime(opts);
      live.push(rt);
      return rt;
    },
    extra,
  };
}

/** An agent token ("agent-a") and two reviewers, alice and bob. */
export async function agentAndReviewers(rt: TestRuntime) {
  return {
    agent: await createAgentToken(rt.runtime, "agent-a"),
    alice: await createTestUser(rt.runtime, "alice", ["reviewer"]),
    bob: await createTestUser(rt.runtime, "bob", ["reviewer"]),
  };
}

/** {@link agentAndReviewers}, with both demo tools enabled. */
export async function people(rt: TestRuntime) {
  await enableTool(rt.runtime, LIST_NOTES);
  await enableTool(rt.runtime, ADD_NOTE);
  return agentAndReviewers(rt);
}

/** A call of `tool` that must answer `status` (default 202, pending). */
export async function call(
  bearer: string,
  tool: string,
  args: Record<string, unknown>,
  status = 202,
): Promise<CallView> {
  const res = await request("POST", "/api/calls", { bearer, body: { tool, arguments: args } });
  expect(res.status, JSON.stringify(await res.clone().json())).toBe(status);
  return bodyOf<CallView>(res);
}

/** A pending `demo_add_note` call. */
export async function addNote(bearer: string, text = "hello"): Promise<CallView> {
  const res = await request("POST", "/api/calls", { bearer, body: { tool: ADD_NOTE, arguments: { text } } });
  expect(res.status).toBe(202);
  const pending = await bodyOf<CallView>(res);
  expect(pending.status).toBe("pending");
  return pending;
}

export function approve(id: string, cookie: string): Promise<Response> {
  return request("POST", `/api/calls/${id}/approve`, { cookie });
}

export function deny(id: string, cookie: string, reason: string): Promise<Response> {
  return request("POST", `/api/calls/${id}/deny`, { cookie, body: { reason } });
}

export async function getCall(
  id: string,
  auth: { bearer?: string; cookie?: string },
  wait?: number,
): Promise<Response> {
  return request("GET", `/api/calls/${id}${wait === undefined ? "" : `?wait=${wait}`}`, auth);
}

export async function story(id: string, cookie: string): Promise<CallStoryView> {
  const res = await request("GET", `/api/calls/${id}/story`, { cookie });
  expect(res.status).toBe(200);
  return bodyOf<CallStoryView>(res);
}

/**
 * What starts a runtime again on the store of `rt` (stopped with `keepDir`): its folder, and on
 * PostgreSQL its database.
 */
export function sameStore(rt: TestRuntime): { dir: string; databaseUrl?: string } {
  return { dir: rt.dir, ...(rt.databaseUrl ? { databaseUrl: rt.databaseUrl } : {}) };
}

/**
 * Runs `fn` on the store of `rt` (running, or stopped with `keepDir`) through a handle of its
 * own, as another process would, then closes that handle.
 */
export async function onStoreOf<T>(rt: TestRuntime, fn: (db: Db) => Promise<T>): Promise<T> {
  const db = rt.databaseUrl
    ? await openStore({ dialect: "postgres", url: rt.databaseUrl })
    : openDb(rt.dbFile);
  try {
    return await fn(db);
  } finally {
    await closeDb(db);
  }
}

export async function auditRows(rt: TestRuntime, callId: string) {
  return await rt.runtime.db
    .select()
    .from(auditEvents)
    .where(eq(auditEvents.callId, callId))
    .orderBy(asc(auditEvents.id));
}

export async function auditActions(rt: TestRuntime, callId: string): Promise<string[]> {
  return (await auditRows(rt, callId)).map((r) => r.action);
}

export async function callRow(rt: TestRuntime, id: string) {
  return await first(rt.runtime.db.select().from(calls).where(eq(calls.id, id)));
}

const MUTABLE = path.join(REPO_ROOT, "test", "fixtures", "servers", "mutable.mjs");
/** The mutable fixture's `write_file` as the catalogue names it. */
export const WRITE = "mut_write_file";
const SCHEMA = {
  type: "object",
  properties: {
    path: { type: "string" },
    fail: { type: "boolean" },
    bytes: { type: "integer" },
  },
  required: ["path"],
  additionalProperties: false,
};

export interface Mutable {
  rt: TestRuntime;
  /** Rewrites the fixture's tool list (the server re-reads it on every tools/list). */
  setTools(tools: object[]): void;
  /** How many times the fixture really ran `name`. */
  runs(name: string): number;
}

export function writeFileTool(over: Record<string, unknown> = {}): object {
  return { name: "write_file", description: "Writes a file.", inputSchema: SCHEMA, ...over };
}

/** A runtime (from `start`) with the demo server and the mutable fixture (server "mut"), its tools listed. */
export async function startWithMutable(
  start: (opts: Parameters<typeof startTestRuntime>[0]) => Promise<TestRuntime>,
  tools: object[] = [writeFileTool()],
): Promise<Mutable> {
  const dir = mkdtempSync(path.join(tmpdir(), "gatehouse-test-"));
  const toolsFile = path.join(dir, "mutable-tools.json");
  const runsFile = path.join(dir, "mutable-runs.json");
  const setTools = (list: object[]) => writeFileSync(toolsFile, JSON.stringify({ tools: list }));
  setTools(tools);
  const rt = await start({
    dir,
    servers: {
      mut: {
        command: "node",
        args: [MUTABLE],
        env: { TOOLS_FILE: toolsFile, RUNS_FILE: runsFile },
        enabled: true,
      },
    },
  });
  const listed = async () =>
    rt.runtime.manager.get("mut").snapshot().state === "ready" &&
    (await getToolRow(rt.runtime.db, WRITE)) !== null;
  await waitForEvent(rt.runtime.bus, listed, { already: listed, what: () => "the mutable server's tools" });
  return {
    rt,
    setTools,
    runs: (name) =>
      existsSync(runsFile)
        ? ((JSON.parse(readFileSync(runsFile, "utf8")) as Record<string, number>)[name] ?? 0)
        : 0,
  };
}

/** Makes the fixture announce a change of its tools and resolves once the catalogue has it. */
export async function announceChange(rt: TestRuntime, localName: string): Promise<void> {
  const before = (await getToolRow(rt.runtime.db, localName))?.definitionHash;
  const changed = async () => (await getToolRow(rt.runtime.db, localName))?.definitionHash !== before;
  const seen = waitForEvent(rt.runtime.bus, async (e) => e.type === "catalogue" && (await changed()), {
    what: () => `the catalogue to record the new definition of ${localName}`,
  });
  const res = await rt.runtime.manager.callTool("mut", "announce_change", {});
  expect(res.isError).not.toBe(true);
  await seen;
}
