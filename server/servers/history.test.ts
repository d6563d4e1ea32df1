/**
 * A server's history outlives a Gatehouse restart: supervisors of real stdio servers on a real
 * SQLite file, stopped, and new ones started on the same store as a restart does. SQLite alone:
 * a file closed and opened again, and another process holding SQLite's write lock.
 */
import { randomUUID } from "node:crypto";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterEach, describe, expect, it, vi } from "vitest";
import { registerSecrets } from "@/server/log";
import { HISTORY_LENGTH, watchUntil } from "@/server/mcp/supervision";
import { ServerSupervisor, type SupervisorSnapshot } from "@/server/mcp/supervisor";
import { closeDb, type Db, openDb } from "@/server/store/db";
import { serverHistory } from "@/server/store/schema";
import { cleanUp, DEMO, FIXTURES, quiet, stdioServer, tempDir } from "@/test/support/mcp-harness";
import { StoredServerHistory } from "./history";

const LEAKY = join(FIXTURES, "leaky.mjs");

const running: ServerSupervisor[] = [];
const stores: Db[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((s) => s.stop()));
  await Promise.all(stores.splice(0).map((db) => closeDb(db)));
  await cleanUp();
});

/** The store at `file`, opened as a start opens it (migrations applied). */
function open(file: string): { db: Db; history: StoredServerHistory } {
  const db = openDb(file);
  stores.push(db);
  return { db, history: new StoredServerHistory(db, quiet) };
}

/**
 * A started supervisor of `config` keeping its history in `history`, with a wait on its states
 * and the number of state changes it made.
 */
async function supervise(config: ServerSupervisor["config"], history: StoredServerHistory) {
  const watchers = new Set<() => void>();
  let changes = 0;
  const supervisor = new ServerSupervisor(config, {
    log: quiet,
    refreshSeconds: 0,
    // Long: a failure stays in backoff while the test looks.
    backoff: { baseMs: 60_000, capMs: 60_000 },
    onState: () => {
      changes++;
      for (const w of [...watchers]) w();
    },
    onTools: () => {},
    history,
  });
  running.push(supervisor);
  // Awaited: the earlier runs' history is read from the store as it starts.
  await supervisor.start();
  const until = (what: string, probe: (s: SupervisorSnapshot) => boolean) =>
    watchUntil(
      watchers,
      15_000,
      () => new Error(`no ${what}: ${JSON.stringify(supervisor.snapshot().history)}`),
      () => (probe(supervisor.snapshot()) ? supervisor.snapshot() : undefined),
    );
  return { supervisor, until, changes: () => changes };
}

async function stop(supervisor: ServerSupervisor): Promise<void> {
  running.splice(running.indexOf(supervisor), 1);
  await supervisor.stop();
}

const states = (s: SupervisorSnapshot) => s.history.map((h) => `${h.state}${h.started ? " (started)" : ""}`);

describe("server history across restarts", () => {
  it("a new supervisor on the same store shows the earlier run's changes, then where Gatehouse started again", async () => {
    const file = join(tempDir(), "gatehouse.db");
    const demo = stdioServer("demo", DEMO, { env: { DEMO_STATE_FILE: join(tempDir(), "state.json") } });

    const first = open(file);
    const one = await supervise(demo, first.history);
    await one.until("first ready", (s) => s.state === "ready");
    one.supervisor.reconnectNow();
    await one.until("second ready", (s) => s.history.filter((h) => h.state === "ready").length === 2);
    await stop(one.supervisor);
    const earlier = one.supervisor.snapshot().history;
    expect(states(one.supervisor.snapshot())).toEqual([
      "connecting (started)",
      "ready",
      "connecting",
      "ready",
    ]);
    // The process ends: its store closes, and the next start opens the file anew.
    await first.history.close();
    stores.splice(stores.indexOf(first.db), 1);
    await closeDb(first.db);

    const second = open(file);
    const two = await supervise(demo, second.history);
    const ready = await two.until("ready after the restart", (s) => s.state === "ready");
    expect(states(ready)).toEqual([
      "connecting (started)",
      "ready",
      "connecting",
      "ready",
      "connecting (started)",
      "ready",
    ]);
    // The earlier run's entries as they were, times included.
    expect(ready.history.slice(0, 4)).toEqual(earlier);
    // Written behind the supervisor's back: wait for the last one.
    await vi.waitFor(async () => expect(await second.history.rows("demo")).toHaveLength(6));
  }, 30_000);

  it("keeps at most HISTORY_LENGTH changes a server, in the table too, and leaves other servers' rows alone", async () => {
    const file = join(tempDir(), "gatehouse.db");
    const { history } = open(file);
    const other = stdioServer("other", DEMO, { enabled: false });
    const otherRun = await supervise(other, history);
    await otherRun.until("its dark change", () => otherRun.changes() > 0);
    await vi.waitFor(() => expect(otherRun.supervisor.snapshot().history).toHaveLength(1));
    await history.settled();
    await stop(otherRun.supervisor);

    // A dark server changes state once a start ("dark"): one row a restart.
    const dark = stdioServer("dark", DEMO, { enabled: false });
    const restarts = HISTORY_LENGTH + 7;
    let last: SupervisorSnapshot | null = null;
    for (let i = 0; i < restarts; i++) {
      const run = await supervise(dark, history);
      await run.until("its dark change", () => run.changes() > 0);
      // The earlier runs' entries are read as it starts, this run's written after them.
      const expected = Math.min(i + 1, HISTORY_LENGTH);
      await vi.waitFor(() => expect(run.supervisor.snapshot().history).toHaveLength(expected));
      last = run.supervisor.snapshot();
      // Written before the next run reads it, as across a real restart.
      await history.settled();
      await stop(run.supervisor);
    }
    expect(last?.history).toHaveLength(HISTORY_LENGTH);
    expect(last?.history.every((h) => h.state === "dark" && h.started === true)).toBe(true);
    const rows = await history.rows("dark");
    expect(rows).toHaveLength(HISTORY_LENGTH);
    // The newest stayed: the last run's change is the last row.
    expect(rows.at(-1)?.at).toBe(last?.history.at(-1)?.at);
    expect(await history.rows("other")).toHaveLength(1);
  }, 30_000);

  it("stores a failure's detail redacted: a secret a server echoes is never in the table", async () => {
    const token = `tok-${randomUUID()}`;
    // As the runtime does with a server's env values before dialling it.
    registerSecrets([token]);
    const file = join(tempDir(), "gatehouse.db");
    const { db, history } = open(file);
    const leaky = stdioServer("leaky", LEAKY, { env: { LEAK_TOKEN: token, LEAK_AT: "initialize" } });
    const run = await supervise(leaky, history);
    const failed = await run.until("a backoff", (s) => s.state === "backoff");
    // In memory the detail is as the server said it (the view redacts it); stored, it is not.
    expect(failed.history.at(-1)?.detail).toContain(token);
    await vi.waitFor(async () => expect(await history.rows("leaky")).toHaveLength(2));
    const stored = await history.rows("leaky");
    expect(stored.map((r) => r.state)).toEqual(["connecting", "backoff"]);
    expect(stored.at(-1)?.detail).toContain("token=[redacted]");
    const everything = JSON.stringify(await db.select().from(serverHistory));
    expect(everything).not.toContain(token);
  }, 30_000);

  it("a store another process holds locked neither holds up a change nor loses it", async () => {
    const file = join(tempDir(), "gatehouse.db");
    const { history } = open(file);
    // A CLI command writing, as far as SQLite can tell.
    const other = new Database(file);
    other.prepare("BEGIN IMMEDIATE").run();
    const at = new Date().toISOString();
    const t0 = performance.now();
    history.append("s", { at, state: "connecting", detail: null, started: true }, HISTORY_LENGTH);
    await history.settled();
    // Far below the store's 5 s busy timeout: the write did not wait for the lock.
    expect(performance.now() - t0).toBeLessThan(1000);
    expect(await history.rows("s")).toEqual([]);
    other.prepare("COMMIT").run();
    other.close();
    history.append("s", { at, state: "ready", detail: null }, HISTORY_LENGTH);
    await history.settled();
    expect((await history.rows("s")).map((r) => [r.state, r.started])).toEqual([
      ["connecting", true],
      ["ready", false],
    ]);
    await history.close();
  });
});
