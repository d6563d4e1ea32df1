// biome-ignore-all lint/suspicious/noTemplateCurlyInString: these tests are about literal ${VAR} references in config text.
import { describe, expect, it } from "vitest";
import { check, messagesAt } from "./test-helpers";

const TOKEN = "0123456789abcdef0123";

describe("metrics", () => {
  it("a scrape token from the environment is read, expanded, and absent metrics mean owners only", () => {
    const result = check({ mcpServers: {}, metrics: { token: "${SCRAPE_TOKEN}" } }, { SCRAPE_TOKEN: TOKEN });
    expect(result.errors).toEqual([]);
    expect(result.warnings).toEqual([]);
    expect(result.config?.metrics).toEqual({ token: TOKEN });
    expect(check({ mcpServers: {} }).config?.metrics).toBeUndefined();
  });

  it("an unset variable stops the start, naming metrics.token and the variable, never a value", () => {
    const result = check({ mcpServers: {}, metrics: { token: "${SCRAPE_TOKEN}" } });
    expect(result.config).toBeNull();
    expect(messagesAt(result.errors, "metrics.token")[0]).toMatch(/SCRAPE_TOKEN.*not set/);
  });

  it("a short token is an error that says its length only", () => {
    const result = check({ mcpServers: {}, metrics: { token: "${T}" } }, { T: "short-secret" });
    expect(result.config).toBeNull();
    const [message] = messagesAt(result.errors, "metrics.token");
    expect(message).toMatch(/is 12 characters long; use at least 16/);
    expect(message).not.toContain("short-secret");
  });

  it("a token written in the file works, with a warning to keep it in the environment", () => {
    const result = check({ mcpServers: {}, metrics: { token: TOKEN } });
    expect(result.config?.metrics?.token).toBe(TOKEN);
    expect(messagesAt(result.warnings, "metrics.token")[0]).toMatch(/keep it in the environment/);
    expect(JSON.stringify(result.warnings)).not.toContain(TOKEN);
  });

  it("a missing or non-string token, and unknown keys, are errors at their paths", () => {
    expect(messagesAt(check({ mcpServers: {}, metrics: {} }).errors, "metrics.token")[0]).toMatch(
      /is required/,
    );
    expect(messagesAt(check({ mcpServers: {}, metrics: { token: 5 } }).errors, "metrics.token")[0]).toMatch(
      /must be a string/,
    );
    expect(messagesAt(check({ mcpServers: {}, metrics: "x" }).errors, "metrics")[0]).toMatch(
      /must be an object/,
    );
    expect(
      messagesAt(check({ mcpServers: {}, metrics: { token: TOKEN, tokn: 1 } }).errors, "metrics.tokn")[0],
    ).toMatch(/did you mean "token"/);
  });
});
