// biome-ignore-all lint/suspicious/noTemplateCurlyInString: these tests are about literal ${VAR} references in config text.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { ConfigIssue, ConfigResult, ServerConfig } from "./index";
import {
  ConfigError,
  configPathFromEnv,
  describeTarget,
  expandVars,
  formatIssues,
  LIMITS,
  loadConfig,
  loadConfigFile,
  validateConfig,
} from "./index";

// Deliberately broken fixtures end in .json.txt so the repository-wide Biome check skips them.
const FIXTURES = fileURLToPath(new URL("../../test/fixtures/config", import.meta.url));
const BASE = "/etc/gatehouse";

type Env = Record<string, string | undefined>;

function check(raw: unknown, env: Env = {}): ConfigResult {
  return validateConfig(raw, { env, baseDir: BASE });
}

function withServers(servers: Record<string, unknown>, rest: Record<string, unknown> = {}): ConfigResult {
  return check({ mcpServers: servers, ...rest });
}

function messagesAt(issues: ConfigIssue[], path: string): string[] {
  return issues.filter((i) => i.path === path).map((i) => i.message);
}

function onlyServer(result: ConfigResult): ServerConfig {
  expect(result.errors).toEqual([]);
  const server = result.config?.servers[0];
  if (!server) throw new Error("expected one server");
  return server;
}

const stdio = { command: "npx", args: ["-y", "pkg"] };
const http = { url: "https://mcp.example.com/mcp" };

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
        },
      ],
      approvals: { expireAfterSeconds: 900, waitSeconds: 60, selfApproval: false },
      catalogue: { descriptionMaxChars: 1024, refreshSeconds: 300 },
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

describe("top level", () => {
  it("a config that is not an object is an error", () => {
    for (const raw of [null, [], "x", 3]) {
      const result = check(raw);
      expect(result.config).toBeNull();
      expect(messagesAt(result.errors, "")[0]).toMatch(/must be a JSON object/);
    }
  });

  it("a missing mcpServers is an error", () => {
    const result = check({});
    expect(result.config).toBeNull();
    expect(messagesAt(result.errors, "mcpServers")[0]).toMatch(/is required; add "mcpServers"/);
  });

  it("an mcpServers that is not an object is an error", () => {
    const result = check({ mcpServers: [stdio] });
    expect(messagesAt(result.errors, "mcpServers")[0]).toMatch(
      /must be an object mapping server names.*not an array/,
    );
  });

  it("an unknown top-level key is an error that suggests the closest known key", () => {
    const result = check({ mcpServers: {}, catalog: {} });
    expect(result.config).toBeNull();
    expect(result.errors).toEqual([
      { path: "catalog", message: 'unknown key "catalog"; did you mean "catalogue"?' },
    ]);
  });

  it("a misspelt mcpServers is reported both as unknown and as missing", () => {
    const result = check({ mcpServer: {} });
    expect(messagesAt(result.errors, "mcpServer")).toEqual([
      'unknown key "mcpServer"; did you mean "mcpServers"?',
    ]);
    expect(messagesAt(result.errors, "mcpServers")).toHaveLength(1);
  });

  it("an unknown key far from every known key lists the known keys", () => {
    const result = check({ mcpServers: {}, logging: true });
    expect(messagesAt(result.errors, "logging")).toEqual([
      'unknown key "logging"; remove it (known keys: mcpServers, approvals, catalogue, agentEndpoint)',
    ]);
  });

  it("unknown keys in approvals and catalogue are errors naming their paths", () => {
    const result = check({
      mcpServers: {},
      approvals: { expireAfterSecs: 100 },
      catalogue: { refresh: 10 },
    });
    expect(messagesAt(result.errors, "approvals.expireAfterSecs")[0]).toMatch(
      /did you mean "expireAfterSeconds"/,
    );
    expect(messagesAt(result.errors, "catalogue.refresh")[0]).toMatch(/unknown key "refresh"/);
  });

  it("approvals and catalogue must be objects", () => {
    const result = check({ mcpServers: {}, approvals: true, catalogue: [] });
    expect(messagesAt(result.errors, "approvals")[0]).toMatch(/must be an object/);
    expect(messagesAt(result.errors, "catalogue")[0]).toMatch(/must be an object/);
  });

  it("the VS Code servers key gets a rename hint", () => {
    const result = check({ servers: {} });
    expect(messagesAt(result.errors, "servers")[0]).toMatch(/rename "servers" to "mcpServers"/);
  });
});

describe("server names", () => {
  it("a server name with an underscore is rejected with the reason and a suggestion", () => {
    const result = withServers({ my_files: stdio });
    expect(result.config).toBeNull();
    const [message] = messagesAt(result.errors, "mcpServers.my_files");
    expect(message).toMatch(/no "_", because local tool names are <server>_<tool>/);
    expect(message).toMatch(/e\.g\. "my-files"/);
  });

  it("server names must match ^[a-z][a-z0-9-]{0,30}$", () => {
    const good = ["a", "files", "a-1", `a${"b".repeat(30)}`];
    const bad = ["Files", "1files", "-files", "", `a${"b".repeat(31)}`, "my files", "fi.les"];
    for (const name of good) expect(withServers({ [name]: stdio }).errors, name).toEqual([]);
    for (const name of bad) {
      const result = withServers({ [name]: stdio });
      expect(result.errors, name).toHaveLength(1);
      expect(result.errors[0]?.message).toMatch(/server name .* is not allowed/);
    }
  });

  it("an odd server name is quoted in the path", () => {
    const result = withServers({ "my files": stdio });
    expect(result.errors[0]?.path).toBe('mcpServers["my files"]');
  });

  it("a server that is not an object is an error", () => {
    const result = withServers({ files: "npx pkg" });
    expect(messagesAt(result.errors, "mcpServers.files")[0]).toMatch(
      /must be an object like .* not a string/,
    );
  });
});

describe("server keys", () => {
  it("an unknown key in a server is an error naming its path", () => {
    const result = withServers({ files: { command: "npx", comand: "npx" } });
    expect(result.config).toBeNull();
    expect(result.errors).toEqual([
      { path: "mcpServers.files.comand", message: 'unknown key "comand"; did you mean "command"?' },
    ]);
  });

  it("a swapped-letters typo still gets a suggestion", () => {
    const result = withServers({ tasks: { ...http, haeders: {} } });
    expect(messagesAt(result.errors, "mcpServers.tasks.haeders")[0]).toMatch(/did you mean "headers"/);
  });

  it("keys from other MCP clients get a specific fix", () => {
    const result = withServers({
      files: { ...stdio, disabled: false, autoApprove: [], timeout: 60, cmd: "x" },
    });
    expect(messagesAt(result.errors, "mcpServers.files.disabled")[0]).toMatch(/uses "enabled" instead/);
    expect(messagesAt(result.errors, "mcpServers.files.autoApprove")[0]).toMatch(/enabled one by one/);
    expect(messagesAt(result.errors, "mcpServers.files.timeout")[0]).toMatch(/"timeoutMs" \(milliseconds\)/);
    expect(messagesAt(result.errors, "mcpServers.files.cmd")[0]).toMatch(/use "command" instead/);
  });
});

describe("command or url", () => {
  it("a server with both command and url is an error", () => {
    const result = withServers({ files: { ...stdio, ...http } });
    expect(messagesAt(result.errors, "mcpServers.files")[0]).toMatch(/has both "command" and "url"/);
  });

  it("a server with neither command nor url is an error", () => {
    const result = withServers({ files: { enabled: true } });
    expect(messagesAt(result.errors, "mcpServers.files")[0]).toMatch(/needs "command" .* or "url"/);
  });

  it("type must agree with command or url", () => {
    const result = withServers({
      one: { ...stdio, type: "http" },
      two: { ...http, type: "stdio" },
      three: { ...stdio, type: "stdio" },
      four: { ...http, type: "http" },
    });
    expect(messagesAt(result.errors, "mcpServers.one.type")[0]).toMatch(
      /"http" does not agree with "command"/,
    );
    expect(messagesAt(result.errors, "mcpServers.two.type")[0]).toMatch(/"stdio" does not agree with "url"/);
    expect(result.errors).toHaveLength(2);
  });

  it('type "sse" on a url server selects the sse transport', () => {
    const server = onlyServer(withServers({ legacy: { ...http, type: "sse" } }));
    expect(server.transport).toBe("sse");
    expect(server.url).toBe("https://mcp.example.com/mcp");
  });

  it("only stdio, http and sse are transport types", () => {
    const result = withServers({ tasks: { ...http, type: "streamable-http" }, b: { ...http, type: 1 } });
    expect(messagesAt(result.errors, "mcpServers.tasks.type")).toEqual([
      '"streamable-http" is not a transport type; use "stdio", "http" or "sse" ("http" means streamable HTTP)',
    ]);
    expect(messagesAt(result.errors, "mcpServers.b.type")[0]).toMatch(/^a number is not a transport type/);
  });
});

describe("url", () => {
  it("a relative url is an error with the fix from the spec", () => {
    const result = withServers({ files: { url: "srv/mcp" } });
    expect(result.errors).toEqual([
      {
        path: "mcpServers.files.url",
        message: '"srv/mcp" is not an absolute http(s) URL; use e.g. https://host/mcp',
      },
    ]);
    expect(formatIssues(result)).toBe(
      'error: mcpServers.files.url: "srv/mcp" is not an absolute http(s) URL; use e.g. https://host/mcp',
    );
  });

  it("a url without a scheme or with a non-http scheme is an error", () => {
    const result = withServers({
      a: { url: "localhost:9100/mcp" },
      b: { url: "ws://host/mcp" },
      c: { url: "file:///srv/mcp" },
      d: { url: "" },
      e: { url: 42 },
    });
    for (const name of ["a", "b", "c"]) {
      expect(messagesAt(result.errors, `mcpServers.${name}.url`)[0]).toMatch(
        /is not an absolute http\(s\) URL/,
      );
    }
    expect(messagesAt(result.errors, "mcpServers.d.url")[0]).toMatch(/not an empty string/);
    expect(messagesAt(result.errors, "mcpServers.e.url")[0]).toMatch(/not a number/);
  });

  it("a url with user:password is an error that never echoes the password", () => {
    const result = withServers({
      a: { url: "https://alice:pw-Zq81x@host.example/mcp" },
      b: { url: "alice:pw-Zq81x@host.example/mcp" },
    });
    expect(messagesAt(result.errors, "mcpServers.a.url")[0]).toMatch(/must not contain a user:password part/);
    expect(messagesAt(result.errors, "mcpServers.b.url")).toHaveLength(1);
    expect(formatIssues(result)).not.toContain("pw-Zq81x");
    expect(formatIssues(result)).not.toContain("alice");
  });

  it("an invalid url is echoed without its query string", () => {
    const result = withServers({ a: { url: "host/mcp?key=q-Secret-99" } });
    expect(formatIssues(result)).toContain('"host/mcp" is not an absolute');
    expect(formatIssues(result)).not.toContain("q-Secret-99");
  });

  it("the url is normalised and may use ${VAR}", () => {
    const result = validateConfig(
      { mcpServers: { tasks: { url: "${TASKS_BASE}/mcp?tenant=${TENANT}" } } },
      { env: { TASKS_BASE: "HTTPS://Tasks.Example.com:443", TENANT: "t1" }, baseDir: BASE },
    );
    expect(onlyServer(result).url).toBe("https://tasks.example.com/mcp?tenant=t1");
  });
});

describe("stdio fields", () => {
  it("command must be a non-empty string", () => {
    const result = withServers({ a: { command: "" }, b: { command: ["npx"] }, c: { command: "  " } });
    expect(messagesAt(result.errors, "mcpServers.a.command")[0]).toMatch(
      /non-empty string.*not an empty string/,
    );
    expect(messagesAt(result.errors, "mcpServers.b.command")[0]).toMatch(/not an array/);
    expect(messagesAt(result.errors, "mcpServers.c.command")).toHaveLength(1);
  });

  it("a command with spaces and no args gets a warning that it is not run through a shell", () => {
    const result = withServers({ a: { command: "npx -y pkg" }, b: { command: "/opt/My App/run", args: [] } });
    expect(result.errors).toEqual([]);
    expect(messagesAt(result.warnings, "mcpServers.a.command")[0]).toMatch(/not run through a shell/);
    expect(messagesAt(result.warnings, "mcpServers.b.command")).toEqual([]);
  });

  it("args must be an array of strings, each error naming its index", () => {
    const result = withServers({
      a: { command: "x", args: ["--port", 8080, true] },
      b: { command: "x", args: "-y" },
    });
    expect(messagesAt(result.errors, "mcpServers.a.args[1]")[0]).toMatch(/must be a string, not a number/);
    expect(messagesAt(result.errors, "mcpServers.a.args[2]")[0]).toMatch(/must be a string, not a boolean/);
    expect(messagesAt(result.errors, "mcpServers.b.args")[0]).toMatch(/must be an array of strings/);
  });

  it("env must be an object of strings with usable names", () => {
    const result = withServers({
      a: { command: "x", env: { PORT: 8080, "A=B": "1", "": "2" } },
      b: { command: "x", env: ["A=1"] },
    });
    expect(messagesAt(result.errors, "mcpServers.a.env.PORT")[0]).toMatch(/must be a string, not a number/);
    expect(messagesAt(result.errors, 'mcpServers.a.env["A=B"]')[0]).toMatch(/not a usable variable name/);
    expect(messagesAt(result.errors, 'mcpServers.a.env[""]')[0]).toMatch(/not a usable variable name/);
    expect(messagesAt(result.errors, "mcpServers.b.env")[0]).toMatch(/must be an object of strings/);
  });

  it("cwd is resolved against the config file's folder and defaults to it", () => {
    const result = withServers({
      a: { command: "x", cwd: "servers/a" },
      b: { command: "x", cwd: "/abs/b" },
      c: { command: "x" },
    });
    expect(result.config?.servers.map((s) => s.cwd)).toEqual([join(BASE, "servers/a"), "/abs/b", BASE]);
  });

  it("a cwd starting with ~ or that is not a non-empty string is an error", () => {
    const result = withServers({ a: { command: "x", cwd: "~/notes" }, b: { command: "x", cwd: "" } });
    expect(messagesAt(result.errors, "mcpServers.a.cwd")[0]).toMatch(/"~" is not expanded/);
    expect(messagesAt(result.errors, "mcpServers.b.cwd")[0]).toMatch(/non-empty string/);
  });

  it("args, env and cwd on a url server are errors", () => {
    const result = withServers({ tasks: { ...http, args: [], env: {}, cwd: "." } });
    expect(messagesAt(result.errors, "mcpServers.tasks.args")[0]).toMatch(/only for stdio servers/);
    expect(messagesAt(result.errors, "mcpServers.tasks.env")[0]).toMatch(/credentials in "headers"/);
    expect(messagesAt(result.errors, "mcpServers.tasks.cwd")[0]).toMatch(/only for stdio servers/);
  });
});

describe("headers", () => {
  it("headers on a stdio server are an error", () => {
    const result = withServers({ files: { ...stdio, headers: { "X-A": "b" } } });
    expect(messagesAt(result.errors, "mcpServers.files.headers")[0]).toMatch(
      /only for HTTP servers.*through "env"/,
    );
  });

  it("headers must be an object of strings with valid names", () => {
    const result = withServers({
      a: { ...http, headers: { "X Api Key": "v", "X-Num": 5 } },
      b: { ...http, headers: "Authorization: x" },
    });
    expect(messagesAt(result.errors, 'mcpServers.a.headers["X Api Key"]')[0]).toMatch(
      /not a valid header name/,
    );
    expect(messagesAt(result.errors, "mcpServers.a.headers.X-Num")[0]).toMatch(
      /must be a string, not a number/,
    );
    expect(messagesAt(result.errors, "mcpServers.b.headers")[0]).toMatch(/must be an object of strings/);
  });

  it("two headers differing only in case are an error", () => {
    const result = withServers({ a: { ...http, headers: { Authorization: "a", authorization: "b" } } });
    expect(messagesAt(result.errors, "mcpServers.a.headers.authorization")[0]).toMatch(
      /repeats "Authorization" \(header names ignore case\)/,
    );
  });

  it("a header value with a line break after expansion is an error", () => {
    const result = validateConfig(
      { mcpServers: { a: { ...http, headers: { Authorization: "Bearer ${TOKEN}" } } } },
      { env: { TOKEN: "abc\r\nX-Injected: 1" }, baseDir: BASE },
    );
    expect(messagesAt(result.errors, "mcpServers.a.headers.Authorization")[0]).toMatch(/line break/);
  });
});

describe("${VAR} expansion", () => {
  const raw = {
    mcpServers: {
      tasks: { url: "https://${HOST}/mcp", headers: { Authorization: "Bearer ${TOKEN}" }, enabled: true },
      files: { command: "npx", args: ["--dir=${NOTES}"], env: { LEVEL: "${LEVEL}" }, enabled: true },
    },
  };

  it("${VAR} is expanded in headers, env values, args and url", () => {
    const result = validateConfig(raw, {
      env: { HOST: "tasks.example.com", TOKEN: "t", NOTES: "/srv/notes", LEVEL: "warn" },
      baseDir: BASE,
    });
    expect(result.errors).toEqual([]);
    const [files, tasks] = result.config?.servers ?? [];
    expect(files?.args).toEqual(["--dir=/srv/notes"]);
    expect(files?.env).toEqual({ LEVEL: "warn" });
    expect(tasks?.url).toBe("https://tasks.example.com/mcp");
    expect(tasks?.headers).toEqual({ Authorization: "Bearer t" });
  });

  it("an unset ${VAR} is an error for an enabled server", () => {
    const result = validateConfig(raw, { env: { HOST: "h.example", NOTES: "/n" }, baseDir: BASE });
    expect(result.config).toBeNull();
    expect(messagesAt(result.errors, "mcpServers.tasks.headers.Authorization")).toEqual([
      'uses ${TOKEN}, which is not set; set TOKEN in Gatehouse\'s environment, or set "enabled": false',
    ]);
    expect(messagesAt(result.errors, "mcpServers.files.env.LEVEL")).toHaveLength(1);
  });

  it("an unset ${VAR} is a warning for a dark server, which keeps the reference as written", () => {
    const result = withServers({
      tasks: { url: "https://${HOST}/mcp", headers: { Authorization: "Bearer ${TOKEN}" } },
    });
    expect(result.errors).toEqual([]);
    expect(messagesAt(result.warnings, "mcpServers.tasks.url")[0]).toMatch(
      /uses \$\{HOST\}, which is not set/,
    );
    expect(messagesAt(result.warnings, "mcpServers.tasks.headers.Authorization")[0]).toMatch(
      /cannot be enabled until it is set/,
    );
    const server = onlyServer(result);
    expect(server.headers).toEqual({ Authorization: "Bearer ${TOKEN}" });
    expect(describeTarget(server)).toBe("https://${HOST}/mcp");
  });

  it("${VAR:-default} falls back when the variable is unset or empty", () => {
    expect(expandVars("${A:-x}/${B:-y}/${C:-z}", { B: "", C: "c" }).value).toBe("x/y/c");
    expect(expandVars("a${B}c", { B: "" })).toEqual({
      value: "ac",
      unset: [],
      malformed: false,
      names: ["B"],
    });
  });

  it("a variable named like an Object.prototype member is not taken from the prototype", () => {
    expect(expandVars("${constructor}", {}).unset).toEqual(["constructor"]);
  });

  it("a malformed ${ reference is an error", () => {
    const result = withServers({
      a: { ...http, headers: { A: "${NOT-VALID}", B: "${OPEN" } },
      b: { command: "x", args: ["${}"] },
    });
    expect(messagesAt(result.errors, "mcpServers.a.headers.A")[0]).toMatch(/malformed/);
    expect(messagesAt(result.errors, "mcpServers.a.headers.B")[0]).toMatch(/malformed/);
    expect(messagesAt(result.errors, "mcpServers.b.args[0]")[0]).toMatch(/malformed/);
  });

  it("a secret-looking ${VAR} in args gets a warning to use env instead", () => {
    const result = validateConfig(
      { mcpServers: { gh: { command: "gh-mcp", args: ["--token", "${GITHUB_TOKEN}", "${HOME}/x"] } } },
      { env: { GITHUB_TOKEN: "ghp_x", HOME: "/home/me" }, baseDir: BASE },
    );
    expect(result.errors).toEqual([]);
    expect(messagesAt(result.warnings, "mcpServers.gh.args[1]")[0]).toMatch(/pass secrets through "env"/);
    expect(messagesAt(result.warnings, "mcpServers.gh.args[2]")).toEqual([]);
  });
});

describe("secrets", () => {
  const SECRET = "zz-S3cret-9f2Q";

  it("header and env values never appear in any error or warning", () => {
    const raw = {
      mcpServers: {
        a: {
          ...http,
          headers: {
            "Bad Name": SECRET,
            "X-Break": `${SECRET}\nX: y`,
            "X-Malformed": `${SECRET}\${oops`,
            "X-Unset": `${SECRET}\${MISSING}`,
            "X-Env": "${LEAKY}",
          },
          enabled: true,
        },
        b: {
          command: "x",
          env: { "A=B": SECRET, MAL: `${SECRET}\${`, NUL: "${NULLY}" },
          headers: { H: SECRET },
        },
        c: { ...http, env: { TOKEN: SECRET }, headers: { Authorization: SECRET, authorization: SECRET } },
        d: { url: `https://user:${SECRET}@host/mcp` },
      },
    };
    const result = validateConfig(raw, {
      env: { LEAKY: `${SECRET}\r\n`, NULLY: `${SECRET}\0` },
      baseDir: BASE,
    });
    expect(result.errors.length).toBeGreaterThanOrEqual(9);
    const text = formatIssues(result);
    expect(text).not.toContain(SECRET);
    expect(text).not.toContain("S3cret");
    expect(new ConfigError(result.errors).message).not.toContain(SECRET);
  });

  it("a JSON syntax error next to a secret does not quote the file", () => {
    const result = loadConfigFile(join(FIXTURES, "syntax-error.json.txt"));
    expect(result.config).toBeNull();
    expect(formatIssues(result)).not.toContain("fixture-secret-7Qx");
  });

  it("describeTarget shows no env values, header values, user-info or query string", () => {
    const result = validateConfig(
      {
        mcpServers: {
          a: { command: "node", args: ["server.js", "--name", "my notes"], env: { TOKEN: SECRET } },
          b: {
            url: "https://mcp.example.com:8443/v1/mcp?key=${KEY}#frag",
            headers: { Authorization: SECRET },
          },
        },
      },
      { env: { KEY: SECRET }, baseDir: BASE },
    );
    const [a, b] = result.config?.servers ?? [];
    if (!a || !b) throw new Error("expected two servers");
    expect(describeTarget(a)).toBe('node server.js --name "my notes"');
    expect(describeTarget(b)).toBe("https://mcp.example.com:8443/v1/mcp");
    expect(describeTarget({ ...b, url: `https://u:${SECRET}@h.example/p?q=${SECRET}` })).toBe(
      "https://h.example/p",
    );
    expect(describeTarget({ ...b, url: `https://u:${SECRET}@\${HOST}/p?q=1` })).toBe("https://${HOST}/p");
  });
});

describe("flags and lists", () => {
  it("allowPrivate, enabled and selfApproval must be booleans", () => {
    const result = withServers(
      { a: { ...http, allowPrivate: "true", enabled: 1 } },
      { approvals: { selfApproval: "false" } },
    );
    expect(messagesAt(result.errors, "mcpServers.a.allowPrivate")).toEqual([
      "must be true or false, not a string; write true without quotes",
    ]);
    expect(messagesAt(result.errors, "mcpServers.a.enabled")[0]).toMatch(
      /must be true or false, not a number/,
    );
    expect(messagesAt(result.errors, "approvals.selfApproval")[0]).toMatch(/write false without quotes/);
  });

  it("allowTools must be an array of unique non-empty strings", () => {
    const result = withServers({
      a: { ...http, allowTools: ["get", "", 3, "get"] },
      b: { ...http, allowTools: "get" },
    });
    expect(messagesAt(result.errors, "mcpServers.a.allowTools[1]")[0]).toMatch(/non-empty tool name/);
    expect(messagesAt(result.errors, "mcpServers.a.allowTools[2]")[0]).toMatch(/not a number/);
    expect(messagesAt(result.errors, "mcpServers.a.allowTools[3]")).toEqual([
      '"get" is listed twice; remove one',
    ]);
    expect(messagesAt(result.errors, "mcpServers.b.allowTools")[0]).toMatch(/must be an array of tool names/);
  });

  it("allowTools longer than maxTools is an error", () => {
    const tools = ["a", "b", "c", "d"];
    const result = withServers({ a: { ...http, allowTools: tools, maxTools: 3 } });
    expect(messagesAt(result.errors, "mcpServers.a.allowTools")).toEqual([
      'lists 4 tools but maxTools is 3; raise "maxTools" to at least 4 or shorten the list',
    ]);
    expect(withServers({ a: { ...http, allowTools: tools, maxTools: 4 } }).errors).toEqual([]);
  });

  it("allowTools longer than the default maxTools of 12 is an error", () => {
    const tools = Array.from({ length: 13 }, (_, i) => `t${i}`);
    const result = withServers({ a: { ...http, allowTools: tools } });
    expect(messagesAt(result.errors, "mcpServers.a.allowTools")[0]).toMatch(
      /lists 13 tools but maxTools is 12/,
    );
  });
});

describe("numbers", () => {
  const serverFields = ["maxTools", "timeoutMs", "minIntervalMs", "maxFrameBytes"] as const;
  const cases = [
    ...serverFields.map((key) => ({
      key,
      path: `mcpServers.a.${key}`,
      wrap: (v: unknown) => ({ mcpServers: { a: { ...http, [key]: v } } }),
    })),
    ...(["expireAfterSeconds", "waitSeconds"] as const).map((key) => ({
      key,
      path: `approvals.${key}`,
      wrap: (v: unknown) => ({ mcpServers: {}, approvals: { [key]: v } }),
    })),
    ...(["descriptionMaxChars", "refreshSeconds"] as const).map((key) => ({
      key,
      path: `catalogue.${key}`,
      wrap: (v: unknown) => ({ mcpServers: {}, catalogue: { [key]: v } }),
    })),
  ];

  it.each(cases)("$path must be an integer within its range", ({ key, path, wrap }) => {
    const { min, max } = LIMITS[key];
    // For maxTools, a value above 12 needs no allowTools, so the bounds alone decide.
    expect(check(wrap(min)).errors, `${min}`).toEqual([]);
    expect(check(wrap(max)).errors, `${max}`).toEqual([]);
    for (const bad of [min - 1, max + 1, min + 0.5]) {
      if (key === "refreshSeconds" && bad === min - 1) continue; // 9 is checked below
      const result = check(wrap(bad));
      expect(messagesAt(result.errors, path), `${bad}`).toEqual([
        expect.stringMatching(new RegExp(`^${bad} is not allowed; use .*${min} to ${max}`)),
      ]);
    }
    expect(messagesAt(check(wrap("100")).errors, path)[0]).toMatch(/not a string; write 100 without quotes/);
    expect(messagesAt(check(wrap(null)).errors, path)[0]).toMatch(/not null/);
  });

  it("refreshSeconds 0 disables the periodic refresh, but 1 to 9 are errors", () => {
    expect(check({ mcpServers: {}, catalogue: { refreshSeconds: 0 } }).config?.catalogue.refreshSeconds).toBe(
      0,
    );
    const result = check({ mcpServers: {}, catalogue: { refreshSeconds: 9 } });
    expect(messagesAt(result.errors, "catalogue.refreshSeconds")).toEqual([
      "9 is not allowed; use 0 (off) or an integer from 10 to 86400 (default 300)",
    ]);
  });

  it("waitSeconds and minIntervalMs accept 0", () => {
    const result = withServers({ a: { ...http, minIntervalMs: 0 } }, { approvals: { waitSeconds: 0 } });
    expect(result.errors).toEqual([]);
  });
});

describe("the whole file is checked", () => {
  it("validation runs on dark servers too", () => {
    const result = withServers({ dark: { url: "srv/mcp", enabled: false, maxTools: 0 } });
    expect(result.config).toBeNull();
    expect(result.errors.map((e) => e.path)).toEqual(["mcpServers.dark.url", "mcpServers.dark.maxTools"]);
  });

  it("a file with several mistakes gets all of them at once", () => {
    const result = check({
      mcpServers: {
        Files_1: { command: "npx", comand: "x" },
        tasks: { url: "srv/mcp", headers: { A: 1 }, allowTools: ["a", "a"] },
        both: { command: "x", url: "https://h.example/mcp" },
      },
      approval: {},
      catalogue: { refreshSeconds: 5 },
    });
    expect(result.config).toBeNull();
    expect(result.errors.map((e) => e.path).sort()).toEqual(
      [
        "approval",
        "catalogue.refreshSeconds",
        "mcpServers.Files_1",
        "mcpServers.Files_1.comand",
        "mcpServers.both",
        "mcpServers.tasks.allowTools[1]",
        "mcpServers.tasks.headers.A",
        "mcpServers.tasks.url",
      ].sort(),
    );
    expect(formatIssues(result).split("\n")).toHaveLength(8);
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
    expect(loadConfigFile(file, {}).warnings).toHaveLength(1);
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

describe("catalogue.webhook (issue 5)", () => {
  it("is absent unless configured, and webhookAllowPrivate then reads as false", () => {
    const catalogue = check({ mcpServers: {} }).config?.catalogue;
    expect(catalogue?.webhook).toBeUndefined();
    expect(catalogue?.webhookAllowPrivate ?? false).toBe(false);
  });

  it("an absolute http(s) URL is accepted with its path and query, and webhookAllowPrivate read as given", () => {
    const result = check({
      mcpServers: {},
      catalogue: { webhook: "https://hooks.example.com/services/T0/B1?key=k", webhookAllowPrivate: true },
    });
    expect(result.errors).toEqual([]);
    expect(result.config?.catalogue).toMatchObject({
      webhook: "https://hooks.example.com/services/T0/B1?key=k",
      webhookAllowPrivate: true,
    });
  });

  it("${VAR} in the webhook URL is expanded, and an unset one is an error naming the variable, not a value", () => {
    const raw = { mcpServers: {}, catalogue: { webhook: "https://hooks.example.com/${HOOK_PATH}" } };
    expect(check(raw, { HOOK_PATH: "s3cr3t-path" }).config?.catalogue.webhook).toBe(
      "https://hooks.example.com/s3cr3t-path",
    );
    const unset = check(raw, {});
    expect(unset.config).toBeNull();
    expect(messagesAt(unset.errors, "catalogue.webhook")).toEqual([
      'refers to ${HOOK_PATH}, which is not set; set HOOK_PATH in Gatehouse\'s environment or remove "webhook"',
    ]);
  });

  it("a webhook that is not an absolute http(s) URL, or carries user:password, is an error with a fix", () => {
    for (const [webhook, pattern] of [
      ["hooks.example.com/x", /is not an absolute http\(s\) URL; use e\.g\. https:\/\/host\/mcp/],
      ["ftp://hooks.example.com/x", /is not an absolute http\(s\) URL/],
      ["", /must be an absolute http\(s\) URL/],
      [42, /must be an absolute http\(s\) URL like "https:\/\/host\/mcp", not a number/],
      ["https://user:pw@hooks.example.com/x", /must not contain a user:password part/],
    ] as const) {
      const result = check({ mcpServers: {}, catalogue: { webhook } });
      expect(result.config, String(webhook)).toBeNull();
      expect(messagesAt(result.errors, "catalogue.webhook")[0], String(webhook)).toMatch(pattern);
      expect(JSON.stringify(result.errors)).not.toContain(":pw@");
    }
  });

  it("webhookAllowPrivate must be a boolean, and a typo of webhook gets a suggestion", () => {
    const result = check({
      mcpServers: {},
      catalogue: { webhookAllowPrivate: "true", webhok: "https://x.example" },
    });
    expect(messagesAt(result.errors, "catalogue.webhookAllowPrivate")).toEqual([
      "must be true or false, not a string; write true without quotes",
    ]);
    expect(messagesAt(result.errors, "catalogue.webhok")[0]).toMatch(/did you mean "webhook"\?/);
  });
});

describe("agentEndpoint (issue 7)", () => {
  it("is absent unless given; given, it lists extra Host and Origin values for /mcp", () => {
    expect(withServers({}).config?.agentEndpoint).toBeUndefined();
    const result = withServers(
      {},
      {
        agentEndpoint: {
          allowedHosts: ["gatehouse.lan:3000", "gatehouse.lan", "[fd00::1]:3000"],
          allowedOrigins: ["https://gatehouse.example.com", "http://gatehouse.lan:3000/"],
        },
      },
    );
    expect(result.errors).toEqual([]);
    expect(result.config?.agentEndpoint).toEqual({
      allowedHosts: ["gatehouse.lan:3000", "gatehouse.lan", "[fd00::1]:3000"],
      allowedOrigins: ["https://gatehouse.example.com", "http://gatehouse.lan:3000/"],
    });
    expect(withServers({}, { agentEndpoint: {} }).config?.agentEndpoint).toEqual({
      allowedHosts: [],
      allowedOrigins: [],
    });
  });

  it("a Host with a scheme or path, or an origin with a path, is an error with a fix", () => {
    const result = withServers(
      {},
      {
        agentEndpoint: {
          allowedHosts: ["http://gatehouse.lan", "gatehouse.lan/mcp", 7],
          allowedOrigins: ["https://gatehouse.example.com/mcp", "gatehouse.lan:3000", "null"],
        },
      },
    );
    expect(result.config).toBeNull();
    expect(messagesAt(result.errors, "agentEndpoint.allowedHosts[0]")[0]).toMatch(
      /is not a Host value; write a name with an optional port, e\.g\. "gatehouse\.lan:3000"/,
    );
    expect(messagesAt(result.errors, "agentEndpoint.allowedHosts[1]")).toHaveLength(1);
    expect(messagesAt(result.errors, "agentEndpoint.allowedHosts[2]")).toEqual([
      "must be a string, not a number",
    ]);
    for (const i of [0, 1, 2]) {
      expect(messagesAt(result.errors, `agentEndpoint.allowedOrigins[${i}]`)[0]).toMatch(
        /is not an origin; write scheme, name and optional port/,
      );
    }
  });

  it("a list that is not an array, or an unknown key, is an error", () => {
    const result = withServers({}, { agentEndpoint: { allowedHosts: "gatehouse.lan", allowedHost: [] } });
    expect(result.config).toBeNull();
    expect(messagesAt(result.errors, "agentEndpoint.allowedHosts")).toEqual([
      "must be an array of strings, not a string",
    ]);
    expect(messagesAt(result.errors, "agentEndpoint.allowedHost")[0]).toMatch(
      /did you mean "allowedHosts"\?/,
    );
    expect(messagesAt(withServers({}, { agentEndpoint: [] }).errors, "agentEndpoint")[0]).toMatch(
      /must be an object/,
    );
  });
});
