import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { REPO_ROOT, startTestRuntime } from "@/test/support/runtime";
import { expandVars, validateConfig } from "./config";
import { redact, registerSecrets } from "./log";
import { createRuntime, envSecrets } from "./runtime";

describe("which values of a server's config are redacted", () => {
  it("common env values (warn, true, info, /tmp) do not redact unrelated words or JSON literals", () => {
    const env = {
      DEBUG: "true",
      LOG_LEVEL: "warn",
      MODE: "production",
      TMPDIR: "/tmp",
      API_KEY: "k9",
      DB_PASSWORD: "pw",
      DSN: "postgres://app:hunter2@db.internal/app",
      UPSTREAM: "ghp_0123456789abcdefABCDEF",
    };
    expect(envSecrets(env).sort()).toEqual(
      ["ghp_0123456789abcdefABCDEF", "k9", "postgres://app:hunter2@db.internal/app", "pw"].sort(),
    );
    registerSecrets(envSecrets(env));
    expect(redact('server demo ready {"tools":1,"ok":true} warn: construe production /tmp')).toBe(
      'server demo ready {"tools":1,"ok":true} warn: construe production /tmp',
    );
    expect(redact("dial failed: key=k9 password=pw via ghp_0123456789abcdefABCDEF")).toBe(
      "dial failed: key=[redacted] password=[redacted] via [redacted]",
    );
  });

  it("a ${VAR} expanded into args is registered as a secret at start, so stderr tails and logs redact it", async () => {
    const key = "sk-live-4242424242424242";
    // As validation does at start: the arg is written with a reference, the env holds the key.
    expect(expandVars("--api-key=${SERVICE_API_KEY}", { SERVICE_API_KEY: key }).value).toBe(
      `--api-key=${key}`,
    );
    const rt = await startTestRuntime();
    try {
      expect(redact(`child printed its argv: --api-key=${key}`)).toBe(
        "child printed its argv: --api-key=[redacted]",
      );
    } finally {
      await rt.stop();
    }
  });
});

describe("an OAuth client secret", () => {
  it("is redacted from the log whatever its variable is called and however plain it looks", async () => {
    const secret = "otter-lantern";
    const raw = {
      mcpServers: {
        hosted: {
          url: "https://notes.example.com/mcp",
          enabled: false,
          auth: {
            type: "oauth",
            clientId: "gatehouse",
            issuer: "https://auth.example.com",
            clientSecret: "${NOTES_APP_VALUE}",
          },
        },
      },
    };
    const { config } = validateConfig(raw, { env: { NOTES_APP_VALUE: secret }, baseDir: REPO_ROOT });
    if (!config) throw new Error("the config is valid");
    expect(config.servers[0]?.auth?.clientSecret).toBe(secret);
    const dir = mkdtempSync(path.join(tmpdir(), "gatehouse-oauth-secret-"));
    const rt = await createRuntime({ config, dbFile: path.join(dir, "gatehouse.db") });
    try {
      expect(redact(`token request failed for ${secret}`)).toBe("token request failed for [redacted]");
    } finally {
      await rt.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
