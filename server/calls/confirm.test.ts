/**
 * The confirm flow, production grade (issue 6): approval bound to what was seen, expiry the
 * waiting agent can see, the audit trail of each call's life, capped results, the reviewer's
 * context (why approval, the tool's description) and the activity list's filters and story.
 * A real runtime with real fixture servers that count their runs; requests go through the real
 * route modules.
 */
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import Database from "better-sqlite3";
import { asc, eq } from "drizzle-orm";
import { afterEach, describe, expect, it } from "vitest";
import type { CallStoryView, CallsPage, CallView } from "@/lib/api-types";
import {
  ADD_NOTE,
  bodyOf,
  callStatus,
  createAgentToken,
  createTestUser,
  enableTool,
  LIST_NOTES,
  REPO_ROOT,
  request,
  startTestRuntime,
  type TestRuntime,
  waitForCallStatus,
  waitForEvent,
} from "@/test/support/runtime";
import { getToolRow } from "../catalogue/catalogue";
import { auditEvents, calls } from "../store/schema";
import { RESULT_STORE_MAX_BYTES } from "./broker";

type ErrorBody = { error: { code: string; message: string } };

const MUTABLE = path.join(REPO_ROOT, "test", "fixtures", "servers", "mutable.mjs");
const WRITE = "mut_write_file";
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

let t: TestRuntime | undefined;
afterEach(async () => {
  await t?.stop();
  t = undefined;
});

interface Mutable {
  rt: TestRuntime;
  /** Rewrites the fixture's tool list (the server re-reads it on every tools/list). */
  setTools(tools: object[]): void;
  /** How many times the fixture really ran `name`. */
  runs(name: string): number;
}

function writeFileTool(over: Record<string, unknown> = {}): object {
  return { name: "write_file", description: "Writes a file.", inputSchema: SCHEMA, ...over };
}

/** A runtime with the demo server and the mutable fixture (server "mut"), its tools listed. */
async function startWithMutable(tools: object[] = [writeFileTool()]): Promise<Mutable> {
  const dir = mkdtempSync(path.join(tmpdir(), "gatehouse-test-"));
  const toolsFile = path.join(dir, "mutable-tools.json");
  const runsFile = path.join(dir, "mutable-runs.json");
  const setTools = (list: object[]) => writeFileSync(toolsFile, JSON.stringify({ tools: list }));
  setTools(tools);
  const rt = await startTestRuntime({
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
  t = rt;
  const listed = () =>
    rt.runtime.manager.get("mut").snapshot().state === "ready" && getToolRow(rt.runtime.db, WRITE) !== null;
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
async function announceChange(rt: TestRuntime, localName: string): Promise<void> {
  const before = getToolRow(rt.runtime.db, localName)?.definitionHash;
  const changed = () => getToolRow(rt.runtime.db, localName)?.definitionHash !== before;
  const seen = waitForEvent(rt.runtime.bus, (e) => e.type === "catalogue" && changed(), {
    what: () => `the catalogue to record the new definition of ${localName}`,
  });
  const res = await rt.runtime.manager.callTool("mut", "announce_change", {});
  expect(res.isError).not.toBe(true);
  await seen;
}

async function people(rt: TestRuntime) {
  return {
    agent: createAgentToken(rt.runtime, "agent-a"),
    alice: await createTestUser(rt.runtime, "alice", ["reviewer"]),
    bob: await createTestUser(rt.runtime, "bob", ["reviewer"]),
  };
}

async function call(
  bearer: string,
  tool: string,
  args: Record<string, unknown>,
  status = 202,
): Promise<CallView> {
  const res = await request("POST", "/api/calls", { bearer, body: { tool, arguments: args } });
  expect(res.status, JSON.stringify(await res.clone().json())).toBe(status);
  return bodyOf<CallView>(res);
}

function approve(id: string, cookie: string): Promise<Response> {
  return request("POST", `/api/calls/${id}/approve`, { cookie });
}

async function story(id: string, cookie: string): Promise<CallStoryView> {
  const res = await request("GET", `/api/calls/${id}/story`, { cookie });
  expect(res.status).toBe(200);
  return bodyOf<CallStoryView>(res);
}

function auditRows(rt: TestRuntime, callId: string) {
  return rt.runtime.db
    .select()
    .from(auditEvents)
    .where(eq(auditEvents.callId, callId))
    .orderBy(asc(auditEvents.id))
    .all();
}

describe("approval is bound to the definition and arguments seen at request time", () => {
  it("approving after the server changed the tool's definition is refused, the call is marked refused, and nothing runs", async () => {
    const m = await startWithMutable();
    const { rt } = m;
    enableTool(rt.runtime, WRITE);
    const { agent, alice } = await people(rt);
    const pending = await call(agent, WRITE, { path: "/etc/motd" });
    expect(pending.status).toBe("pending");

    // The server now describes the same tool differently, and says so.
    m.setTools([writeFileTool({ description: "Writes a file, and also uploads it somewhere." })]);
    await announceChange(rt, WRITE);

    // Reviewers are told before they click.
    const listed = await bodyOf<CallsPage>(
      await request("GET", "/api/calls?status=pending", { cookie: alice.cookie }),
    );
    expect(listed.calls.find((c) => c.id === pending.id)?.toolChanged).toBe(true);

    const res = await approve(pending.id, alice.cookie);
    expect(res.status).toBe(409);
    const body = await bodyOf<ErrorBody>(res);
    expect(body.error.code).toBe("tool_changed");
    expect(body.error.message).toMatch(/definition changed since the call was requested/);
    expect(rt.runtime.db.select().from(calls).where(eq(calls.id, pending.id)).get()).toMatchObject({
      status: "refused",
      errorCode: "tool_changed",
      decidedBy: "alice",
    });
    const rows = auditRows(rt, pending.id);
    expect(rows.map((r) => [r.action, r.actor])).toEqual([
      ["call.pending", "agent-a"],
      ["call.refused", "alice"],
    ]);
    expect(rows[1]?.detail).toMatch(/^approval refused: /);
    expect(m.runs("write_file")).toBe(0);
  });

  it("a call whose stored arguments no longer match their digest cannot be approved, and nothing runs", async () => {
    const m = await startWithMutable();
    const { rt } = m;
    enableTool(rt.runtime, WRITE);
    const { agent, alice } = await people(rt);
    const pending = await call(agent, WRITE, { path: "/tmp/harmless" });
    // Someone with access to the store swaps the arguments after the reviewer read them.
    const sqlite = new Database(rt.dbFile);
    sqlite
      .prepare("UPDATE calls SET arguments = ? WHERE id = ?")
      .run(JSON.stringify({ path: "/etc/passwd" }), pending.id);
    sqlite.close();

    const res = await approve(pending.id, alice.cookie);
    expect(res.status).toBe(409);
    expect((await bodyOf<ErrorBody>(res)).error.code).toBe("arguments_changed");
    expect(callStatus(rt.runtime, pending.id)).toBe("refused");
    expect(m.runs("write_file")).toBe(0);
  });

  it("the same definition listed again after a refresh does not block approval", async () => {
    const m = await startWithMutable();
    const { rt } = m;
    enableTool(rt.runtime, WRITE);
    const { agent, alice } = await people(rt);
    const pending = await call(agent, WRITE, { path: "/tmp/x" });
    // A refresh that lists the same tools changes nothing.
    await rt.runtime.manager.get("mut").refreshTools();
    const res = await approve(pending.id, alice.cookie);
    expect(res.status).toBe(200);
    await waitForCallStatus(rt.runtime, pending.id, "succeeded");
    expect(m.runs("write_file")).toBe(1);
  });
});

describe("already decided says how", () => {
  it("the losing approver learns who approved first", async () => {
    t = await startTestRuntime();
    enableTool(t.runtime, ADD_NOTE);
    const { agent, alice, bob } = await people(t);
    const pending = await call(agent, ADD_NOTE, { text: "once" });
    expect((await approve(pending.id, alice.cookie)).status).toBe(200);
    const late = await approve(pending.id, bob.cookie);
    expect(late.status).toBe(409);
    expect((await bodyOf<ErrorBody>(late)).error).toEqual({
      code: "already_decided",
      message: "Already decided: alice approved it.",
    });
    await waitForCallStatus(t.runtime, pending.id, "succeeded");
    expect(t.demoRuns()).toBe(1);
  });

  it("a denial racing expiry loses once the deadline has passed, even before the expiry timer runs", async () => {
    t = await startTestRuntime();
    enableTool(t.runtime, ADD_NOTE);
    const { agent, alice } = await people(t);
    const pending = await call(agent, ADD_NOTE, { text: "late" });
    t.runtime.db
      .update(calls)
      .set({ expiresAt: new Date(Date.now() - 1000).toISOString() })
      .where(eq(calls.id, pending.id))
      .run();
    const res = await request("POST", `/api/calls/${pending.id}/deny`, {
      cookie: alice.cookie,
      body: { reason: "too late" },
    });
    expect(res.status).toBe(409);
    expect((await bodyOf<ErrorBody>(res)).error.message).toBe(
      "Already decided: it expired before anyone decided.",
    );
    expect(callStatus(t.runtime, pending.id)).toBe("expired");
  });
});

describe("expiry is visible to the waiting agent", () => {
  it("an agent long-polling a call that expires is woken with status expired", async () => {
    t = await startTestRuntime({ approvals: { expireAfterSeconds: 1 } });
    enableTool(t.runtime, ADD_NOTE);
    const { agent } = await people(t);
    const pending = await call(agent, ADD_NOTE, { text: "nobody looks" });
    expect(pending.expiresAt).not.toBeNull();
    const started = Date.now();
    const res = await request("GET", `/api/calls/${pending.id}?wait=30`, { bearer: agent });
    expect(res.status).toBe(200);
    const seen = await bodyOf<CallView>(res);
    expect(seen.status).toBe("expired");
    expect(seen.finishedAt).not.toBeNull();
    // Woken by the expiry, not by the 30 s deadline.
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(t.demoRuns()).toBe(0);
  });
});

describe("reviewers see why a call needs approval", () => {
  it("a pending call carries the approval reason from the annotations and the tool's description", async () => {
    const m = await startWithMutable([
      writeFileTool(),
      writeFileTool({
        name: "drop_table",
        description: "Drops a table.",
        annotations: { destructiveHint: true },
      }),
      writeFileTool({ name: "send_mail", description: "Sends mail.", annotations: { readOnlyHint: false } }),
    ]);
    const { rt } = m;
    for (const name of [WRITE, "mut_drop_table", "mut_send_mail"]) enableTool(rt.runtime, name);
    enableTool(rt.runtime, ADD_NOTE);
    const { agent } = await people(rt);
    const reasons = {
      [WRITE]: "no readOnlyHint",
      mut_drop_table: "destructiveHint: true",
      mut_send_mail: "readOnlyHint: false",
    };
    for (const [tool, reason] of Object.entries(reasons)) {
      const pending = await call(agent, tool, { path: "x" });
      expect(pending.approvalReason).toBe(reason);
      expect(callStatus(rt.runtime, pending.id)).toBe("pending");
    }
    const note = await call(agent, ADD_NOTE, { text: "hi" });
    expect(note).toMatchObject({
      approvalReason: "no readOnlyHint",
      toolDescription: "Add a note to the demo notebook.",
      toolChanged: false,
    });
    enableTool(rt.runtime, LIST_NOTES);
    const read = await call(agent, LIST_NOTES, {}, 200);
    expect(read.approvalReason).toBeNull();
  });
});

describe("the owner's settings decide what waits (the catalogue's approval need)", () => {
  it("Always confirm makes a read-only tool's call wait, and a vouch lets an unannotated tool run at once", async () => {
    t = await startTestRuntime();
    enableTool(t.runtime, LIST_NOTES);
    enableTool(t.runtime, ADD_NOTE);
    const { agent } = await people(t);
    const owner = await createTestUser(t.runtime, "olga", ["owner"]);
    const patch = (tool: string, body: object) =>
      request("PATCH", `/api/catalogue/${tool}`, { cookie: owner.cookie, body });

    expect((await patch(LIST_NOTES, { alwaysConfirm: true })).status).toBe(200);
    const read = await call(agent, LIST_NOTES, {});
    expect(read).toMatchObject({ status: "pending", approvalReason: "owner requires confirmation" });

    expect((await patch(ADD_NOTE, { vouch: true })).status).toBe(200);
    const write = await call(agent, ADD_NOTE, { text: "vouched" }, 200);
    expect(write).toMatchObject({ status: "succeeded", approvalReason: null, destructive: false });
    expect(t.demoRuns()).toBe(1);
  });
});

describe("every attempt is in the audit log, with who, when and how long", () => {
  it("an approved call's life: pending (requester, reason), approved (reviewer, wait), succeeded (run time)", async () => {
    t = await startTestRuntime();
    enableTool(t.runtime, ADD_NOTE);
    const { agent, alice } = await people(t);
    const pending = await call(agent, ADD_NOTE, { text: "audited" });
    await approve(pending.id, alice.cookie);
    await waitForCallStatus(t.runtime, pending.id, "succeeded");
    const rows = auditRows(t, pending.id);
    expect(
      rows.map((r) => ({ action: r.action, actor: r.actor, subject: r.subject, detail: r.detail })),
    ).toEqual([
      { action: "call.pending", actor: "agent-a", subject: ADD_NOTE, detail: "no readOnlyHint" },
      { action: "call.approved", actor: "alice", subject: ADD_NOTE, detail: null },
      { action: "call.succeeded", actor: "agent-a", subject: ADD_NOTE, detail: null },
    ]);
    expect(rows[0]?.durationMs).toBeNull();
    expect(rows[1]?.durationMs).toEqual(expect.any(Number));
    expect(rows[2]?.durationMs).toEqual(expect.any(Number));
    for (const r of rows) expect(Date.parse(r.at)).not.toBeNaN();

    const s = await story(pending.id, alice.cookie);
    expect(s.call).toMatchObject({ id: pending.id, status: "succeeded", decidedBy: "alice" });
    expect(s.call.durationMs).toEqual(expect.any(Number));
    expect(s.audit.map((a) => a.action)).toEqual(["call.pending", "call.approved", "call.succeeded"]);
    expect(s.audit[2]?.durationMs).toBe(rows[2]?.durationMs);
  });

  it("a read-only call's life: started and succeeded, with its run time", async () => {
    t = await startTestRuntime();
    enableTool(t.runtime, LIST_NOTES);
    const { agent } = await people(t);
    const done = await call(agent, LIST_NOTES, {}, 200);
    const rows = auditRows(t, done.id);
    expect(rows.map((r) => [r.action, r.actor, r.detail])).toEqual([
      ["call.started", "agent-a", "read-only"],
      ["call.succeeded", "agent-a", null],
    ]);
    expect(rows[1]?.durationMs).toEqual(expect.any(Number));
    expect(done.durationMs).toEqual(expect.any(Number));
  });

  it("a call whose tool reports an error: pending, approved, failed with the error and run time", async () => {
    const m = await startWithMutable();
    enableTool(m.rt.runtime, WRITE);
    const { agent, alice } = await people(m.rt);
    const pending = await call(agent, WRITE, { path: "x", fail: true });
    await approve(pending.id, alice.cookie);
    await waitForCallStatus(m.rt.runtime, pending.id, "failed");
    const rows = auditRows(m.rt, pending.id);
    expect(rows.map((r) => r.action)).toEqual(["call.pending", "call.approved", "call.failed"]);
    expect(rows[2]).toMatchObject({ actor: "agent-a", detail: "the tool reported an error" });
    expect(rows[2]?.durationMs).toEqual(expect.any(Number));
    expect(m.runs("write_file")).toBe(1);
  });

  it("a denied call's life: pending, then denied by the reviewer with the reason and the wait", async () => {
    t = await startTestRuntime();
    enableTool(t.runtime, ADD_NOTE);
    const { agent, alice } = await people(t);
    const pending = await call(agent, ADD_NOTE, { text: "no" });
    await request("POST", `/api/calls/${pending.id}/deny`, {
      cookie: alice.cookie,
      body: { reason: "not now" },
    });
    const rows = auditRows(t, pending.id);
    expect(rows.map((r) => [r.action, r.actor, r.detail])).toEqual([
      ["call.pending", "agent-a", "no readOnlyHint"],
      ["call.denied", "alice", "not now"],
    ]);
    expect(rows[1]?.durationMs).toEqual(expect.any(Number));
  });

  it("an expired call's life: pending, then expired by gatehouse after waiting its whole deadline", async () => {
    t = await startTestRuntime({ approvals: { expireAfterSeconds: 1 } });
    enableTool(t.runtime, ADD_NOTE);
    const { agent } = await people(t);
    const pending = await call(agent, ADD_NOTE, { text: "ignored" });
    await waitForCallStatus(t.runtime, pending.id, "expired");
    const rows = auditRows(t, pending.id);
    expect(rows.map((r) => [r.action, r.actor])).toEqual([
      ["call.pending", "agent-a"],
      ["call.expired", "gatehouse"],
    ]);
    expect(rows[1]?.durationMs ?? 0).toBeGreaterThanOrEqual(900);
  });

  it("a refused attempt's life is one row with the requester and the reason", async () => {
    t = await startTestRuntime();
    const { agent, alice } = await people(t);
    const res = await request("POST", "/api/calls", {
      bearer: agent,
      body: { tool: ADD_NOTE, arguments: {} },
    });
    expect(res.status).toBe(409);
    const refused = t.runtime.db.select().from(calls).where(eq(calls.status, "refused")).get();
    if (!refused) throw new Error("the refusal was not recorded");
    const s = await story(refused.id, alice.cookie);
    expect(s.call).toMatchObject({ status: "refused", requester: { kind: "agent", name: "agent-a" } });
    expect(s.audit.map((a) => [a.action, a.actor, a.detail])).toEqual([
      ["call.refused", "agent-a", `tool_not_enabled: ${ADD_NOTE} is not enabled`],
    ]);
  });
});

describe("results are stored capped", () => {
  it("a result over 64 KiB reaches the waiting agent whole but is stored capped and marked truncated", async () => {
    const m = await startWithMutable();
    enableTool(m.rt.runtime, WRITE);
    const { agent, alice } = await people(m.rt);
    const bytes = 200_000;
    const pending = await call(agent, WRITE, { path: "big", bytes });
    const waited = request("GET", `/api/calls/${pending.id}?wait=30`, { bearer: agent });
    await approve(pending.id, alice.cookie);
    const full = await bodyOf<CallView>(await waited);
    expect(full.status).toBe("succeeded");
    expect(full.resultTruncated).toBe(false);
    expect(JSON.stringify(full.result)).toContain("x".repeat(bytes));

    const row = m.rt.runtime.db.select().from(calls).where(eq(calls.id, pending.id)).get();
    expect(row?.resultTruncated).toBe(true);
    expect(Buffer.byteLength(row?.result ?? "")).toBeLessThanOrEqual(RESULT_STORE_MAX_BYTES);
    const s = await story(pending.id, alice.cookie);
    expect(s.call.resultTruncated).toBe(true);
    const stored = s.call.result as { truncated: boolean; bytes: number; preview: string };
    expect(stored.truncated).toBe(true);
    expect(stored.bytes).toBeGreaterThan(bytes);
    expect(stored.preview.startsWith('{"content":[{"type":"text","text":"xxxx')).toBe(true);
    expect(s.audit.at(-1)?.detail).toBe(`result stored truncated to ${RESULT_STORE_MAX_BYTES} bytes`);
  });
});

describe("the activity list filters and pages", () => {
  it("filters by server, tool, status, requester and time, newest first, and pages with before", async () => {
    const m = await startWithMutable();
    const { rt } = m;
    enableTool(rt.runtime, WRITE);
    enableTool(rt.runtime, ADD_NOTE);
    enableTool(rt.runtime, LIST_NOTES);
    const { agent, alice } = await people(rt);
    const other = createAgentToken(rt.runtime, "agent-b");
    const made: CallView[] = [];
    made.push(await call(agent, ADD_NOTE, { text: "1" }));
    made.push(await call(other, ADD_NOTE, { text: "2" }));
    made.push(await call(agent, WRITE, { path: "3" }));
    made.push(await call(other, LIST_NOTES, {}, 200));
    made.push(await call(agent, ADD_NOTE, { text: "5" }));
    // One second apart, so that the order and the time filters do not depend on the clock's grain.
    const base = Date.parse("2030-01-01T10:00:00.000Z");
    made.forEach((c, i) => {
      c.createdAt = new Date(base + i * 1000).toISOString();
      rt.runtime.db.update(calls).set({ createdAt: c.createdAt }).where(eq(calls.id, c.id)).run();
    });
    const list = async (
      query: string,
      auth: { cookie?: string; bearer?: string } = { cookie: alice.cookie },
    ) => {
      const res = await request("GET", `/api/calls?${query}`, auth);
      expect(res.status, await res.clone().text()).toBe(200);
      return bodyOf<CallsPage>(res);
    };
    const ids = (page: CallsPage) => page.calls.map((c) => c.id);
    const newestFirst = [...made].reverse().map((c) => c.id);

    expect(ids(await list(""))).toEqual(newestFirst);
    expect(ids(await list("server=mut"))).toEqual([made[2]?.id]);
    expect(ids(await list("tool=ADD_note"))).toEqual([made[4]?.id, made[1]?.id, made[0]?.id]);
    expect(ids(await list("tool=%25"))).toEqual([]);
    expect(ids(await list("status=succeeded"))).toEqual([made[3]?.id]);
    expect(ids(await list("requester=agent-b"))).toEqual([made[3]?.id, made[1]?.id]);
    expect(ids(await list("requester=agent-a&server=demo&status=pending"))).toEqual([
      made[4]?.id,
      made[0]?.id,
    ]);
    const third = made[2]?.createdAt ?? "";
    expect(ids(await list(`from=${encodeURIComponent(third)}`))).toEqual(newestFirst.slice(0, 3));
    expect(ids(await list(`to=${encodeURIComponent(third)}`))).toEqual(newestFirst.slice(2));
    expect(ids(await list("from=2000-01-01T00:00:00%2B02:00&to=2000-01-02T00:00:00Z"))).toEqual([]);

    // Pages of two: disjoint, in order, and the last one says there is no next.
    const seen: string[] = [];
    let before: string | null = null;
    let pages = 0;
    do {
      const page: CallsPage = await list(`limit=2${before ? `&before=${encodeURIComponent(before)}` : ""}`);
      seen.push(...ids(page));
      before = page.nextBefore;
      pages++;
    } while (before && pages < 10);
    expect(seen).toEqual(newestFirst);
    expect(pages).toBe(3);

    // An agent sees only its own calls, whatever requester it asks for.
    expect(ids(await list("requester=agent-b", { bearer: agent }))).toEqual([]);
    expect(ids(await list("", { bearer: agent }))).toEqual([made[4]?.id, made[2]?.id, made[0]?.id]);

    const bad = await request("GET", "/api/calls?from=yesterday", { cookie: alice.cookie });
    expect(bad.status).toBe(400);
    expect((await bodyOf<ErrorBody>(bad)).error.message).toMatch(/^query\.from/);
  });

  it("a call's story is for reviewers and owners; an agent cannot read it", async () => {
    t = await startTestRuntime();
    enableTool(t.runtime, ADD_NOTE);
    const { agent } = await people(t);
    const pending = await call(agent, ADD_NOTE, { text: "mine" });
    const res = await request("GET", `/api/calls/${pending.id}/story`, { bearer: agent });
    expect(res.status).toBe(403);
    const owner = await createTestUser(t.runtime, "olga", ["owner"]);
    expect((await story(pending.id, owner.cookie)).call.id).toBe(pending.id);
    const missing = await request("GET", "/api/calls/no-such-call/story", { cookie: owner.cookie });
    expect(missing.status).toBe(404);
  });
});
