// biome-ignore-all lint/suspicious/noTemplateCurlyInString: these tests are about literal ${VAR} references in config text.
/**
 * How a server's target is shown to owners (the Servers page): what came from `${VAR}` expansion
 * stays behind its reference, in stdio args and in HTTP URLs' paths and queries.
 */
import { randomUUID } from "node:crypto";
import { expect, it } from "vitest";
import { registerSecrets } from "../log";
import { describeAuth, describeTarget, formatIssues, type ServerConfig, validateConfig } from "./index";
import { BASE } from "./test-helpers";

/** The servers of an error-free config, by name (the test fails on a missing one). */
function servers(raw: Record<string, unknown>, env: Record<string, string>) {
  const result = validateConfig({ mcpServers: raw }, { env, baseDir: BASE });
  expect(result.errors).toEqual([]);
  const byName = new Map((result.config?.servers ?? []).map((s) => [s.name, s]));
  return (name: string): ServerConfig => {
    const server = byName.get(name);
    if (!server) throw new Error(`no server ${name}`);
    return server;
  };
}

it("stdio args after ${VAR} expansion are shown with the expanded parts masked", () => {
  const token = `tok-${randomUUID()}`;
  const dir = `/srv/${randomUUID()}`;
  const s = servers(
    {
      files: {
        command: "node",
        args: ["server.js", "--api-key=${API_KEY}", "${DATA_DIR}/notes", "${MODE:-fast}", "plain"],
      },
    },
    { API_KEY: token, DATA_DIR: dir },
  )("files");
  // The server runs with the expanded values...
  expect(s.args).toEqual(["server.js", `--api-key=${token}`, `${dir}/notes`, "fast", "plain"]);
  // ...and the owner sees the references.
  const shown = describeTarget(s);
  expect(shown).toBe('node server.js "--api-key=${API_KEY}" "${DATA_DIR}/notes" "${MODE:-fast}" plain');
  expect(shown).not.toContain(token);
  expect(shown).not.toContain(dir);
});

it("an HTTP server's URL with a secret in its path or query is shown with the expanded parts masked", () => {
  const hook = randomUUID();
  const key = `k-${randomUUID()}`;
  const s = servers(
    {
      hooks: { url: "https://mcp.example.com/t/${HOOK_ID}/mcp?key=${KEY}" },
      bare: { url: "https://${HOST}" },
    },
    { HOOK_ID: hook, KEY: key, HOST: "mcp.example.org" },
  );
  const hooks = s("hooks");
  const bare = s("bare");
  expect(hooks.url).toBe(`https://mcp.example.com/t/${hook}/mcp?key=${key}`);
  expect(describeTarget(hooks)).toBe("https://mcp.example.com/t/${HOOK_ID}/mcp");
  // The config keeps the parser's href ("https://mcp.example.org/"): it is still found.
  expect(bare.url).toBe("https://mcp.example.org/");
  expect(describeTarget(bare)).toBe("https://${HOST}");
});

it("a registered secret written literally in an arg or URL path is redacted from the target", () => {
  const secret = `lit-${randomUUID()}`;
  registerSecrets([secret]);
  const s = servers(
    {
      cli: { command: "node", args: ["server.js", `--token=${secret}`] },
      web: { url: `https://mcp.example.com/${secret}/mcp` },
    },
    {},
  );
  expect(describeTarget(s("cli"))).toBe('node server.js "--token=[redacted]"');
  expect(describeTarget(s("web"))).toBe("https://mcp.example.com/[redacted]/mcp");
});

it("a server's auth is shown with its scopes and clientId, and of its client secret only that it is set", () => {
  const secret = `cs-${randomUUID()}`;
  const s = servers(
    {
      tasks: {
        url: "https://tasks.example.com/mcp",
        auth: {
          type: "oauth",
          scopes: ["read", "write"],
          clientId: "gatehouse",
          issuer: "https://auth.example.com",
          clientSecret: "${TASKS_SECRET}",
        },
      },
      public: { url: "https://docs.example.com/mcp", auth: { type: "oauth" } },
      plain: { url: "https://plain.example.com/mcp" },
    },
    { TASKS_SECRET: secret },
  );
  // The server holds the secret to send...
  expect(s("tasks").auth?.clientSecret).toBe(secret);
  // ...and the owner's view says there is one, never what it is.
  const shown = describeAuth(s("tasks"));
  expect(shown).toEqual({
    type: "oauth",
    scopes: ["read", "write"],
    clientId: "gatehouse",
    clientSecret: true,
  });
  expect(JSON.stringify(shown)).not.toContain(secret);
  expect(describeAuth(s("public"))).toEqual({
    type: "oauth",
    scopes: [],
    clientId: null,
    clientSecret: false,
  });
  expect(describeAuth(s("plain"))).toBeNull();
});

it("a clientId that came from ${VAR} is shown as written, like a target's URL", () => {
  const id = `id-${randomUUID()}`;
  const s = servers(
    {
      tasks: {
        url: "https://tasks.example.com/mcp",
        auth: { type: "oauth", clientId: "${TASKS_CLIENT_ID}", issuer: "https://auth.example.com" },
      },
    },
    { TASKS_CLIENT_ID: id },
  );
  expect(s("tasks").auth?.clientId).toBe(id);
  expect(describeAuth(s("tasks"))?.clientId).toBe("${TASKS_CLIENT_ID}");
});

it("a client secret never reaches a config message, whatever is wrong around it", () => {
  const secret = `cs-${randomUUID()}`;
  const result = validateConfig(
    {
      mcpServers: {
        tasks: {
          url: "https://tasks.example.com/mcp",
          enabled: true,
          headers: { Authorization: "Bearer x" },
          auth: { type: "oauth", scopes: ["a b"], clientSecret: "${TASKS_SECRET}", client_secret: secret },
        },
      },
    },
    { env: { TASKS_SECRET: `${secret}\n` }, baseDir: BASE },
  );
  expect(result.errors.map((e) => e.path)).toEqual([
    "mcpServers.tasks.headers.Authorization",
    "mcpServers.tasks.auth.client_secret",
    "mcpServers.tasks.auth.scopes[0]",
    "mcpServers.tasks.auth.clientSecret",
    "mcpServers.tasks.auth.clientSecret",
  ]);
  expect(formatIssues(result)).not.toContain(secret);
});
