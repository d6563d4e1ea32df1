// biome-ignore-all lint/suspicious/noTemplateCurlyInString: these tests are about literal ${VAR} references in config text.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { ServerConfig } from "./index";
import {
  ConfigError,
  configPathFromEnv,
  formatIssues,
  loadConfig,
  loadConfigFile,
  validateConfig,
} from "./index";
import { BASE, FIXTURES, http, stdio, withServers } from "./test-helpers";

describe("a valid file", () => {
  it("the product example loads with its values and the rest defaulted", () => {
    const result = loadConfigFile(join(FIXTURES, "example.json"), { TASKS_TOKEN: "t0k" });
    expect(result.errors).toEqual([]);
    expect(result.warnings).toEqual([]);
    const config = result.config;
    expect(config?.path).toBe(join(FIXTURES, "example.json"));
    expect(config?.servers.map((s) => s.name)).toEqual(["files", "tasks"]);
    expect(config?.servers[0]).toEqual({
      name: "files",
      transport: "stdio",
      command: "npx",
      args: ["-y", "@modelcontextprotocol/server-filesystem", "/srv/notes"],
      env: { LOG_LEVEL: "warn" },
      cwd: FIXTURES,
      url: null,
      headers: {},
      allowPrivate: false,
      allowTools: null,
      maxTools: 8,
      timeoutMs: 20000,
      minIntervalMs: 0,
      maxFrameBytes: 4 * 1024 * 1024,
      enabled: true,
      source: { file: join(FIXTURES, "example.json"), line: 10, enabled: true },
    } satisfies ServerConfig);
    expect(config?.servers[1]).toMatchObject({
      name: "tasks",
      transport: "http",
      command: null,
      cwd: null,
      url: "http://localhost:9100/mcp",
      headers: { Authorization: "Bearer t0k" },
      allowPrivate: true,
      allowTools: ["list_projects", "get_task", "update_task"],
      maxTools: 12,
    });
    expect(config?.approvals).toEqual({ expireAfterSeconds: 900, waitSeconds: 60, selfApproval: false });
    expect(config?.catalogue).toEqual({ descriptionMaxChars: 1024, refreshSeconds: 300 });
  });

  it("a minimal config gets every default", () => {
    const result = withServers({ files: { command: "npx" } });
    expect(result.config).toEqual({
      path: "",
      servers: [
        {
          name: "files",
          transport: "stdio",
          command: "npx",
          args: [],
          env: {},
          cwd: BASE,
          url: null,
          headers: {},
          allowPrivate: false,
          allowTools: null,
          maxTools: 12,
          timeoutMs: 15000,
          minIntervalMs: 0,
          maxFrameBytes: 4194304,
          enabled: false,
          // Validated from an object: no file, no line; the entry has no "enabled".
          source: { file: "", line: null, enabled: null },
        },
      ],
      approvals: { expireAfterSeconds: 900, waitSeconds: 60, selfApproval: false },
      catalogue: { descriptionMaxChars: 1024, refreshSeconds: 300 },
      notifications: { publicUrl: null, webhooks: [], email: null },
      rules: [],
      toolSets: [],
      agentLimits: { callsPerMinute: 0, maxPendingCalls: 20, maxConcurrentCalls: 0 },
    });
  });

  it("an empty mcpServers is valid", () => {
    expect(withServers({}).config?.servers).toEqual([]);
  });

  it("servers are sorted by name", () => {
    const result = withServers({ zeta: stdio, alpha: http, "mid-1": stdio });
    expect(result.config?.servers.map((s) => s.name)).toEqual(["alpha", "mid-1", "zeta"]);
  });

  it("config.path is the option given, or empty when validated from an object", () => {
    expect(withServers({}).config?.path).toBe("");
    const result = validateConfig({ mcpServers: {} }, { env: {}, baseDir: BASE, path: "/x/g.json" });
    expect(result.config?.path).toBe("/x/g.json");
  });
});

describe("loading a file", () => {
  let dir = "";
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), "gatehouse-config-"));
  });
  afterEach(() => {
    rmSync(dir, { recursive: true, force: true });
  });
  const write = (name: string, text: string): string => {
    const file = join(dir, name);
    writeFileSync(file, text);
    return file;
  };

  it('a JSON syntax error is an error with path "" and line:column', () => {
    const result = loadConfigFile(join(FIXTURES, "syntax-error.json.txt"));
    expect(result.errors).toEqual([
      {
        path: "",
        message: `${join(FIXTURES, "syntax-error.json.txt")}:6:7: expected "," or "}" after a property value (is a comma missing?)`,
      },
    ]);
  });

  it("trailing commas, comments and single quotes get specific messages", () => {
    const cases: Array<[string, RegExp]> = [
      ['{"mcpServers": {},}', /1:19: a trailing comma before "}"/],
      ['{"mcpServers": {"a": {"args": ["x",]}}}', /1:36: a trailing comma before "]"/],
      ['{\n  // my servers\n  "mcpServers": {}\n}', /2:3: JSON does not allow comments/],
      ["{'mcpServers': {}}", /1:2: property names must use double quotes/],
      ['{"mcpServers": {}', /1:18: the file ends early/],
      ["", /the file is empty/],
      ['{"mcpServers": {}} x', /1:20: unexpected text after the end/],
      ['{"a": "C:\\path"}', /a string contains an invalid escape/],
    ];
    for (const [text, pattern] of cases) {
      const result = loadConfigFile(write("c.json", text));
      expect(result.errors, text).toHaveLength(1);
      expect(result.errors[0]?.path).toBe("");
      expect(result.errors[0]?.message, text).toMatch(pattern);
    }
  });

  it("a key that appears twice is an error, not a silently dropped server", () => {
    const result = loadConfigFile(join(FIXTURES, "duplicate-server.json.txt"));
    expect(result.config).toBeNull();
    expect(result.errors).toEqual([
      {
        path: "mcpServers.files",
        message:
          "appears twice in the same object (lines 3 and 4); JSON keeps only the last one, so rename or remove one",
      },
    ]);
  });

  it("a missing file or a directory is an error, never a throw", () => {
    const missing = loadConfigFile(join(dir, "nope.json"));
    expect(missing.config).toBeNull();
    expect(missing.errors[0]?.message).toMatch(/cannot read .*nope\.json: no such file; create it/);
    const directory = loadConfigFile(dir);
    expect(directory.errors[0]?.message).toMatch(/it is a directory/);
  });

  it("a byte-order mark at the start of the file is accepted", () => {
    const result = loadConfigFile(write("bom.json", '\uFEFF{"mcpServers": {}}'));
    expect(result.errors).toEqual([]);
  });

  it("a relative cwd is resolved against the config file's folder and path is absolute", () => {
    mkdirSync(join(dir, "conf"));
    const file = write("conf/g.json", '{"mcpServers": {"a": {"command": "x", "cwd": "../work"}}}');
    const result = loadConfigFile(file, {});
    expect(result.config?.path).toBe(file);
    expect(result.config?.servers[0]?.cwd).toBe(join(dir, "work"));
  });

  it("loadConfigFile looks ${VAR} up in the env it is given", () => {
    const file = write(
      "g.json",
      '{"mcpServers": {"a": {"url": "https://h.example/mcp", "headers": {"A": "${X}"}}}}',
    );
    expect(loadConfigFile(file, { X: "1" }).config?.servers[0]?.headers).toEqual({ A: "1" });
    // The unset variable's, and the one that says the server is dark (it has no "enabled").
    expect(loadConfigFile(file, {}).warnings.map((w) => w.path)).toEqual([
      "mcpServers.a.headers.A",
      "mcpServers",
    ]);
  });

  it("loadConfig throws a ConfigError carrying every error", () => {
    const file = write("bad.json", '{"mcpServers": {"a": {"url": "srv/mcp"}}, "x": 1}');
    let thrown: unknown;
    try {
      loadConfig(file, {});
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(ConfigError);
    const error = thrown as ConfigError;
    expect(error.issues.map((i) => i.path)).toEqual(["x", "mcpServers.a.url"]);
    expect(error.message).toMatch(/^invalid configuration \(2 errors\):\nerror: x: unknown key/);
    const ok = write("ok.json", '{"mcpServers": {}}');
    expect(loadConfig(ok, {}).config.servers).toEqual([]);
  });
});

describe("helpers", () => {
  it("configPathFromEnv uses GATEHOUSE_CONFIG, else gatehouse.json, against the working directory", () => {
    expect(configPathFromEnv({})).toBe(resolve(process.cwd(), "gatehouse.json"));
    expect(configPathFromEnv({ GATEHOUSE_CONFIG: "" })).toBe(resolve(process.cwd(), "gatehouse.json"));
    expect(configPathFromEnv({ GATEHOUSE_CONFIG: "conf/g.json" })).toBe(
      resolve(process.cwd(), "conf/g.json"),
    );
    expect(configPathFromEnv({ GATEHOUSE_CONFIG: "/etc/g.json" })).toBe("/etc/g.json");
  });

  it("formatIssues prints errors first, one line each, then warnings", () => {
    const text = formatIssues({
      config: null,
      errors: [
        { path: "", message: "f.json:1:2: bad" },
        { path: "mcpServers.a", message: "m" },
      ],
      warnings: [{ path: "mcpServers.b.url", message: "w" }],
    });
    expect(text).toBe("error: f.json:1:2: bad\nerror: mcpServers.a: m\nwarning: mcpServers.b.url: w");
    expect(formatIssues({ config: null, errors: [], warnings: [] })).toBe("");
  });
});
