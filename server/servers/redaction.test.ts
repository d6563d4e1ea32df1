/**
 * What a server spills does not reach the owner's view or the log unredacted, and cannot forge a
 * log line: a real stdio child (test/fixtures/servers/leaky.mjs) prints its secrets to stderr and
 * answers `initialize` with an error naming them, an internal address and a forged log line.
 */
import { randomUUID } from "node:crypto";
import path from "node:path";
import { afterEach, expect, it, vi } from "vitest";
import type { ServerView } from "@/lib/api-types";
import {
  bodyOf,
  createTestUser,
  REPO_ROOT,
  request,
  startTestRuntime,
  type TestRuntime,
  waitForEvent,
} from "@/test/support/runtime";

const LEAKY = path.join(REPO_ROOT, "test/fixtures/servers/leaky.mjs");
const FORGED = "2026-01-01T00:00:00.000Z INFO [calls] call c-1 approved by olga";

let rt: TestRuntime | undefined;
afterEach(async () => {
  await rt?.stop();
  rt = undefined;
  vi.restoreAllMocks();
});

/** Every line the logger writes from now on, to stdout or stderr, kept instead of printed. */
function captureLog(): string[] {
  const writes: string[] = [];
  for (const stream of [process.stdout, process.stderr]) {
    vi.spyOn(stream, "write").mockImplementation((chunk: string | Uint8Array) => {
      writes.push(String(chunk));
      return true;
    });
  }
  return writes;
}

it("a server's stderr tail and last error are shown to owners with its secrets redacted, and its text cannot forge a log line", async () => {
  const short = "k9";
  const token = `tok"en-${randomUUID()}`;
  const writes = captureLog();
  rt = await startTestRuntime({
    servers: {
      leaky: {
        command: "node",
        args: [LEAKY],
        env: { LEAK_SHORT_KEY: short, LEAK_TOKEN: token, LEAK_AT: "initialize" },
        enabled: true,
      },
    },
  });
  const { runtime } = rt;
  const spilled = () => {
    const s = runtime.manager.get("leaky").snapshot();
    return s.state === "backoff" && s.lastError !== null && s.stderrTail.length >= 4;
  };
  await waitForEvent(runtime.bus, (e) => e.type === "server" && e.name === "leaky" && spilled(), {
    already: spilled,
    timeoutMs: 15_000,
    what: () => `leaky to back off (${JSON.stringify(runtime.manager.get("leaky").snapshot())})`,
  });

  const owner = await createTestUser(runtime, "olga", ["owner"]);
  const res = await request("GET", "/api/servers", { cookie: owner.cookie });
  expect(res.status).toBe(200);
  const leaky = (await bodyOf<{ servers: ServerView[] }>(res)).servers.find((s) => s.name === "leaky");
  if (!leaky) throw new Error("no leaky server in the view");
  const shown = JSON.stringify(leaky);
  for (const form of [
    token,
    JSON.stringify(token).slice(1, -1),
    encodeURIComponent(token),
    "key=k9",
    "k=k9",
  ]) {
    expect(shown, form).not.toContain(form);
  }
  expect(leaky.stderrTail).toContain("starting with key=[redacted]");
  expect(leaky.stderrTail).toContain('{"level":"info","msg":"config","token":"[redacted]"}');
  expect(leaky.stderrTail).toContain("calling https://api.internal.example/v1?t=[redacted]&k=[redacted]");
  // The carriage return and the "erase line" escape are shown, not obeyed.
  expect(leaky.stderrTail).toContain(`progress\\r\\u001b[2K${FORGED}`);
  expect(leaky.lastError).toContain("key=[redacted] token=[redacted]");
  expect(leaky.history.some((h) => h.detail?.includes("token=[redacted]"))).toBe(true);

  // The log: the failure is written, redacted, and on one line with its newline shown as ⏎.
  const failure = writes.filter((w) => w.includes("server leaky failed"));
  expect(failure.length).toBeGreaterThan(0);
  for (const w of writes) {
    expect(w.indexOf("\n"), w).toBe(w.length - 1);
    expect(w.startsWith(FORGED), w).toBe(false);
    expect(w).not.toContain(token);
    expect(w).not.toContain("key=k9");
  }
  expect(failure[0]).toContain(`key=[redacted] token=[redacted] ⏎ ${FORGED}`);
}, 30_000);
