// biome-ignore-all lint/suspicious/noTemplateCurlyInString: these tests are about literal ${VAR} references in config text.
import { describe, expect, it } from "vitest";
import { formatIssues, validateConfig } from "./index";
import { BASE, http, messagesAt, onlyServer, stdio, withServers } from "./test-helpers";

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
