import { describe, expect, it } from "vitest";
import { startTestRuntime } from "@/test/support/runtime";
import { expandVars } from "./config";
import { redact, registerSecrets } from "./log";
import { envSecrets } from "./runtime";

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
