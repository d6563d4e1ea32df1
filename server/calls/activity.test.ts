/**
 * What is kept of a call and how people find it: results stored capped, the activity list's
 * filters and paging, and a call's story. Real runtimes with the mutable fixture server.
 */
import { eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import type { CallsPage, CallView } from "@/lib/api-types";
import {
  ADD_NOTE,
  bodyOf,
  createAgentToken,
  createTestUser,
  enableTool,
  LIST_NOTES,
  request,
} from "@/test/support/runtime";
import { first } from "../store/db";
import { calls } from "../store/schema";
import { RESULT_STORE_MAX_BYTES } from "./broker";
import {
  approve,
  call,
  type ErrorBody,
  agentAndReviewers as people,
  runtimes,
  startWithMutable as startMutable,
  story,
  WRITE,
} from "./call-fixtures";

const { start } = runtimes();
const startWithMutable = (tools?: object[]) => startMutable(start, tools);

describe("results are stored capped", () => {
  it("a result over 64 KiB reaches the waiting agent whole but is stored capped and marked truncated", async () => {
    const m = await startWithMutable();
    await enableTool(m.rt.runtime, WRITE);
    const { agent, alice } = await people(m.rt);
    const bytes = 200_000;
    const pending = await call(agent, WRITE, { path: "big", bytes });
    const waited = request("GET", `/api/calls/${pending.id}?wait=30`, { bearer: agent });
    await approve(pending.id, alice.cookie);
    const full = await bodyOf<CallView>(await waited);
    expect(full.status).toBe("succeeded");
    expect(full.resultTruncated).toBe(false);
    expect(JSON.stringify(full.result)).toContain("x".repeat(bytes));

    const row = await first(m.rt.runtime.db.select().from(calls).where(eq(calls.id, pending.id)));
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
    await enableTool(rt.runtime, WRITE);
    await enableTool(rt.runtime, ADD_NOTE);
    await enableTool(rt.runtime, LIST_NOTES);
    const { agent, alice } = await people(rt);
    const other = await createAgentToken(rt.runtime, "agent-b");
    const made: CallView[] = [];
    made.push(await call(agent, ADD_NOTE, { text: "1" }));
    made.push(await call(other, ADD_NOTE, { text: "2" }));
    made.push(await call(agent, WRITE, { path: "3" }));
    made.push(await call(other, LIST_NOTES, {}, 200));
    made.push(await call(agent, ADD_NOTE, { text: "5" }));
    // One second apart, so that the order and the time filters do not depend on the clock's grain.
    const base = Date.parse("2030-01-01T10:00:00.000Z");
    for (const [i, c] of made.entries()) {
      c.createdAt = new Date(base + i * 1000).toISOString();
      await rt.runtime.db.update(calls).set({ createdAt: c.createdAt }).where(eq(calls.id, c.id));
    }
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
    const t = await start();
    await enableTool(t.runtime, ADD_NOTE);
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
