/**
 * `npm run gatehouse -- user add` reads the password from stdin and strips one trailing newline
 * (what `echo` or a here-string adds); any other control character, such as the newline in
 * `printf 'pw\npw'`, refuses the password with the reason, and nobody is added.
 */
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import Database from "better-sqlite3";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { runCli } from "./support/cli";

function userAdd(name: string, env: Record<string, string>, stdin: string) {
  return runCli(["user", "add", name, "--role", "reviewer"], env, stdin);
}

let dir: string;
let env: Record<string, string>;

beforeEach(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), "gatehouse-cli-pw-"));
  // The SQLite file (read below with better-sqlite3): DATABASE_URL emptied, whatever the shell has.
  env = {
    GATEHOUSE_DB: path.join(dir, "db.sqlite"),
    GATEHOUSE_CONFIG: path.join(dir, "gatehouse.json"),
    DATABASE_URL: "",
  };
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

function userNames(): string[] {
  const file = env.GATEHOUSE_DB ?? "";
  if (!existsSync(file)) return [];
  const db = new Database(file, { readonly: true });
  const rows = db.prepare("select name from users order by name").all() as { name: string }[];
  db.close();
  return rows.map((r) => r.name);
}

const REFUSED = "error: password: Passwords cannot contain control characters such as a newline.\n";

describe("user add with a password on stdin", () => {
  it("refuses printf 'pw\\npw' with the reason and adds nobody", async () => {
    const res = await userAdd("rita", env, "pw\npw");
    expect(res.code).toBe(1);
    expect(res.stderr).toBe(REFUSED);
    expect(userNames()).toEqual([]);
  }, 30_000);

  it("strips only one trailing newline: a second one, or a tab inside, is refused", async () => {
    for (const stdin of ["a-long-password-1\n\n", "a-long\tpassword-1\n"]) {
      const res = await userAdd("rita", env, stdin);
      expect(res.code, JSON.stringify(stdin)).toBe(1);
      expect(res.stderr).toBe(REFUSED);
    }
    expect(userNames()).toEqual([]);
  }, 30_000);

  it("accepts a password ending in one newline (LF or CRLF), which is not part of it", async () => {
    const lf = await userAdd("rita", env, "a-long-password-1\n");
    expect(lf.code, lf.stderr).toBe(0);
    const crlf = await userAdd("rex", env, "a-long-password-2\r\n");
    expect(crlf.code, crlf.stderr).toBe(0);
    expect(userNames()).toEqual(["rex", "rita"]);
  }, 30_000);
});
