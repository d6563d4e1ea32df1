/**
 * Agent tokens and the Authorization header (PRODUCT.md §1, §8): a token works at once and only
 * its hash is stored, a revoked or unknown token is refused, and a header of another scheme
 * neither hides nor stands in for the session cookie.
 */
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { eq, is, Table } from "drizzle-orm";
import type { SQLiteTable } from "drizzle-orm/sqlite-core";
import { describe, expect, it } from "vitest";
import type { TokenView } from "@/lib/api-types";
import { bodyOf, createAgentToken, createTestUser, request, type TestRuntime } from "@/test/support/runtime";
import { testDialect } from "@/test/support/store";
import { first } from "../store/db";
import * as schema from "../store/schema";
import { agentTokens } from "../store/schema";
import { expectError, runtimePerTest } from "./auth-fixtures";
import { sha256 } from "./crypto";

const start = runtimePerTest();

/**
 * What the store holds, as text. SQLite: every byte of its files (main file, WAL and shared
 * memory) as latin1, so deleted rows and free pages count too. PostgreSQL (no file of ours):
 * every row of every table, as JSON.
 */
async function storeBytes(rt: TestRuntime): Promise<string> {
  if (testDialect === "postgres") {
    const tables = (Object.values(schema) as unknown[]).filter((t): t is SQLiteTable => is(t, Table));
    const rows = await Promise.all(tables.map((t) => rt.runtime.db.select().from(t)));
    return JSON.stringify(rows);
  }
  const base = path.basename(rt.dbFile);
  return readdirSync(rt.dir)
    .filter((f) => f.startsWith(base))
    .map((f) => readFileSync(path.join(rt.dir, f)).toString("latin1"))
    .join("\n");
}

describe("agent tokens", () => {
  it("a created token works at once, and the store never contains its secret", async () => {
    const rt = await start();
    const owner = await createTestUser(rt.runtime, "olga", ["owner"]);
    const res = await request("POST", "/api/tokens", { cookie: owner.cookie, body: { name: "robot" } });
    expect(res.status).toBe(201);
    const { secret, token } = await bodyOf<{ secret: string; token: TokenView }>(res);
    expect(token.name).toBe("robot");
    expect(secret.length).toBeGreaterThan(40);

    const tools = await request("GET", "/api/tools", { bearer: secret });
    expect(tools.status).toBe(200);

    const row = await first(rt.runtime.db.select().from(agentTokens).where(eq(agentTokens.name, "robot")));
    expect(row?.tokenHash).toBe(sha256(secret));
    const stored = await storeBytes(rt);
    expect(stored).toContain(sha256(secret));
    expect(stored).not.toContain(secret);
    // Nor the password or the session cookie of the owner.
    expect(stored).not.toContain(owner.password);
    expect(stored).not.toContain(owner.cookie.slice(owner.cookie.indexOf("=") + 1));

    const listed = await request("GET", "/api/tokens", { cookie: owner.cookie });
    const text = await listed.text();
    expect(text).toContain("robot");
    expect(text).not.toContain(secret);
    expect(text).not.toContain(sha256(secret));
  });

  it("a revoked token is rejected", async () => {
    const rt = await start();
    const owner = await createTestUser(rt.runtime, "olga", ["owner"]);
    const secret = await createAgentToken(rt.runtime, "robot");
    expect((await request("GET", "/api/tools", { bearer: secret })).status).toBe(200);
    const res = await request("DELETE", "/api/tokens/robot", { cookie: owner.cookie });
    expect(res.status).toBe(200);
    expect((await bodyOf<{ token: TokenView }>(res)).token.revokedAt).not.toBeNull();
    const after = await request("GET", "/api/tools", { bearer: secret });
    await expectError(after, 401, "unauthenticated");
    expect(after.headers.get("www-authenticate")).toContain("Bearer");
  });

  it("an unknown bearer token is rejected even with a valid session cookie beside it", async () => {
    const rt = await start();
    const owner = await createTestUser(rt.runtime, "olga", ["owner"]);
    const res = await request("GET", "/api/tools", { bearer: "gh_not-a-token", cookie: owner.cookie });
    await expectError(res, 401, "unauthenticated");
  });
});

describe("credentials of other schemes", () => {
  it("a proxy's Basic Authorization header does not hide the session cookie", async () => {
    const rt = await start();
    const owner = await createTestUser(rt.runtime, "olga", ["owner"]);
    const res = await request("GET", "/api/servers", {
      cookie: owner.cookie,
      headers: { Authorization: "Basic b2xnYTpwcm94eS1wYXNz" },
    });
    expect(res.status).toBe(200);
  });

  it("a malformed Bearer header is refused, not treated as a session", async () => {
    const rt = await start();
    const owner = await createTestUser(rt.runtime, "olga", ["owner"]);
    const res = await request("GET", "/api/servers", {
      cookie: owner.cookie,
      headers: { Authorization: "Bearer" },
    });
    await expectError(res, 401, "unauthenticated");
  });
});
