// biome-ignore-all lint/suspicious/noTemplateCurlyInString: these tests are about literal ${VAR} references in config text.
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";

/** `npm run gatehouse -- config check` on files with a `notifications` section or a server's `auth`, as an owner runs it. */

const root = path.resolve(__dirname, "../..");
const SECRET = "zz-Cli-S3cret-81d";

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function configCheck(file: string, env: Record<string, string>): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn("npm", ["run", "--silent", "gatehouse", "--", "config", "check", file], {
      cwd: root,
      env: { ...process.env, ...env },
    });
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
  });
}

const notifications = {
  publicUrl: "https://gatehouse.example.com/",
  webhooks: [
    {
      name: "ops-chat",
      url: "https://hooks.example.com/T0/B0/${CHAT_HOOK}",
      format: "slack",
      events: ["call.pending", "call.decided"],
    },
    {
      name: "pager",
      url: "https://ops.example.com/gatehouse",
      secret: "${HOOK_SECRET}",
      events: ["call.pending", "call.expired"],
    },
  ],
  email: {
    smtp: "smtps://gatehouse:${SMTP_PASSWORD}@smtp.example.com:465",
    from: "gatehouse@example.com",
  },
};

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), "gatehouse-config-check-"));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

describe("config check with a notifications section", () => {
  it("passes when every referenced variable is set", async () => {
    const file = path.join(dir, "gatehouse.json");
    writeFileSync(
      file,
      JSON.stringify({ mcpServers: { ok: { command: "node", enabled: true } }, notifications }),
    );
    const res = await configCheck(file, { CHAT_HOOK: SECRET, HOOK_SECRET: SECRET, SMTP_PASSWORD: SECRET });
    expect(res.stderr).toBe("");
    expect(res.code).toBe(0);
    expect(res.stdout).toContain("OK (1 server, 0 warning(s))");
    expect(res.stdout).not.toContain(SECRET);
  }, 30_000);

  it("fails with every error on its JSON path, and shows no secret", async () => {
    const file = path.join(dir, "bad.json");
    const bad = {
      mcpServers: {},
      catalogue: { webhook: "https://hooks.example.com/catalogue" },
      notifications: {
        ...notifications,
        webhooks: [
          ...notifications.webhooks,
          { name: "catalogue", url: `ftp://hooks.example.com/${SECRET}`, events: ["call.approved"] },
        ],
        email: { ...notifications.email, events: ["catalogue.changed"] },
      },
    };
    writeFileSync(file, JSON.stringify(bad));
    // CHAT_HOOK unset; SMTP_PASSWORD holds an unencoded "/".
    const res = await configCheck(file, { HOOK_SECRET: SECRET, SMTP_PASSWORD: `${SECRET}/x` });
    expect(res.code).toBe(1);
    const lines = res.stderr.trimEnd().split("\n");
    expect(lines).toEqual([
      "error: notifications.webhooks[0].url: refers to ${CHAT_HOOK}, which is not set; set CHAT_HOOK in Gatehouse's environment or remove this webhook",
      'error: notifications.webhooks[2].url: "ftp://hooks.example.com/..." is not an absolute http(s) URL; use e.g. https://hooks.example.com/...',
      expect.stringMatching(
        /^error: notifications\.webhooks\[2\]\.events\[0\]: "call\.approved" is not an event; /,
      ),
      expect.stringMatching(
        /^error: notifications\.webhooks\[2\]\.name: "catalogue" is the name catalogue\.webhook/,
      ),
      expect.stringMatching(
        /^error: notifications\.email\.smtp: "smtps:\/\/gatehouse:\*\*\*@smtp\.example\.com:465" is not an smtp:\/\/ or smtps:\/\/ URL \(after \$\{VAR\} expansion\)/,
      ),
      expect.stringMatching(
        /^error: notifications\.email\.events\[0\]: "catalogue\.changed" cannot be mailed/,
      ),
      `${file}: 6 error(s)`,
    ]);
    expect(res.stderr).not.toContain(SECRET);
  }, 30_000);
});

describe("config check with a server's auth", () => {
  const tasks = (auth: unknown) => ({
    mcpServers: { tasks: { url: "https://tasks.example.com/mcp", enabled: true, auth } },
  });

  it("passes with an OAuth server whose client secret is set", async () => {
    const file = path.join(dir, "gatehouse.json");
    writeFileSync(
      file,
      JSON.stringify(
        tasks({
          type: "oauth",
          scopes: ["read", "write"],
          clientId: "gatehouse",
          issuer: "https://auth.example.com",
          clientSecret: "${TASKS_SECRET}",
        }),
      ),
    );
    const res = await configCheck(file, { TASKS_SECRET: SECRET, GATEHOUSE_DB: path.join(dir, "g.db") });
    expect(res.stderr).toBe("");
    expect(res.code).toBe(0);
    expect(res.stdout).toContain("OK (1 server, 0 warning(s))");
  }, 30_000);

  it("fails on a bad auth with each error on its JSON path, and shows no secret", async () => {
    const file = path.join(dir, "bad.json");
    writeFileSync(
      file,
      JSON.stringify(
        tasks({
          type: "oauth",
          scopes: ["read", "read"],
          clientId: "gatehouse",
          issuer: "https://auth.example.com",
          clientSecret: SECRET,
        }),
      ),
    );
    const res = await configCheck(file, { GATEHOUSE_DB: path.join(dir, "g.db") });
    expect(res.code).toBe(1);
    expect(res.stderr.trimEnd().split("\n")).toEqual([
      'error: mcpServers.tasks.auth.scopes[1]: "read" is listed twice; remove one',
      expect.stringMatching(
        /^error: mcpServers\.tasks\.auth\.clientSecret: must be one \$\{VAR\} reference and nothing else, .* would sit in gatehouse\.json/,
      ),
      `${file}: 2 error(s)`,
    ]);
    expect(res.stderr).not.toContain(SECRET);
  }, 30_000);
});
