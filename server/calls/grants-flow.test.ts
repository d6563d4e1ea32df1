import { eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import type { CallView, GrantListView, GrantRequest, GrantView } from "@/lib/api-types";
import {
  ADD_NOTE,
  bodyOf,
  createAgentToken,
  createTestUser,
  request,
  type TestRuntime,
  waitForCallStatus,
} from "@/test/support/runtime";
import { setToolStatus } from "../catalogue/catalogue";
import { first } from "../store/db";
import { grants, notificationDeliveries } from "../store/schema";
import {
  addNote,
  announceChange,
  auditRows,
  call,
  type ErrorBody,
  people,
  runtimes,
  startWithMutable,
  story,
  WRITE,
  writeFileTool,
} from "./call-fixtures";

const { start } = runtimes();

function approveWith(id: string, cookie: string, grant: GrantRequest): Promise<Response> {
  return request("POST", `/api/calls/${id}/approve`, { cookie, body: { grant } });
}

/** Approves `held` with `grant` and waits for it to finish; returns the grant made. */
async function grantFrom(
  rt: TestRuntime,
  held: CallView,
  cookie: string,
  grant: GrantRequest,
): Promise<GrantView> {
  const res = await approveWith(held.id, cookie, grant);
  expect(res.status, JSON.stringify(await res.clone().json())).toBe(200);
  const body = await bodyOf<{ call: CallView; grant: GrantView | null }>(res);
  await waitForCallStatus(rt.runtime, held.id, "succeeded", 10_000);
  expect(body.grant).not.toBeNull();
  return body.grant as GrantView;
}

async function listGrants(cookie: string): Promise<GrantView[]> {
  const res = await request("GET", "/api/grants", { cookie });
  expect(res.status).toBe(200);
  return (await bodyOf<GrantListView>(res)).grants;
}

describe("grants made with an approval", () => {
  it("an arguments grant runs the same call at once and names the grant; other arguments still wait", async () => {
    const rt = await start();
    const { agent, alice } = await people(rt);
    const grant = await grantFrom(rt, await addNote(agent, "same"), alice.cookie, {
      scope: "arguments",
      minutes: 60,
    });
    expect(grant).toMatchObject({
      tool: ADD_NOTE,
      scope: "arguments",
      createdBy: "alice",
      uses: 0,
      state: "live",
    });
    const covered = await call(agent, ADD_NOTE, { text: "same" }, 200);
    expect(covered.status).toBe("succeeded");
    expect(covered.grantId).toBe(grant.id);
    expect(rt.demoRuns()).toBe(2);
    const started = (await auditRows(rt, covered.id)).find((a) => a.action === "call.started");
    expect(started?.detail).toContain(`grant ${grant.id} from alice`);
    const other = await addNote(agent, "different");
    expect(other.grantId).toBeNull();
    expect(rt.demoRuns()).toBe(2);
  });

  it("a covered call is told of as call.decided, naming the grant", async () => {
    const rt = await start({
      config: {
        notifications: {
          // Never reached in this test: the payload is read from the outbox as queued.
          webhooks: [
            { name: "ops", url: "http://127.0.0.1:9/hook", allowPrivate: true, events: ["call.decided"] },
          ],
        },
      },
    });
    const { agent, alice } = await people(rt);
    const grant = await grantFrom(rt, await addNote(agent, "told"), alice.cookie, {
      scope: "tool",
      minutes: 60,
    });
    const covered = await call(agent, ADD_NOTE, { text: "told again" }, 200);
    const row = await first(
      rt.runtime.db
        .select()
        .from(notificationDeliveries)
        .where(eq(notificationDeliveries.callId, covered.id)),
    );
    expect(row?.event).toBe("call.decided");
    expect((JSON.parse(row?.payload ?? "{}") as { call: unknown }).call).toMatchObject({
      grant: grant.id,
      rule: null,
      status: "running",
    });
  });

  it("a tool grant covers any arguments of the same agent, not another agent", async () => {
    const rt = await start();
    const { agent, alice } = await people(rt);
    const grant = await grantFrom(rt, await addNote(agent, "first"), alice.cookie, {
      scope: "tool",
      minutes: 15,
    });
    expect((await call(agent, ADD_NOTE, { text: "anything else" }, 200)).grantId).toBe(grant.id);
    const stranger = await createAgentToken(rt.runtime, "agent-z");
    expect((await call(stranger, ADD_NOTE, { text: "anything else" }, 202)).grantId).toBeNull();
  });

  it("an owner without the reviewer role approves with a grant, made as owner; the story names its maker", async () => {
    const rt = await start();
    const { agent } = await people(rt);
    const olga = await createTestUser(rt.runtime, "olga", ["owner"]);
    const grant = await grantFrom(rt, await addNote(agent, "owner grants"), olga.cookie, {
      scope: "tool",
      minutes: 60,
    });
    expect((await first(rt.runtime.db.select().from(grants).where(eq(grants.id, grant.id))))?.madeAs).toBe(
      "owner",
    );
    const covered = await call(agent, ADD_NOTE, { text: "covered" }, 200);
    const told = await story(covered.id, olga.cookie);
    expect(told.grant).toMatchObject({ id: grant.id, createdBy: "olga" });
  });

  it("twenty covered calls at once against a grant of five uses: exactly five run", async () => {
    const rt = await start();
    const { agent, alice } = await people(rt);
    const grant = await grantFrom(rt, await addNote(agent, "burst"), alice.cookie, {
      scope: "arguments",
      minutes: 60,
      uses: 5,
    });
    const answers = await Promise.all(
      Array.from({ length: 20 }, () =>
        request("POST", "/api/calls", {
          bearer: agent,
          body: { tool: ADD_NOTE, arguments: { text: "burst" } },
        }),
      ),
    );
    const statuses = answers.map((r) => r.status);
    expect(statuses.filter((s) => s === 200)).toHaveLength(5);
    expect(statuses.filter((s) => s === 202)).toHaveLength(15);
    const row = await first(rt.runtime.db.select().from(grants).where(eq(grants.id, grant.id)));
    expect(row?.uses).toBe(5);
    // The approved call plus five covered ones ran.
    expect(rt.demoRuns()).toBe(6);
    const listed = (await listGrants(alice.cookie)).find((g) => g.id === grant.id);
    expect(listed).toMatchObject({ state: "ended", uses: 5, usesAllowed: 5 });
  });

  it("revoking a grant on the API makes the next call wait again", async () => {
    const rt = await start();
    const { agent, alice, bob } = await people(rt);
    const grant = await grantFrom(rt, await addNote(agent, "again"), alice.cookie, {
      scope: "arguments",
      minutes: 60,
    });
    await call(agent, ADD_NOTE, { text: "again" }, 200);
    const res = await request("DELETE", `/api/grants/${grant.id}`, { cookie: bob.cookie });
    expect(res.status).toBe(200);
    expect((await bodyOf<{ grant: GrantView }>(res)).grant).toMatchObject({
      state: "ended",
      endReason: "revoked by bob",
    });
    await call(agent, ADD_NOTE, { text: "again" }, 202);
  });

  it("revoking the agent's token ends its grants", async () => {
    const rt = await start();
    const { agent, alice } = await people(rt);
    const grant = await grantFrom(rt, await addNote(agent, "t"), alice.cookie, {
      scope: "tool",
      minutes: 60,
    });
    const { revokeToken } = await import("../auth/tokens");
    await revokeToken(rt.runtime.db, { name: "agent-a", actor: "test" });
    const listed = (await listGrants(alice.cookie)).find((g) => g.id === grant.id);
    expect(listed?.state).toBe("ended");
    expect(listed?.endReason).toMatch(/token was revoked/);
  });

  it("a definition change ends the grant: after re-enabling, the call waits again", async () => {
    const { rt, runs, setTools } = await startWithMutable(start);
    const { agent, alice } = await people(rt);
    await setToolStatus(rt.runtime.db, { localName: WRITE, status: "enabled", actor: "test" });
    const held = await call(agent, WRITE, { path: "/tmp/a" }, 202);
    const grant = await grantFrom(rt, held, alice.cookie, { scope: "tool", minutes: 60 });
    expect((await call(agent, WRITE, { path: "/tmp/b" }, 200)).grantId).toBe(grant.id);
    setTools([writeFileTool({ description: "Writes a file, and also uploads it somewhere." })]);
    await announceChange(rt, WRITE);
    // Changed: refused until an owner looks again; re-enabled, the new definition has no grant.
    await setToolStatus(rt.runtime.db, { localName: WRITE, status: "enabled", actor: "test" });
    const after = await call(agent, WRITE, { path: "/tmp/c" }, 202);
    expect(after.grantId).toBeNull();
    expect(runs("write_file")).toBe(2);
    const listed = (await listGrants(alice.cookie)).find((g) => g.id === grant.id);
    expect(listed).toMatchObject({ state: "ended" });
    expect(listed?.endReason).toMatch(/definition changed/);
  });

  it("a deny rule beats a live grant", async () => {
    const rt = await start({
      config: {
        rules: [
          { name: "no-secrets", tools: [ADD_NOTE], when: "args.text.contains('secret')", decision: "deny" },
        ],
      },
    });
    const { agent, alice } = await people(rt);
    await grantFrom(rt, await addNote(agent, "plain"), alice.cookie, { scope: "tool", minutes: 60 });
    const res = await request("POST", "/api/calls", {
      bearer: agent,
      body: { tool: ADD_NOTE, arguments: { text: "a secret" } },
    });
    expect(res.status).toBe(403);
    expect((await bodyOf<ErrorBody>(res)).error.code).toBe("denied_by_rule");
    expect((await call(agent, ADD_NOTE, { text: "plain again" }, 200)).grantId).not.toBeNull();
  });

  it("a grant the body cannot describe is refused before anything is approved", async () => {
    const rt = await start();
    const { agent, alice } = await people(rt);
    const held = await addNote(agent, "x");
    const res = await request("POST", `/api/calls/${held.id}/approve`, {
      cookie: alice.cookie,
      body: { grant: { scope: "tool", minutes: 100_000 } },
    });
    expect(res.status).toBe(400);
    expect((await bodyOf<ErrorBody>(res)).error.code).toBe("invalid_body");
    expect((await rt.runtime.broker.get(held.id))?.status).toBe("pending");
  });
});
