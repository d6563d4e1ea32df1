// biome-ignore-all lint/suspicious/noTemplateCurlyInString: these tests are about literal ${VAR} references in config text.
import { describe, expect, it } from "vitest";
import { formatIssues } from "./index";
import { check, messagesAt, stdio, withServers } from "./test-helpers";

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
      'unknown key "logging"; remove it (known keys: mcpServers, approvals, catalogue, agentEndpoint, notifications, rules, metrics, toolSets, agentLimits)',
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

describe("catalogue.webhook", () => {
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
      [
        "hooks.example.com/x",
        /^"hooks\.example\.com\/\.\.\." is not an absolute http\(s\) URL; use e\.g\. https:\/\/hooks\.example\.com\/\.\.\.$/,
      ],
      ["ftp://hooks.example.com/x", /is not an absolute http\(s\) URL/],
      ["", /must be an absolute http\(s\) URL/],
      [42, /must be an absolute http\(s\) URL like "https:\/\/hooks\.example\.com\/\.\.\.", not a number/],
      [
        "https://user:pw@hooks.example.com/x",
        /^must not contain a user:password part; put the receiver's token in the path or query instead \(\$\{VAR\} allowed\)$/,
      ],
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

describe("agentEndpoint", () => {
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
