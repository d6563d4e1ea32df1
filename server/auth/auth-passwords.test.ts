/**
 * A password with a control character cannot be set through the API (`POST /api/users`, the
 * setup link): it is refused with a message that says why, and nothing is created. Signing in
 * with such a text is not a bad request, just wrong credentials.
 */
import { eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { createTestUser, request } from "@/test/support/runtime";
import { first } from "../store/db";
import { users } from "../store/schema";
import { expectError, runtimePerTest, STRONG } from "./auth-fixtures";
import { issueSetupCode } from "./users";

const start = runtimePerTest();

const REFUSED = "body.password: Passwords cannot contain control characters such as a newline.";

describe("a password with a control character", () => {
  it("is refused by POST /api/users with 400 and the reason, and nobody is created", async () => {
    const rt = await start();
    const owner = await createTestUser(rt.runtime, "olga", ["owner"]);
    for (const bad of [
      `${STRONG}\n`,
      `pw\npw-${STRONG}`,
      `${STRONG}\t`,
      `${STRONG}\u2028`,
      `\u0000${STRONG}`,
    ]) {
      const res = await request("POST", "/api/users", {
        cookie: owner.cookie,
        body: { name: "rita", password: bad, roles: ["reviewer"] },
      });
      expect(await expectError(res, 400, "invalid_body")).toBe(REFUSED);
    }
    expect(await first(rt.runtime.db.select().from(users).where(eq(users.name, "rita")))).toBeUndefined();
  });

  it("is refused by the setup link, which stays usable for a good password", async () => {
    const rt = await start();
    const code = await issueSetupCode(rt.runtime.db);
    const res = await request("POST", "/api/setup", {
      body: { code, name: "first", password: `pw\npw-${STRONG}` },
    });
    expect(await expectError(res, 400, "invalid_body")).toBe(REFUSED);
    expect(await rt.runtime.db.select().from(users)).toEqual([]);

    const good = await request("POST", "/api/setup", { body: { code, name: "first", password: STRONG } });
    expect(good.status).toBe(201);
  });

  it("signing in with one is wrong credentials, not a bad request", async () => {
    const rt = await start();
    await createTestUser(rt.runtime, "alice", ["reviewer"], STRONG);
    const res = await request("POST", "/api/session", { body: { name: "alice", password: `${STRONG}\n` } });
    await expectError(res, 401, "invalid_credentials");
  });
});
