/**
 * `npm run gatehouse -- config check` on a config pasted from a desktop MCP client, as an owner
 * runs it before `npm start` (which runs this check first and shows its output): every entry
 * without `"enabled": true` is named, with its line, before anything starts.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { runCli } from "@/test/support/cli";

let dir: string;
let env: Record<string, string>;
beforeEach(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), "gatehouse-cli-dark-"));
  // A store folder of its own: the check also looks at the secret key beside it (and names the store).
  env = { GATEHOUSE_DB: path.join(dir, "gatehouse.db"), DATABASE_URL: "" };
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

/** The line that names the store the check found (SQLite, beside the config here). */
function storeLine(): string {
  return `store: SQLite file ${path.join(dir, "gatehouse.db")}\n`;
}

const pasted = [
  "{",
  '  "mcpServers": {',
  '    "files": {',
  '      "command": "npx",',
  '      "args": ["-y", "@modelcontextprotocol/server-filesystem", "/srv/notes"]',
  "    },",
  '    "demo": { "command": "node", "args": ["demo/server.mjs"], "enabled": true },',
  '    "tasks": {',
  '      "command": "uvx",',
  '      "args": ["tasks-mcp"],',
  '      "enabled": false',
  "    }",
  "  }",
  "}",
].join("\n");

describe("config check on dark servers", () => {
  it("warns with each dark server's name and line, and counts the warning", async () => {
    const file = path.join(dir, "gatehouse.json");
    writeFileSync(file, pasted);
    const res = await runCli(["config", "check", file], env);
    expect(res.code).toBe(0);
    expect(res.stderr.trimEnd().split("\n")).toEqual([
      'warning: mcpServers: 2 servers are dark (no "enabled": true): files (line 3), tasks (line 8, "enabled": false); ' +
        'Gatehouse does not dial them until their entries have "enabled": true (an entry without "enabled" can also be switched on from its card on Servers)',
    ]);
    expect(res.stdout).toBe(`${file}: OK (3 servers, 1 warning(s))\n${storeLine()}`);
  }, 30_000);

  it("reads GATEHOUSE_CONFIG without a FILE, and says nothing of servers that are all switched on", async () => {
    const file = path.join(dir, "on.json");
    writeFileSync(file, '{"mcpServers": {"demo": {"command": "node", "enabled": true}}}');
    const res = await runCli(["config", "check"], { ...env, GATEHOUSE_CONFIG: file });
    expect(res.stderr).toBe("");
    expect(res.code).toBe(0);
    expect(res.stdout).toBe(`${file}: OK (1 server, 0 warning(s))\n${storeLine()}`);
  }, 30_000);

  it("lists the dark warning after the other warnings, all in the count", async () => {
    const file = path.join(dir, "gatehouse.json");
    writeFileSync(file, '{"mcpServers": {"files": {"command": "node", "env": {"TOKEN": "${FILES_TOKEN}"}}}}');
    const res = await runCli(["config", "check", file], env);
    expect(res.code).toBe(0);
    const lines = res.stderr.trimEnd().split("\n");
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatch(
      /^warning: mcpServers\.files\.env\.TOKEN: uses \$\{FILES_TOKEN\}, which is not set/,
    );
    expect(lines[1]).toBe(
      'warning: mcpServers: 1 server is dark (no "enabled": true): files (line 1); Gatehouse does not dial it until its entry has "enabled": true (an entry without "enabled" can also be switched on from its card on Servers)',
    );
    expect(res.stdout).toBe(`${file}: OK (1 server, 2 warning(s))\n${storeLine()}`);
  }, 30_000);
});
