/**
 * `npm run gatehouse -- user set` and `user remove` as an operator runs them: a child process on
 * a real store (a file; a PostgreSQL database in the postgres project), with the same rules and
 * the same words as the API (the last owner stays).
 */
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { eq } from "drizzle-orm";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { cliStore, runCli } from "@/test/support/cli";
import { LoginThrottle, PER_NAME } from "../auth/access";
import { createSession, sessionUser } from "../auth/sessions";
import { createUser, verifyCredentials } from "../auth/users";
import { closeDb, type Db, first } from "../store/db";
import { auditEvents, users } from "../store/schema";

let dir: string;
let env: Record<string, string>;
let db: Db;

beforeEach(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), "gatehouse-cli-people-"));
  const store = await cliStore(dir);
  db = store.db;
  env = { ...store.env, GATEHOUSE_CONFIG: path.join(dir, "gatehouse.json") };
});
afterEach(async () => {
  await closeDb(db);
  rmSync(dir, { recursive: true, force: true });
});

const OLD = "the-old-password-1";
const NEW = "the-new-password-2";

/** Creates a person with the password {@link OLD} and `sessions` sessions; resolves with their cookie values. */
async function person(name: string, roles: ("owner" | "reviewer")[], sessions = 1): Promise<string[]> {
  const user = await createUser(db, { name, password: OLD, roles, actor: "test" });
  const ids: string[] = [];
  for (let i = 0; i < sessions; i++) ids.push((await createSession(db, user.id)).id);
  return ids;
}

describe("gatehouse user set", () => {
  it("sets roles, address and a password read from stdin at once; the reset ends every session", async () => {
    await person("olga", ["owner"]);
    const [firstSession = "", secondSession = ""] = await person("rita", ["reviewer"], 2);

    const res = await runCli(
      ["user", "set", "rita", "--role", "reviewer,owner", "--email", "Rita@Example.COM", "--password"],
      env,
      `${NEW}\n`,
    );
    expect(res.stderr).toBe("");
    expect(res.code).toBe(0);
    expect(res.stdout).toBe(
      "updated user rita (owner, reviewer) <Rita@example.com>; password reset, 2 sessions ended\n",
    );
    expect(await sessionUser(db, firstSession)).toBeNull();
    expect(await sessionUser(db, secondSession)).toBeNull();
    expect(await verifyCredentials(db, "rita", OLD)).toBeNull();
    expect((await verifyCredentials(db, "rita", NEW))?.roles).toEqual(["owner", "reviewer"]);
    const audit = await db.select().from(auditEvents).where(eq(auditEvents.subject, "rita"));
    expect(audit.map((a) => [a.actor, a.action, a.detail])).toEqual(
      expect.arrayContaining([
        ["cli", "user.email", "Rita@example.com"],
        ["cli", "user.roles", "reviewer → owner,reviewer"],
        ["cli", "user.password", "reset; 2 sessions ended"],
      ]),
    );
    expect(JSON.stringify(audit)).not.toContain(NEW);
  }, 30_000);

  it("a password reset unlocks the name on every server sharing the store", async () => {
    await person("rita", ["reviewer"]);
    const server = new LoginThrottle(db);
    for (let i = 0; i < PER_NAME.max; i++)
      await (await server.begin({ name: "rita", address: null })).failed();
    await expect(server.begin({ name: "rita", address: null })).rejects.toMatchObject({
      code: "too_many_attempts",
    });
    const res = await runCli(["user", "set", "rita", "--password"], env, `${NEW}\n`);
    expect(res.code).toBe(0);
    await (await server.begin({ name: "rita", address: null })).succeeded();
  }, 30_000);

  it("refuses what the API refuses, in the API's words, and changes nothing", async () => {
    const [olga = ""] = await person("olga", ["owner"]);
    const refusals: [string[], string, string][] = [
      [
        ["olga", "--role", "reviewer"],
        "",
        "error: olga is the last owner: give someone else the owner role first\n",
      ],
      [["nobody", "--password"], NEW, 'error: no user named "nobody"\n'],
      [
        ["olga", "--password"],
        "pw\npw-and-more",
        "error: password: Passwords cannot contain control characters such as a newline.\n",
      ],
    ];
    for (const [args, stdin, stderr] of refusals) {
      const res = await runCli(["user", "set", ...args], env, stdin);
      expect(res.code, args.join(" ")).toBe(1);
      expect(res.stderr).toBe(stderr);
    }
    const bare = await runCli(["user", "set", "olga"], env);
    expect(bare.code).toBe(1);
    expect(bare.stderr).toContain("user set needs --role, --email or --password");
    expect((await sessionUser(db, olga))?.roles).toEqual(["owner"]);
    expect(await verifyCredentials(db, "olga", OLD)).not.toBeNull();
  }, 60_000);
});

describe("gatehouse user remove", () => {
  it("removes the person and ends their sessions; the last owner cannot be removed", async () => {
    const [olga = ""] = await person("olga", ["owner"]);
    const [rita = ""] = await person("rita", ["reviewer"]);

    const res = await runCli(["user", "remove", "rita"], env);
    expect(res.stderr).toBe("");
    expect(res.code).toBe(0);
    expect(res.stdout).toBe(
      "removed user rita; 1 session ended, 0 grants ended, 0 pending calls withdrawn\n",
    );
    expect(await sessionUser(db, rita)).toBeNull();
    expect(await first(db.select().from(users).where(eq(users.name, "rita")))).toBeUndefined();
    // Her history stays under her name.
    const rows = await db
      .select()
      .from(auditEvents)
      .where(eq(auditEvents.subject, "rita"))
      .orderBy(auditEvents.id);
    expect(rows.map((a) => [a.actor, a.action])).toEqual([
      ["test", "user.create"],
      ["cli", "user.remove"],
    ]);

    const last = await runCli(["user", "remove", "olga"], env);
    expect(last.code).toBe(1);
    expect(last.stderr).toBe("error: olga is the last owner: give someone else the owner role first\n");
    expect((await sessionUser(db, olga))?.name).toBe("olga");
    const unknown = await runCli(["user", "remove", "rita"], env);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toBe('error: no user named "rita"\n');
  }, 60_000);
});
