import { fileURLToPath } from "node:url";
import { expect } from "vitest";
import type { ConfigIssue, ConfigResult, NotificationsConfig, ServerConfig } from "./index";
import { validateConfig } from "./index";

/** Shared by the config tests: fixture files, a fixed base folder, and short ways to validate. */

// Deliberately broken fixtures end in .json.txt so the repository-wide Biome check skips them.
export const FIXTURES = fileURLToPath(new URL("../../test/fixtures/config", import.meta.url));
export const BASE = "/etc/gatehouse";

export type Env = Record<string, string | undefined>;

/** Validates `raw` against `env`, relative paths resolved against {@link BASE}. */
export function check(raw: unknown, env: Env = {}): ConfigResult {
  return validateConfig(raw, { env, baseDir: BASE });
}

/** {@link check} of a file with these `mcpServers` and any other top-level keys. */
export function withServers(
  servers: Record<string, unknown>,
  rest: Record<string, unknown> = {},
): ConfigResult {
  return check({ mcpServers: servers, ...rest });
}

/** The messages of the issues at exactly `path`. */
export function messagesAt(issues: ConfigIssue[], path: string): string[] {
  return issues.filter((i) => i.path === path).map((i) => i.message);
}

/** The one server of an error-free result (the test fails otherwise). */
export function onlyServer(result: ConfigResult): ServerConfig {
  expect(result.errors).toEqual([]);
  const server = result.config?.servers[0];
  if (!server) throw new Error("expected one server");
  return server;
}

/** {@link check} of a file without servers, with this `notifications` section and any other top-level keys. */
export function withNotifications(
  notifications: unknown,
  env: Env = {},
  rest: Record<string, unknown> = {},
): ConfigResult {
  return check({ mcpServers: {}, notifications, ...rest }, env);
}

/** The `notifications` of an error-free result (the test fails otherwise). */
export function notificationsOf(result: ConfigResult): NotificationsConfig {
  expect(result.errors).toEqual([]);
  const notifications = result.config?.notifications;
  if (!notifications) throw new Error("expected a config");
  return notifications;
}

/** A webhook entry with every required key, for tests that vary one of them. */
export const hook = { name: "ops-chat", url: "https://hooks.example.com/T0/B0", events: ["call.pending"] };
export const smtp = { smtp: "smtps://gatehouse:pw@smtp.example.com:465", from: "gatehouse@example.com" };

export const stdio = { command: "npx", args: ["-y", "pkg"] };
export const http = { url: "https://mcp.example.com/mcp" };
