// biome-ignore-all lint/suspicious/noTemplateCurlyInString: these tests are about literal ${VAR} references in config text.
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  ConfigError,
  describeTarget,
  expandVars,
  formatIssues,
  loadConfigFile,
  validateConfig,
} from "./index";
import { BASE, FIXTURES, http, messagesAt, onlyServer, withServers } from "./test-helpers";

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
