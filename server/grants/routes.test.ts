/**
 * The grants API and role changes over HTTP, through the real route modules and the one route
 * wrapper on a real test runtime: `GET /api/grants` and `DELETE /api/grants/:id` for reviewers
 * and owners (Origin checked on the DELETE), and `PATCH /api/users/:name` with roles.
 */
import { eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import type { GrantListView, GrantView, UserView } from "@/lib/api-types";
import {
  ADD_NOTE,
  bodyOf,
  createAgentToken,
  createTestUser,
  request,
  type TestRuntime,
} from "@/test/support/runtime";
import { expectError, runtimePerTest } from "../auth/auth-fixtures";
import { getToolRow } from "../catalogue/catalogue";
import { first } from "../store/db";
import { users } from "../store/schema";
import { auditOf } from "./grant-fixtures";
import { createGrant, findCoveringGrant, type GrantRow } from "./index";

const start = runtimePerTest();

/** A `tool` grant by `by` for the agent "robot" on the demo's add_note, for an hour from now. */
async function demoGrant(rt: TestRuntime, by: string): Promise<GrantRow> {
  const hash = (await getToolRow(rt.runtime.db, ADD_NOTE))?.definitionHash ?? "";
  return await createGrant(rt.runtime.db, {
    requesterKind: "agent",
    requesterName: "robot",
    tool: ADD_NOTE,
    definitionHash: hash,
    scope: "tool",
    argumentsDigest: "unused",
    callId: "call-1",
    createdBy: by,
    minutes: 60,
  });
}

async function covered(rt: TestRuntime): Promise<boolean> {
  const hash = (await getToolRow(rt.runtime.db, ADD_NOTE))?.definitionHash ?? "";
  return (
    (await findCoveringGrant(rt.runtime.db, {
      requesterKind: "agent",
      requesterName: "robot",
      tool: ADD_NOTE,
      definitionHash: hash,
      argumentsDigest: "any",
    })) !== null
  );
}

async function people(rt: TestRuntime) {
  return {
    agent: await createAgentToken(rt.runtime, "robot"),
    rita: await createTestUser(rt.runtime, "rita", ["reviewer"]),
    olga: await createTestUser(rt.runtime, "olga", ["owner"]),
  };
}

describe("GET /api/grants", () => {
  it("reviewers and owners see the grants; agents and strangers do not", async () => {
    const rt = await start();
    const { agent, rita, olga } = await people(rt);
    const g = await demoGrant(rt, "rita");
    for (const cookie of [rita.cookie, olga.cookie]) {
      const res = await request("GET", "/api/grants", { cookie });
      expect(res.status).toBe(200);
      const body = await bodyOf<GrantListView>(res);
      expect(body.grants.map((v) => [v.id, v.state, v.createdBy, v.requester.name])).toEqual([
        [g.id, "live", "rita", "robot"],
      ]);
    }
    await expectError(await request("GET", "/api/grants", { bearer: agent }), 403, "forbidden");
    await expectError(await request("GET", "/api/grants"), 401, "unauthenticated");
  });
});

describe("DELETE /api/grants/:id", () => {
  it("any reviewer ends a grant: answered with its view, listed as ended, covering nothing", async () => {
    const rt = await start();
    const { olga } = await people(rt);
    await createTestUser(rt.runtime, "bob", ["reviewer"]);
    const g = await demoGrant(rt, "bob");
    expect(await covered(rt)).toBe(true);
    const res = await request("DELETE", `/api/grants/${g.id}`, { cookie: olga.cookie });
    expect(res.status).toBe(200);
    const { grant } = await bodyOf<{ grant: GrantView }>(res);
    expect(grant).toMatchObject({ id: g.id, state: "ended", endReason: "revoked by olga" });
    expect(await covered(rt)).toBe(false);
    const list = await bodyOf<GrantListView>(await request("GET", "/api/grants", { cookie: olga.cookie }));
    expect(list.grants.map((v) => [v.id, v.endReason])).toEqual([[g.id, "revoked by olga"]]);
    expect((await auditOf(rt.runtime.db, "grant.revoked")).map((r) => r.actor)).toEqual(["olga"]);
  });

  it("refuses a browser request without the console's Origin, and agents, ending nothing", async () => {
    const rt = await start();
    const { agent, rita } = await people(rt);
    const g = await demoGrant(rt, "rita");
    const url = `/api/grants/${g.id}`;
    await expectError(await request("DELETE", url, { cookie: rita.cookie, origin: null }), 403, "bad_origin");
    await expectError(
      await request("DELETE", url, { cookie: rita.cookie, origin: "https://evil.example" }),
      403,
      "bad_origin",
    );
    await expectError(await request("DELETE", url, { bearer: agent }), 403, "forbidden");
    await expectError(await request("DELETE", url), 401, "unauthenticated");
    expect(await covered(rt)).toBe(true);
    expect(await auditOf(rt.runtime.db, "grant.revoked")).toEqual([]);
  });

  it("an unknown id is 404 grant_not_found", async () => {
    const rt = await start();
    const { rita } = await people(rt);
    await expectError(
      await request("DELETE", "/api/grants/g_nope", { cookie: rita.cookie }),
      404,
      "grant_not_found",
    );
  });
});

describe("PATCH /api/users/:name with roles", () => {
  it("an owner takes the reviewer role: the grants end, and the person's session has the new roles at once", async () => {
    const rt = await start();
    const { rita, olga } = await people(rt);
    await demoGrant(rt, "rita");
    await expectError(await request("GET", "/api/users", { cookie: rita.cookie }), 403, "forbidden");

    const res = await request("PATCH", "/api/users/rita", {
      cookie: olga.cookie,
      body: { roles: ["owner"] },
    });
    expect(res.status).toBe(200);
    expect((await bodyOf<{ user: UserView }>(res)).user.roles).toEqual(["owner"]);
    expect(await covered(rt)).toBe(false);
    const list = await bodyOf<GrantListView>(await request("GET", "/api/grants", { cookie: olga.cookie }));
    expect(list.grants.map((v) => v.endReason)).toEqual(["rita no longer has the reviewer role"]);
    expect(await auditOf(rt.runtime.db, "user.roles")).toEqual([
      { actor: "olga", subject: "rita", callId: null, detail: "reviewer → owner" },
    ]);
    // The same cookie, the next request: sessions read the roles from the user's row.
    expect((await request("GET", "/api/users", { cookie: rita.cookie })).status).toBe(200);
  });

  it("refuses to take the owner role from the last owner, changing nothing else of the request", async () => {
    const rt = await start();
    const { olga } = await people(rt);
    const message = await expectError(
      await request("PATCH", "/api/users/olga", {
        cookie: olga.cookie,
        body: { email: "olga@example.com", roles: ["reviewer"] },
      }),
      409,
      "conflict",
    );
    expect(message).toContain("last owner");
    const row = await first(rt.runtime.db.select().from(users).where(eq(users.name, "olga")));
    expect([row?.roles, row?.email]).toEqual(["owner", null]);
  });

  it("sets the address and the roles together, and the address alone as before", async () => {
    const rt = await start();
    const { olga } = await people(rt);
    const both = await request("PATCH", "/api/users/rita", {
      cookie: olga.cookie,
      body: { email: "rita@example.com", roles: ["reviewer", "owner"] },
    });
    expect(both.status).toBe(200);
    expect((await bodyOf<{ user: UserView }>(both)).user).toMatchObject({
      email: "rita@example.com",
      roles: ["owner", "reviewer"],
    });
    const email = await request("PATCH", "/api/users/rita", { cookie: olga.cookie, body: { email: "" } });
    expect((await bodyOf<{ user: UserView }>(email)).user).toMatchObject({
      email: null,
      roles: ["owner", "reviewer"],
    });
  });

  it("refuses an empty body, no roles and unknown roles; only owners may change roles", async () => {
    const rt = await start();
    const { rita, olga } = await people(rt);
    for (const body of [{}, { roles: [] }, { roles: ["admin"] }]) {
      await expectError(
        await request("PATCH", "/api/users/rita", { cookie: olga.cookie, body }),
        400,
        "invalid_body",
      );
    }
    expect(
      await expectError(
        await request("PATCH", "/api/users/rita", { cookie: olga.cookie, body: {} }),
        400,
        "invalid_body",
      ),
    ).toBe("body: Give email, roles or password.");
    await expectError(
      await request("PATCH", "/api/users/rita", { cookie: rita.cookie, body: { roles: ["owner"] } }),
      403,
      "forbidden",
    );
    await expectError(
      await request("PATCH", "/api/users/nobody", { cookie: olga.cookie, body: { roles: ["owner"] } }),
      404,
      "not_found",
    );
    expect((await first(rt.runtime.db.select().from(users).where(eq(users.name, "rita"))))?.roles).toBe(
      "reviewer",
    );
  });
});
