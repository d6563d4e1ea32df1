/**
 * The governance API through the real route modules and a real runtime (the demo server as a
 * child process): PATCH with vouch / always-confirm, bulk status, the change feed with per-owner
 * unread marks, and a tool's history. Role checks for these routes live in the ROUTE_ACCESS
 * table of server/auth/auth.test.ts.
 */
import { and, asc, eq } from "drizzle-orm";
import { afterEach, describe, expect, it } from "vitest";
import type { CatalogueToolView, ChangesPage, ToolHistoryView } from "@/lib/api-types";
import {
  ADD_NOTE,
  bodyOf,
  createTestUser,
  LIST_NOTES,
  request,
  startTestRuntime,
  type TestRuntime,
} from "@/test/support/runtime";
import { auditEvents } from "../store/schema";
import { getToolRow } from "./catalogue";

let t: TestRuntime | undefined;
afterEach(async () => {
  await t?.stop();
  t = undefined;
});

async function start() {
  t = await startTestRuntime();
  const owner = await createTestUser(t.runtime, "olga", ["owner"]);
  return { rt: t, owner };
}

/** The tool's definitionHash, as the owner's page has it from GET /api/catalogue. */
async function hashOf(rt: TestRuntime, localName: string): Promise<string | undefined> {
  return (await getToolRow(rt.runtime.db, localName))?.definitionHash;
}

async function auditRows(rt: TestRuntime, action: string) {
  return await rt.runtime.db
    .select()
    .from(auditEvents)
    .where(eq(auditEvents.action, action))
    .orderBy(asc(auditEvents.id));
}

describe("PATCH /api/catalogue/:name (vouch, always confirm)", () => {
  it("an owner vouches a tool without annotations: the answer shows the vouch, the audit names the owner", async () => {
    const { rt, owner } = await start();
    const events: string[] = [];
    rt.runtime.bus.subscribe((e) => events.push(e.type));
    const res = await request("PATCH", `/api/catalogue/${ADD_NOTE}`, {
      cookie: owner.cookie,
      body: { vouch: true, expectedHash: await hashOf(rt, ADD_NOTE) },
    });
    expect(res.status).toBe(200);
    const { tool } = await bodyOf<{ tool: CatalogueToolView }>(res);
    expect(tool).toMatchObject({ destructive: false, readOnlyBy: "vouch", vouch: { by: "olga" } });
    expect(await auditRows(rt, "tool.vouch")).toMatchObject([{ actor: "olga", subject: ADD_NOTE }]);
    expect(events).toContain("catalogue");

    const withdrawn = await request("PATCH", `/api/catalogue/${ADD_NOTE}`, {
      cookie: owner.cookie,
      body: { vouch: false },
    });
    expect((await bodyOf<{ tool: CatalogueToolView }>(withdrawn)).tool).toMatchObject({
      destructive: true,
      vouch: null,
    });
    expect(await auditRows(rt, "tool.unvouch")).toMatchObject([{ actor: "olga", subject: ADD_NOTE }]);
  });

  it("a tool that says readOnlyHint: true cannot be vouched: 409 with the reason", async () => {
    const { rt, owner } = await start();
    const res = await request("PATCH", `/api/catalogue/${LIST_NOTES}`, {
      cookie: owner.cookie,
      body: { vouch: true, expectedHash: await hashOf(rt, LIST_NOTES) },
    });
    expect(res.status).toBe(409);
    expect(await bodyOf(res)).toEqual({
      error: {
        code: "conflict",
        message: `${LIST_NOTES} cannot be vouched read-only: its server already marks it read-only (readOnlyHint: true)`,
      },
    });
  });

  it("always confirm on a read-only tool makes it need approval, audited as tool.always_confirm", async () => {
    const { rt, owner } = await start();
    const res = await request("PATCH", `/api/catalogue/${LIST_NOTES}`, {
      cookie: owner.cookie,
      body: { alwaysConfirm: true },
    });
    expect((await bodyOf<{ tool: CatalogueToolView }>(res)).tool).toMatchObject({
      destructive: true,
      alwaysConfirm: true,
      approvalReason: "owner requires confirmation",
    });
    expect(
      await rt.runtime.db
        .select()
        .from(auditEvents)
        .where(and(eq(auditEvents.action, "tool.always_confirm"), eq(auditEvents.subject, LIST_NOTES))),
    ).toMatchObject([{ actor: "olga", detail: "on" }]);
  });

  it("a body with none of status, vouch and alwaysConfirm, or an unknown key, is refused", async () => {
    const { owner } = await start();
    for (const body of [{}, { vouched: true }, { vouch: "yes" }]) {
      const res = await request("PATCH", `/api/catalogue/${ADD_NOTE}`, { cookie: owner.cookie, body });
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect((await bodyOf<{ error: { code: string } }>(res)).error.code).toBe("invalid_body");
    }
  });

  it("enabling or vouching without expectedHash is refused and changes nothing; disabling needs none", async () => {
    const { rt, owner } = await start();
    for (const body of [{ status: "enabled" }, { vouch: true }, { status: "enabled", expectedHash: "abc" }]) {
      const res = await request("PATCH", `/api/catalogue/${ADD_NOTE}`, { cookie: owner.cookie, body });
      expect(res.status, JSON.stringify(body)).toBe(400);
      const { error } = await bodyOf<{ error: { code: string; message: string } }>(res);
      expect(error.code).toBe("invalid_body");
      expect(error.message).toMatch(/^body\.expectedHash: /);
    }
    expect(await getToolRow(rt.runtime.db, ADD_NOTE)).toMatchObject({
      status: "proposed",
      vouchedHash: null,
    });
    expect([...(await auditRows(rt, "tool.enable")), ...(await auditRows(rt, "tool.vouch"))]).toEqual([]);

    const disabled = await request("PATCH", `/api/catalogue/${ADD_NOTE}`, {
      cookie: owner.cookie,
      body: { status: "disabled" },
    });
    expect((await bodyOf<{ tool: CatalogueToolView }>(disabled)).tool.status).toBe("disabled");
  });
});

describe("POST /api/catalogue/bulk", () => {
  it("enables the named tools in one request and publishes one catalogue event per server", async () => {
    const { rt, owner } = await start();
    const events: string[] = [];
    rt.runtime.bus.subscribe((e) => {
      if (e.type === "catalogue") events.push(e.server);
    });
    const res = await request("POST", "/api/catalogue/bulk", {
      cookie: owner.cookie,
      body: {
        names: [LIST_NOTES, ADD_NOTE],
        status: "enabled",
        expectedHashes: {
          [LIST_NOTES]: await hashOf(rt, LIST_NOTES),
          [ADD_NOTE]: await hashOf(rt, ADD_NOTE),
        },
      },
    });
    expect(res.status).toBe(200);
    const { tools } = await bodyOf<{ tools: CatalogueToolView[] }>(res);
    expect(tools.map((x) => [x.localName, x.status])).toEqual([
      [LIST_NOTES, "enabled"],
      [ADD_NOTE, "enabled"],
    ]);
    expect(events).toEqual(["demo"]);
    expect((await auditRows(rt, "tool.enable")).map((a) => a.actor)).toEqual(["olga", "olga"]);
  });

  it("one unknown name refuses the whole request and enables nothing", async () => {
    const { rt, owner } = await start();
    const res = await request("POST", "/api/catalogue/bulk", {
      cookie: owner.cookie,
      body: {
        names: [LIST_NOTES, "demo_nope"],
        status: "enabled",
        expectedHashes: { [LIST_NOTES]: await hashOf(rt, LIST_NOTES), demo_nope: "0".repeat(64) },
      },
    });
    expect(res.status).toBe(404);
    expect((await bodyOf<{ error: { message: string } }>(res)).error.message).toContain(
      "demo_nope (no such tool)",
    );
    expect(await auditRows(rt, "tool.enable")).toEqual([]);
  });

  it("enabling without a hash for every name is an invalid body; disabling needs none", async () => {
    const { rt, owner } = await start();
    for (const expectedHashes of [undefined, { [LIST_NOTES]: await hashOf(rt, LIST_NOTES) }]) {
      const res = await request("POST", "/api/catalogue/bulk", {
        cookie: owner.cookie,
        body: { names: [LIST_NOTES, ADD_NOTE], status: "enabled", expectedHashes },
      });
      expect(res.status).toBe(400);
      expect((await bodyOf<{ error: { code: string } }>(res)).error.code).toBe("invalid_body");
    }
    expect(await auditRows(rt, "tool.enable")).toEqual([]);
    const disabled = await request("POST", "/api/catalogue/bulk", {
      cookie: owner.cookie,
      body: { names: [LIST_NOTES, ADD_NOTE], status: "disabled" },
    });
    expect(disabled.status).toBe(200);
  });

  it("an empty list or more than 1000 names is an invalid body", async () => {
    const { owner } = await start();
    for (const names of [[], Array.from({ length: 1001 }, (_, i) => `demo_t${i}`)]) {
      const res = await request("POST", "/api/catalogue/bulk", {
        cookie: owner.cookie,
        body: { names, status: "enabled" },
      });
      expect(res.status).toBe(400);
    }
  });
});

describe("GET /api/changes, POST /api/changes/read, GET /api/catalogue/:name/history", () => {
  it("the feed lists the demo server's additions newest first, unread per owner until marked read", async () => {
    const { rt, owner } = await start();
    const other = await createTestUser(rt.runtime, "oscar", ["owner"]);
    const page = await bodyOf<ChangesPage>(await request("GET", "/api/changes", { cookie: owner.cookie }));
    expect(page.changes.map((c) => `${c.kind} ${c.localName}`).sort()).toEqual([
      `added ${ADD_NOTE}`,
      `added ${LIST_NOTES}`,
    ]);
    expect(page).toMatchObject({ unread: 2, lastSeenId: 0, nextBefore: null });
    expect(page.changes.every((c) => c.unread)).toBe(true);

    const newest = page.changes[0]?.id ?? 0;
    const read = await request("POST", "/api/changes/read", { cookie: owner.cookie, body: { upTo: newest } });
    expect(await bodyOf(read)).toEqual({ lastSeenId: newest, unread: 0 });
    const after = await bodyOf<ChangesPage>(await request("GET", "/api/changes", { cookie: owner.cookie }));
    expect(after.unread).toBe(0);
    expect(after.changes.some((c) => c.unread)).toBe(false);
    const theirs = await bodyOf<ChangesPage>(await request("GET", "/api/changes", { cookie: other.cookie }));
    expect(theirs.unread).toBe(2);
  });

  it("limit and before page through the feed", async () => {
    const { owner } = await start();
    const first = await bodyOf<ChangesPage>(
      await request("GET", "/api/changes?limit=1", { cookie: owner.cookie }),
    );
    expect(first.changes).toHaveLength(1);
    expect(first.nextBefore).toBe(first.changes[0]?.id);
    const second = await bodyOf<ChangesPage>(
      await request("GET", `/api/changes?limit=1&before=${first.nextBefore}`, { cookie: owner.cookie }),
    );
    expect(second.changes).toHaveLength(1);
    expect(second.changes[0]?.id).toBeLessThan(first.changes[0]?.id ?? 0);
    const bad = await request("GET", "/api/changes?limit=0", { cookie: owner.cookie });
    expect(bad.status).toBe(400);
  });

  it("a tool's history has its server's changes and the owners' actions on it", async () => {
    const { rt, owner } = await start();
    const expectedHash = await hashOf(rt, ADD_NOTE);
    await request("PATCH", `/api/catalogue/${ADD_NOTE}`, {
      cookie: owner.cookie,
      body: { status: "enabled", expectedHash },
    });
    await request("PATCH", `/api/catalogue/${ADD_NOTE}`, {
      cookie: owner.cookie,
      body: { vouch: true, expectedHash },
    });
    const res = await request("GET", `/api/catalogue/${ADD_NOTE}/history`, { cookie: owner.cookie });
    const history = await bodyOf<ToolHistoryView>(res);
    expect(history.changes.map((c) => c.kind)).toEqual(["added"]);
    expect(history.actions.map((a) => `${a.actor} ${a.action}`)).toEqual([
      "olga tool.vouch",
      "olga tool.enable",
    ]);
    const missing = await request("GET", "/api/catalogue/demo_nope/history", { cookie: owner.cookie });
    expect(missing.status).toBe(404);
  });
});
