/**
 * A person's email address over the API (PRODUCT.md §10): an owner sets it when adding a person
 * or later with `PATCH /api/users/:name`, "" clears it, a bad address is refused with the
 * schema's message, and only an owner from the console's own Origin may change it.
 */
import { and, eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import type { UserView } from "@/lib/api-types";
import { bodyOf, createTestUser, request, type TestRuntime } from "@/test/support/runtime";
import { first } from "../store/db";
import { auditEvents, users } from "../store/schema";
import { expectError, runtimePerTest, STRONG } from "./auth-fixtures";

const start = runtimePerTest();

async function storedEmail(rt: TestRuntime, name: string): Promise<string | null | undefined> {
  return (await first(rt.runtime.db.select({ email: users.email }).from(users).where(eq(users.name, name))))
    ?.email;
}

function emailAudit(rt: TestRuntime, name: string) {
  return rt.runtime.db
    .select({ actor: auditEvents.actor, detail: auditEvents.detail })
    .from(auditEvents)
    .where(and(eq(auditEvents.action, "user.email"), eq(auditEvents.subject, name)))
    .orderBy(auditEvents.id);
}

describe("a person's email address", () => {
  it("an owner adds a person with an address; it is stored trimmed with the domain lower-cased and listed", async () => {
    const rt = await start();
    const owner = await createTestUser(rt.runtime, "olga", ["owner"]);
    const res = await request("POST", "/api/users", {
      cookie: owner.cookie,
      body: { name: "rita", password: STRONG, roles: ["reviewer"], email: "  Rita.Q@Example.COM " },
    });
    expect(res.status).toBe(201);
    expect((await bodyOf<{ user: UserView }>(res)).user.email).toBe("Rita.Q@example.com");
    expect(await storedEmail(rt, "rita")).toBe("Rita.Q@example.com");

    const listed = await bodyOf<{ users: UserView[] }>(
      await request("GET", "/api/users", { cookie: owner.cookie }),
    );
    expect(listed.users.map((u) => [u.name, u.email])).toEqual([
      ["olga", null],
      ["rita", "Rita.Q@example.com"],
    ]);
  });

  it("adding a person without an address, or with an empty one, stores none", async () => {
    const rt = await start();
    const owner = await createTestUser(rt.runtime, "olga", ["owner"]);
    for (const [name, extra] of [
      ["rita", {}],
      ["rex", { email: "" }],
    ] as const) {
      const res = await request("POST", "/api/users", {
        cookie: owner.cookie,
        body: { name, password: STRONG, roles: ["reviewer"], ...extra },
      });
      expect(res.status).toBe(201);
      expect((await bodyOf<{ user: UserView }>(res)).user.email).toBeNull();
      expect(await storedEmail(rt, name)).toBeNull();
    }
  });

  it("a bad address is refused with 400 and the schema's message, and nobody is created", async () => {
    const rt = await start();
    const owner = await createTestUser(rt.runtime, "olga", ["owner"]);
    const res = await request("POST", "/api/users", {
      cookie: owner.cookie,
      body: { name: "rita", password: STRONG, roles: ["reviewer"], email: "rita at example" },
    });
    expect(await expectError(res, 400, "invalid_body")).toBe(
      "body.email: Use an address like name@example.com.",
    );
    expect(await storedEmail(rt, "rita")).toBeUndefined();
  });

  it("PATCH sets, changes and clears an address, with one audit row per change", async () => {
    const rt = await start();
    const owner = await createTestUser(rt.runtime, "olga", ["owner"]);
    await createTestUser(rt.runtime, "rita", ["reviewer"]);
    const patch = (email: string) =>
      request("PATCH", "/api/users/rita", { cookie: owner.cookie, body: { email } });

    const set = await patch("rita@example.com");
    expect(set.status).toBe(200);
    expect((await bodyOf<{ user: UserView }>(set)).user).toMatchObject({
      name: "rita",
      email: "rita@example.com",
    });
    expect(await storedEmail(rt, "rita")).toBe("rita@example.com");

    // The same address again changes nothing and is not audited twice.
    expect((await patch(" rita@EXAMPLE.com")).status).toBe(200);
    expect((await patch("r@mail.example")).status).toBe(200);
    expect(await storedEmail(rt, "rita")).toBe("r@mail.example");

    const cleared = await patch("");
    expect(cleared.status).toBe(200);
    expect((await bodyOf<{ user: UserView }>(cleared)).user.email).toBeNull();
    expect(await storedEmail(rt, "rita")).toBeNull();

    expect(await emailAudit(rt, "rita")).toEqual([
      { actor: "olga", detail: "rita@example.com" },
      { actor: "olga", detail: "r@mail.example" },
      { actor: "olga", detail: "cleared" },
    ]);
  });

  it("PATCH with a bad address answers 400 with the schema's message and keeps the old one", async () => {
    const rt = await start();
    const owner = await createTestUser(rt.runtime, "olga", ["owner"]);
    await createTestUser(rt.runtime, "rita", ["reviewer"]);
    await request("PATCH", "/api/users/rita", { cookie: owner.cookie, body: { email: "rita@example.com" } });
    for (const email of ["rita@", "two words@example.com", "<rita@example.com>", `${"a".repeat(250)}@x.io`]) {
      const res = await request("PATCH", "/api/users/rita", { cookie: owner.cookie, body: { email } });
      const message = await expectError(res, 400, "invalid_body");
      expect(message).toMatch(/^body\.email: /);
    }
    await expectError(
      await request("PATCH", "/api/users/rita", { cookie: owner.cookie, body: {} }),
      400,
      "invalid_body",
    );
    expect(await storedEmail(rt, "rita")).toBe("rita@example.com");
    expect(await emailAudit(rt, "rita")).toHaveLength(1);
  });

  it("PATCH of an unknown person answers 404 not_found", async () => {
    const rt = await start();
    const owner = await createTestUser(rt.runtime, "olga", ["owner"]);
    const res = await request("PATCH", "/api/users/nobody", {
      cookie: owner.cookie,
      body: { email: "nobody@example.com" },
    });
    expect(await expectError(res, 404, "not_found")).toContain("nobody");
  });

  it("a reviewer may not change anyone's address, not even their own", async () => {
    const rt = await start();
    const reviewer = await createTestUser(rt.runtime, "rita", ["reviewer"]);
    await createTestUser(rt.runtime, "rex", ["reviewer"]);
    for (const name of ["rita", "rex"]) {
      const res = await request("PATCH", `/api/users/${name}`, {
        cookie: reviewer.cookie,
        body: { email: "evil@example.com" },
      });
      await expectError(res, 403, "forbidden");
      expect(await storedEmail(rt, name)).toBeNull();
    }
    await expectError(await request("GET", "/api/users", { cookie: reviewer.cookie }), 403, "forbidden");
  });

  it("a cross-origin or Origin-less PATCH with the owner's cookie is refused", async () => {
    const rt = await start();
    const owner = await createTestUser(rt.runtime, "olga", ["owner"]);
    await createTestUser(rt.runtime, "rita", ["reviewer"]);
    for (const origin of ["http://evil.example", null]) {
      const res = await request("PATCH", "/api/users/rita", {
        cookie: owner.cookie,
        origin,
        body: { email: "evil@example.com" },
      });
      await expectError(res, 403, "bad_origin");
    }
    expect(await storedEmail(rt, "rita")).toBeNull();
    expect(await emailAudit(rt, "rita")).toEqual([]);
  });
});
