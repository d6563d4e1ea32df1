import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import Database from "better-sqlite3";
import { afterEach, beforeEach, describe, expect, it } from "vitest";

const root = path.resolve(__dirname, "..");

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function run(args: string[], env: Record<string, string>, stdin = ""): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, { cwd: root, env: { ...process.env, ...env } });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (c: Buffer) => {
      stdout += c.toString();
    });
    child.stderr.on("data", (c: Buffer) => {
      stderr += c.toString();
    });
    child.once("error", reject);
    child.once("exit", (code) => resolve({ code, stdout, stderr }));
    child.stdin.end(stdin);
  });
}

const cli = (args: string[], env: Record<string, string>, stdin?: string) =>
  run(["--conditions=react-server", "--import", "tsx", "server/cli/main.ts", ...args], env, stdin);

let dir: string;
let env: Record<string, string>;

beforeEach(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), "gatehouse-cli-"));
  // The SQLite file: DATABASE_URL emptied, whatever the shell running the tests has.
  env = {
    GATEHOUSE_DB: path.join(dir, "db.sqlite"),
    GATEHOUSE_CONFIG: path.join(dir, "gatehouse.json"),
    DATABASE_URL: "",
  };
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

describe("CLI", () => {
  it("config check passes a valid file and reports every error of a bad one with its JSON path", async () => {
    writeFileSync(env.GATEHOUSE_CONFIG ?? "", JSON.stringify({ mcpServers: { ok: { command: "node" } } }));
    const good = await cli(["config", "check"], env);
    expect(good.code).toBe(0);
    expect(good.stdout).toContain("OK (1 server");
    expect(good.stdout).toContain(`store: SQLite file ${env.GATEHOUSE_DB}\n`);

    const bad = path.join(dir, "bad.json");
    writeFileSync(
      bad,
      JSON.stringify({ mcpServers: { files: { url: "srv/mcp" }, Bad_Name: { command: "x" } } }),
    );
    const res = await cli(["config", "check", bad], env);
    expect(res.code).toBe(1);
    expect(res.stderr).toContain("mcpServers.files.url");
    expect(res.stderr).toContain("Bad_Name");
  }, 30_000);

  it("config check names the PostgreSQL store of DATABASE_URL by its host, never its password", async () => {
    writeFileSync(env.GATEHOUSE_CONFIG ?? "", JSON.stringify({ mcpServers: { ok: { command: "node" } } }));
    const password = "Zq7-not-for-logs";
    const pg = { ...env, DATABASE_URL: `postgres://gatehouse:${password}@db.internal.example:6543/gh` };
    const key = randomBytes(32).toString("base64");
    // Nothing is connected to: the check only reads the environment.
    const good = await cli(["config", "check"], { ...pg, GATEHOUSE_SECRET_KEY: key });
    expect(good.code, good.stderr).toBe(0);
    expect(good.stdout).toContain("store: PostgreSQL postgres://gatehouse:***@db.internal.example:6543/gh\n");
    // Without the key every replica must share, the check stops the start, and still shows no password.
    const keyless = await cli(["config", "check"], pg);
    expect(keyless.code).toBe(1);
    expect(keyless.stderr).toContain("GATEHOUSE_SECRET_KEY is required with PostgreSQL");
    expect(keyless.stdout).toBe("store: PostgreSQL postgres://gatehouse:***@db.internal.example:6543/gh\n");
    // A URL the server would refuse is refused here, without repeating it.
    const mysql = await cli(["config", "check"], {
      ...pg,
      DATABASE_URL: `mysql://gatehouse:${password}@db.internal.example/gh`,
      GATEHOUSE_SECRET_KEY: key,
    });
    expect(mysql.code).toBe(1);
    expect(mysql.stderr).toContain("store: DATABASE_URL must be a PostgreSQL URL");
    for (const res of [good, keyless, mysql]) {
      expect(`${res.stdout}${res.stderr}`).not.toContain(password);
      expect(`${res.stdout}${res.stderr}`).not.toContain(key);
    }
  }, 30_000);

  it("user add reads the password from stdin and stores only its hash", async () => {
    const res = await cli(["user", "add", "rita", "--role", "reviewer"], env, "a-long-password-1\n");
    expect(res.code, res.stderr).toBe(0);
    const db = new Database(env.GATEHOUSE_DB ?? "");
    const row = db.prepare("select name, roles, password_hash as hash from users").get() as {
      name: string;
      roles: string;
      hash: string;
    };
    db.close();
    expect(row).toMatchObject({ name: "rita", roles: "reviewer" });
    expect(row.hash).not.toContain("a-long-password-1");
    expect(row.hash.startsWith("scrypt$")).toBe(true);

    const dup = await cli(["user", "add", "rita", "--role", "owner"], env, "another-password-1\n");
    expect(dup.code).toBe(1);
    expect(dup.stderr).toContain("already exists");
    const badRole = await cli(["user", "add", "sam", "--role", "admin"], env, "another-password-1\n");
    expect(badRole.code).toBe(1);
    expect(badRole.stderr).toContain("roles");
  }, 30_000);

  it("user add --email stores the address; a bad or missing address fails with a clear error and adds nobody", async () => {
    const res = await cli(
      ["user", "add", "rex", "--role", "reviewer", "--email", " Rex@Example.COM"],
      env,
      "a-long-password-1\n",
    );
    expect(res.code, res.stderr).toBe(0);
    expect(res.stdout).toContain("added user rex (reviewer) <Rex@example.com>");

    const bad = await cli(
      ["user", "add", "sam", "--role", "reviewer", "--email", "sam-at-example"],
      env,
      "another-password-1\n",
    );
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain("email: Use an address like name@example.com.");
    const missing = await cli(
      ["user", "add", "sue", "--role", "reviewer", "--email"],
      env,
      "another-password-1\n",
    );
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain("--email needs an ADDRESS");

    const db = new Database(env.GATEHOUSE_DB ?? "");
    const rows = db.prepare("select name, email from users order by name").all();
    db.close();
    expect(rows).toEqual([{ name: "rex", email: "Rex@example.com" }]);
  }, 30_000);

  it("token create prints the token alone on the last line and token revoke revokes it", async () => {
    const res = await cli(["token", "create", "build-bot"], env);
    expect(res.code, res.stderr).toBe(0);
    const last = res.stdout.trimEnd().split("\n").at(-1) ?? "";
    expect(last).toMatch(/^gh_[A-Za-z0-9_-]{43}$/);
    const db = new Database(env.GATEHOUSE_DB ?? "");
    const stored = db.prepare("select token_hash as h, revoked_at as r from agent_tokens").get() as {
      h: string;
      r: null;
    };
    expect(stored.h).not.toContain(last);
    expect(stored.r).toBeNull();
    db.close();

    const revoked = await cli(["token", "revoke", "build-bot"], env);
    expect(revoked.code).toBe(0);
    const db2 = new Database(env.GATEHOUSE_DB ?? "");
    const after = db2.prepare("select revoked_at as r from agent_tokens").get() as { r: string | null };
    db2.close();
    expect(after.r).not.toBeNull();
  }, 30_000);

  it("token create --tool-set, token set and token list: sets from the config, moves audited", async () => {
    writeFileSync(
      env.GATEHOUSE_CONFIG ?? "",
      JSON.stringify({
        mcpServers: {},
        toolSets: { billing: { tools: ["pay_*"] }, docs: { tools: ["files_*"] } },
      }),
    );
    const created = await cli(["token", "create", "billing-bot", "--tool-set", "billing"], env);
    expect(created.code, created.stderr).toBe(0);
    expect(created.stdout).toContain("created agent token billing-bot in tool set billing");
    const typo = await cli(["token", "create", "docs-bot", "--tool-set", "doc"], env);
    expect(typo.code).toBe(1);
    expect(typo.stderr).toContain('There is no tool set "doc"; the configuration defines "billing", "docs".');

    const moved = await cli(["token", "set", "billing-bot", "--tool-set", "docs"], env);
    expect(moved.stdout).toBe("agent token billing-bot: tool set docs\n");
    const freed = await cli(["token", "set", "billing-bot", "--no-tool-set"], env);
    expect(freed.stdout).toBe("agent token billing-bot: no tool set (every enabled tool)\n");
    const both = await cli(["token", "set", "billing-bot", "--tool-set", "docs", "--no-tool-set"], env);
    expect(both.code).toBe(1);

    await cli(["token", "create", "plain-bot"], env);
    const list = await cli(["token", "list"], env);
    expect(list.code).toBe(0);
    expect(list.stdout.split("\n")[0]).toMatch(/^NAME\s+TOOL SET\s+STATUS$/);
    expect(list.stdout).toMatch(/billing-bot\s+-\s+active since/);
    const db = new Database(env.GATEHOUSE_DB ?? "");
    const audit = db
      .prepare("select action, detail from audit_events where subject = 'billing-bot' order by id")
      .all();
    db.close();
    expect(audit).toEqual([
      { action: "token.create", detail: 'tool set "billing"' },
      { action: "token.tool_set", detail: '"billing" → "docs"' },
      { action: "token.tool_set", detail: '"docs" → no tool set' },
    ]);
  }, 60_000);
});

describe("npm start", () => {
  it("a bad config stops the start with every error before anything listens", async () => {
    writeFileSync(
      env.GATEHOUSE_CONFIG ?? "",
      JSON.stringify({
        mcpServers: { files: { url: "srv/mcp", enabeld: true } },
        approvals: { waitSeconds: -1 },
      }),
    );
    const port = await new Promise<number>((resolve) => {
      const s = net.createServer().listen(0, "127.0.0.1", () => {
        const p = (s.address() as net.AddressInfo).port;
        s.close(() => resolve(p));
      });
    });
    const res = await run(["scripts/start.mjs"], { ...env, PORT: String(port) });
    expect(res.code).toBe(1);
    expect(res.stderr).toContain("mcpServers.files.url");
    expect(res.stderr).toContain("mcpServers.files.enabeld");
    expect(res.stderr).toContain("approvals.waitSeconds");
    expect(res.stdout).not.toContain("Ready");
    const listening = await new Promise<boolean>((resolve) => {
      const sock = net.connect(port, "127.0.0.1");
      sock.once("connect", () => {
        sock.destroy();
        resolve(true);
      });
      sock.once("error", () => resolve(false));
    });
    expect(listening).toBe(false);
  }, 30_000);
});
