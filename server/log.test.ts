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

  // Each run uses its own secrets: the registry is shared by the whole process.
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

it("a secret shorter than four characters is redacted where it stands as a value, and nowhere else", async () => {
  const log = await freshLogModule();
  log.registerSecrets(["k9", "7"]);
  const cases: [string, string][] = [
    ["API_KEY=k9 started", "API_KEY=[redacted] started"],
    ['{"apiKey":"k9","n":7}', '{"apiKey":"[redacted]","n":[redacted]}'],
    ["key: 'k9'", "key: '[redacted]'"],
    ["GET /x?key=k9&page=2", "GET /x?key=[redacted]&page=2"],
    ["dial https://bot:k9@host/mcp", "dial https://bot:[redacted]@host/mcp"],
    ["Authorization: Bearer k9", "Authorization: Bearer [redacted]"],
    ["sent Bearer k9.", "sent Bearer [redacted]."],
    ['escaped {\\"token\\":\\"k9\\"}', 'escaped {\\"token\\":\\"[redacted]\\"}'],
    // Not a value: part of a word, a version, a clock, a count.
    ["k9s v7.1 at 10:07 with 7 tries, k9-ready", "k9s v7.1 at 10:07 with 7 tries, k9-ready"],
  ];
  for (const [line, shown] of cases) expect(log.redact(line), line).toBe(shown);
});

it("a secret with quotes is redacted raw, JSON-escaped and URL-encoded", async () => {
  const log = await freshLogModule();
  const id = randomUUID();
  const secret = `p"a'ss w<rd>{${id}}`;
  log.registerSecrets([secret]);
  const forms = [
    secret,
    JSON.stringify(secret).slice(1, -1),
    encodeURIComponent(secret),
    new URL(`https://h/${secret}`).pathname.slice(1),
    new URL(`https://h/?k=${secret}`).search.slice(3),
    new URLSearchParams({ k: secret }).toString().slice(2),
  ];
  for (const form of forms) {
    expect(form).toContain(id);
    expect(log.redact(`before ${form} after`), form).toBe("before [redacted] after");
  }
  expect(log.redact(JSON.stringify({ error: `bad ${secret}` }))).toBe('{"error":"bad [redacted]"}');
});

it("the credential of an authorization header is redacted on its own", async () => {
  const log = await freshLogModule();
  const token = `tok_${randomUUID()}`;
  const password = `pw-${randomUUID()}`;
  log.registerSecrets([`Bearer ${token}`, `Basic ${Buffer.from(`gate:${password}`).toString("base64")}`]);
  expect(log.redact(`token ${token} was refused`)).toBe("token [redacted] was refused");
  expect(log.redact(`login gate:${password} failed`)).toBe("login [redacted] failed");
  expect(log.redact(`password ${password}`)).toBe("password [redacted]");
});

it("a server's text cannot forge a log line: newlines and control characters are escaped", async () => {
  const log = await freshLogModule();
  const lines: string[] = [];
  vi.spyOn(process.stderr, "write").mockImplementation((chunk: string | Uint8Array) => {
    lines.push(String(chunk));
    return true;
  });
  const forged = "boom\n2026-01-01T00:00:00.000Z INFO [calls] call approved\r\u001b[2K\u2028\u202eevil";
  log.logger("mcp").warn(`server x failed: ${forged}`, { reason: forged });
  expect(lines).toHaveLength(1);
  const line = lines[0] ?? "";
  expect(line.endsWith("\n")).toBe(true);
  const body = line.slice(0, -1);
  // biome-ignore lint/suspicious/noControlCharactersInRegex: no control character may be left in the line.
  expect(body).not.toMatch(/[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e]/);
  expect(body).toContain(
    "server x failed: boom ⏎ 2026-01-01T00:00:00.000Z INFO [calls] call approved\\r\\u001b[2K\\u2028\\u202eevil",
  );
  expect(body).toContain(
    '{"reason":"boom ⏎ 2026-01-01T00:00:00.000Z INFO [calls] call approved\\r\\u001b[2K\\u2028\\u202eevil"}',
  );
});

it("a log line never carries a literal \\n: a line break in a message or a field reads as ⏎, one entry one line", async () => {
  const log = await freshLogModule();
  const lines: string[] = [];
  vi.spyOn(process.stderr, "write").mockImplementation((chunk: string | Uint8Array) => {
    lines.push(String(chunk));
    return true;
  });
  // As boot writes the config's warnings, and a server's multi-line error (CRLF, indented).
  log.logger("boot").warn("config warnings\nwarning: a: one\nwarning: b: two\n", {
    stderr: "Error: boom\r\n    at main (x.js:1:2)",
    nested: { lines: ["first\nsecond"] },
  });
  expect(lines).toHaveLength(1);
  const body = (lines[0] ?? "").replace(/\n$/, "");
  expect(body).not.toContain("\n");
  expect(body).not.toContain("\\n");
  expect(body).toMatch(
    /\[boot\] config warnings ⏎ warning: a: one ⏎ warning: b: two \{"stderr":"Error: boom ⏎ at main \(x\.js:1:2\)","nested":\{"lines":\["first ⏎ second"\]\}\}$/,
  );
});

// A vitest deadline the quadratic lookbehind blew by far (about 50 s for this text); the fix
// answers in milliseconds. It guards the shape of the pattern, not a speed.
it("redact stays linear on long whitespace runs when a short secret is registered", async () => {
  const { redact, registerSecrets } = await freshLogModule();
  registerSecrets(["ab1"]);
  const text = `Bearer${" ".repeat(200_000)}ab1`;
  expect(redact(text)).toBe(text);
  expect(redact("Authorization: Bearer ab1")).toBe("Authorization: Bearer [redacted]");
}, 5_000);

it("a forgotten secret is no longer redacted, by any copy, and the others still are", async () => {
  const first = await freshLogModule();
  const second = await freshLogModule();
  const old = `gh_old_${randomUUID()}`;
  const current = `gh_new_${randomUUID()}`;
  first.registerSecrets([old, current]);
  // Both copies built their pattern with both secrets in it.
  expect(second.redact(`${old} ${current}`)).toBe("[redacted] [redacted]");
  first.forgetSecrets([old]);
  for (const copy of [first, second]) expect(copy.redact(`${old} ${current}`)).toBe(`${old} [redacted]`);
  // Forgetting what is not registered changes nothing.
  second.forgetSecrets([`gh_never_${randomUUID()}`]);
  expect(first.redact(current)).toBe("[redacted]");
});
