import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type ConfigResult, loadConfigFile, type ServerConfig, shownConfigPath } from "./index";

/**
 * What the loader keeps of where each `mcpServers` entry is written and what it says of
 * `enabled`, and the warning that servers are dark: what an owner is told of a pasted
 * desktop-client config, whose entries never say `enabled`.
 */

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "gatehouse-entry-source-"));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

function load(text: string): { file: string; result: ConfigResult } {
  const file = join(dir, "gatehouse.json");
  writeFileSync(file, text);
  return { file, result: loadConfigFile(file, {}) };
}

function server(result: ConfigResult, name: string): ServerConfig {
  expect(result.errors).toEqual([]);
  const found = result.config?.servers.find((s) => s.name === name);
  if (!found) throw new Error(`no server ${name}`);
  return found;
}

/** The 1-based line of the first line of `text` that starts (after spaces) with `start`. */
function lineOf(text: string, start: string): number {
  const index = text.split("\n").findIndex((l) => l.trimStart().startsWith(start));
  if (index < 0) throw new Error(`no line starts with ${start}`);
  return index + 1;
}

describe("each entry's place and its enabled", () => {
  it("a pasted desktop config: no entry says enabled, each has its key's line", () => {
    const text = JSON.stringify(
      {
        mcpServers: {
          files: { command: "npx", args: ["-y", "@modelcontextprotocol/server-filesystem", "/srv/notes"] },
          tasks: { command: "uvx", args: ["tasks-mcp"], env: { LOG_LEVEL: "warn" } },
        },
      },
      null,
      2,
    );
    const { file, result } = load(text);
    expect(lineOf(text, '"files"')).toBe(3);
    expect(server(result, "files").source).toEqual({ file, line: 3, enabled: null });
    expect(server(result, "tasks").source).toEqual({ file, line: lineOf(text, '"tasks"'), enabled: null });
    expect(server(result, "files").enabled).toBe(false);
  });

  it("tells an entry that says enabled (true or false) from one that does not", () => {
    const text = [
      "{",
      '  "mcpServers": {',
      '    "on": { "command": "node", "enabled": true },',
      '    "off": {',
      '      "command": "node",',
      '      "enabled": false',
      "    },",
      '    "unsaid": { "command": "node" }',
      "  }",
      "}",
    ].join("\n");
    const { result } = load(text);
    expect(server(result, "on").source).toMatchObject({ line: 3, enabled: true });
    expect(server(result, "off").source).toMatchObject({ line: 4, enabled: false });
    expect(server(result, "unsaid").source).toMatchObject({ line: 8, enabled: null });
  });

  it("the name written elsewhere, as a value or a deeper key, does not fool it", () => {
    // "tasks" appears first as an argument, an env variable's name and value, a header name, and
    // inside a rule; "files" as a key of the top level's sibling section. Only the keys of
    // mcpServers itself are entries.
    const text = [
      "{",
      '  "rules": [{ "name": "files", "tools": ["tasks_*"], "decision": "review", "reason": "\\"tasks\\": {" }],',
      '  "mcpServers": {',
      '    "files": {',
      '      "command": "node",',
      '      "args": ["tasks", "--name", "tasks"],',
      '      "env": { "tasks": "tasks" },',
      '      "enabled": true',
      "    },",
      '    "remote": { "url": "https://mcp.example.com/mcp", "headers": { "tasks": "x" } },',
      '    "tasks": {',
      '      "command": "node"',
      "    }",
      "  }",
      "}",
    ].join("\n");
    const { result } = load(text);
    expect(server(result, "files").source?.line).toBe(4);
    expect(server(result, "remote").source?.line).toBe(10);
    expect(server(result, "tasks").source?.line).toBe(11);
  });

  it("finds a key written with escapes, and entries sharing one line", () => {
    const { result } = load(
      '{"mcpServers": {\n"fil\\u0065s": {"command": "node"}, "b": {"command": "node"}}}',
    );
    expect(server(result, "files").source?.line).toBe(2);
    expect(server(result, "b").source?.line).toBe(2);
  });

  it("keeps the lines with a byte-order mark and CRLF line ends", () => {
    const { result } = load(
      '\uFEFF{\r\n  "mcpServers": {\r\n\r\n    "files": {"command": "node"}\r\n  }\r\n}\r\n',
    );
    expect(server(result, "files").source?.line).toBe(4);
  });
});

describe("the dark servers warning", () => {
  it("names every dark server with its line, and says which is switched off on purpose", () => {
    const text = JSON.stringify(
      {
        mcpServers: {
          tasks: { command: "node" },
          demo: { command: "node", enabled: true },
          files: { command: "node", enabled: false },
        },
      },
      null,
      2,
    );
    const { result } = load(text);
    expect(result.errors).toEqual([]);
    expect(result.warnings).toEqual([
      {
        path: "mcpServers",
        message:
          `2 servers are dark (no "enabled": true): files (line ${lineOf(text, '"files"')}, "enabled": false), ` +
          `tasks (line ${lineOf(text, '"tasks"')}); Gatehouse does not dial them until their entries have "enabled": true (an entry without "enabled" can also be switched on from its card on Servers)`,
      },
    ]);
  });

  it("is not given when every server is switched on, nor for a file without servers", () => {
    expect(load('{"mcpServers": {"a": {"command": "node", "enabled": true}}}').result.warnings).toEqual([]);
    expect(load('{"mcpServers": {}}').result.warnings).toEqual([]);
  });

  it("is not given for a file with errors", () => {
    const { result } = load('{"mcpServers": {"a": {"command": "node"}, "a": {"command": "node"}}}');
    expect(result.config).toBeNull();
    expect(result.warnings.map((w) => w.message).join("\n")).not.toContain("dark");
  });
});

describe("shownConfigPath", () => {
  it("is relative inside the working directory, absolute outside it", () => {
    expect(shownConfigPath("/srv/gatehouse/gatehouse.json", "/srv/gatehouse")).toBe("gatehouse.json");
    expect(shownConfigPath("/srv/gatehouse/conf/g.json", "/srv/gatehouse")).toBe("conf/g.json");
    expect(shownConfigPath("/etc/gatehouse.json", "/srv/gatehouse")).toBe("/etc/gatehouse.json");
    // A sibling whose name starts like the folder is outside it.
    expect(shownConfigPath("/srv/gatehouse2/g.json", "/srv/gatehouse")).toBe("/srv/gatehouse2/g.json");
    expect(shownConfigPath("/srv/..g.json", "/srv")).toBe("..g.json");
    expect(shownConfigPath("", "/srv")).toBe("");
  });
});
