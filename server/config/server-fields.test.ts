// biome-ignore-all lint/suspicious/noTemplateCurlyInString: these tests are about literal ${VAR} references in config text.
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { LIMITS, validateConfig } from "./index";
import { BASE, check, http, messagesAt, stdio, withServers } from "./test-helpers";

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
