/**
 * The logger's secret redaction across module copies: Next.js evaluates server modules more
 * than once (instrumentation, each route, server/main.ts), and a secret registered through any
 * copy must be redacted by every copy.
 */
import { randomUUID } from "node:crypto";
import { afterEach, expect, it, vi } from "vitest";

type LogModule = typeof import("./log");

/** A fresh evaluation of server/log.ts, distinct from any loaded before it. */
async function freshLogModule(): Promise<LogModule> {
  vi.resetModules();
  return import("./log");
}

afterEach(() => {
  vi.restoreAllMocks();
});

it("a secret registered through one copy of the log module is redacted by another copy", async () => {
  const first = await freshLogModule();
  const second = await freshLogModule();
  // Two evaluations of the module, not one shared instance: otherwise this proves nothing.
  expect(second).not.toBe(first);
  expect(second.registerSecrets).not.toBe(first.registerSecrets);

  // Secrets cannot be unregistered, so each run uses its own.
  const secretA = `gh_a_${randomUUID()}`;
  const secretB = `gh_b_${randomUUID()}`;
  expect(second.redact(`token=${secretA}`)).toBe(`token=${secretA}`);

  first.registerSecrets([secretA]);
  second.registerSecrets([secretB]);
  for (const copy of [first, second]) {
    expect(copy.redact(`a=${secretA} b=${secretB}`)).toBe("a=[redacted] b=[redacted]");
  }

  // And the log lines another copy writes carry neither.
  const lines: string[] = [];
  vi.spyOn(process.stderr, "write").mockImplementation((chunk: string | Uint8Array) => {
    lines.push(String(chunk));
    return true;
  });
  second.logger("test").error(`header value ${secretA}`, { env: secretA });
  expect(lines).toHaveLength(1);
  expect(lines[0]).toContain("header value [redacted]");
  expect(lines[0]).not.toContain(secretA);
});
