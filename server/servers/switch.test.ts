/**
 * An owner's "Switch on" for a server whose entry has no `enabled` key, through the real route
 * and a real runtime (SQLite file, the demo server as the dark one): it connects, is audited,
 * outlives a restart and is undone by "Switch off"; the file's own `"enabled"` always wins, and a
 * server that refers to an unset `${VAR}` is refused by the variable's path.
 */
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { and, asc, eq } from "drizzle-orm";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { ServerView } from "@/lib/api-types";
import { auditEvents } from "@/server/store/schema";
import {
  bodyOf,
  createTestUser,
  DEMO_SERVER,
  REPO_ROOT,
  request,
  startTestRuntime,
  type TestRuntime,
  waitForServersReady,
} from "@/test/support/runtime";
import { serverView } from "./status";

let rt: TestRuntime | undefined;
afterEach(() => rt?.stop());

/** A demo server as a desktop client's config has it: no "enabled". */
const pasted = (dir: string, extra: Record<string, unknown> = {}) => ({
  command: "node",
  args: [DEMO_SERVER],
  env: { DEMO_STATE_FILE: path.join(dir, "files-state.json") },
  ...extra,
});

/** A runtime in `dir` (default a new one); given `databaseUrl` (postgres project), on it again: a restart. */
async function start(
  servers: (dir: string) => Record<string, unknown>,
  dir?: string,
  env: Record<string, string> = {},
  databaseUrl?: string,
) {
  const base =
    dir ?? (await import("node:fs")).mkdtempSync(path.join((await import("node:os")).tmpdir(), "gh-switch-"));
  rt = await startTestRuntime({
    dir: base,
    servers: servers(base),
    env,
    ...(databaseUrl ? { databaseUrl } : {}),
  });
  const owner = await createTestUser(rt.runtime, `olga${Date.now()}`, ["owner"]);
  return { rt, cookie: owner.cookie, dir: base, databaseUrl: rt.databaseUrl };
}

const view = (t: TestRuntime, name: string): Promise<ServerView> =>
  serverView(t.runtime.manager, t.runtime.db, name);
const switchRows = (t: TestRuntime, action: string) =>
  t.runtime.db
    .select()
    .from(auditEvents)
    .where(and(eq(auditEvents.action, action), eq(auditEvents.subject, "files")));

describe("switching a dark server on from the Servers page", () => {
  it('a server without "enabled" switched on connects, is audited, stays on across a restart, and Switch off makes it dark', async () => {
    const first = await start((dir) => ({ files: pasted(dir) }));
    expect(await view(first.rt, "files")).toMatchObject({
      state: "dark",
      switch: { switchedOn: null, refusal: null },
    });

    const res = await request("POST", "/api/servers/files/switch", {
      cookie: first.cookie,
      body: { on: true },
    });
    expect(res.status).toBe(200);
    await waitForServersReady(first.rt.runtime, ["files"]);
    const on = await view(first.rt, "files");
    expect(on).toMatchObject({ enabled: true, state: "ready", switch: { refusal: null } });
    expect(on.switch?.switchedOn?.by).toMatch(/^olga/);
    // Its history goes on: switching on is no restart of Gatehouse.
    expect(on.history.filter((h) => h.started)).toHaveLength(1);
    expect(await switchRows(first.rt, "server.switch_on")).toHaveLength(1);

    await first.rt.stop({ keepDir: true });
    const second = await start((dir) => ({ files: pasted(dir) }), first.dir, {}, first.databaseUrl);
    await waitForServersReady(second.rt.runtime, ["files"]);
    expect(await view(second.rt, "files")).toMatchObject({ enabled: true, state: "ready" });

    const off = await request("POST", "/api/servers/files/switch", {
      cookie: second.cookie,
      body: { on: false },
    });
    expect(off.status).toBe(200);
    expect(await view(second.rt, "files")).toMatchObject({
      enabled: false,
      state: "dark",
      switch: { switchedOn: null },
    });
    expect(await switchRows(second.rt, "server.switch_off")).toHaveLength(1);

    await second.rt.stop({ keepDir: true });
    const third = await start((dir) => ({ files: pasted(dir) }), first.dir, {}, first.databaseUrl);
    expect(await view(third.rt, "files")).toMatchObject({ enabled: false, state: "dark" });
  }, 60_000);

  it('a server whose entry says "enabled": false cannot be switched on from the page', async () => {
    const { rt: t, cookie } = await start((dir) => ({ files: pasted(dir, { enabled: false }) }));
    expect((await view(t, "files")).switch).toBeNull();
    const res = await request("POST", "/api/servers/files/switch", { cookie, body: { on: true } });
    expect(res.status).toBe(409);
    const body = await bodyOf<{ error: { code: string; message: string } }>(res);
    expect(body.error.code).toBe("enabled_in_file");
    expect(body.error.message).toContain('"enabled": false');
    expect((await view(t, "files")).state).toBe("dark");
    expect(await switchRows(t, "server.switch_on")).toEqual([]);
  });

  it("switching on a server that uses an unset ${VAR} is refused, naming the variable's path and no value", async () => {
    const { rt: t, cookie } = await start((dir) => ({
      files: pasted(dir, {
        env: { DEMO_STATE_FILE: path.join(dir, "s.json"), API_TOKEN: "${GH_TEST_UNSET_TOKEN}" },
      }),
    }));
    expect((await view(t, "files")).switch?.refusal).toContain(
      "mcpServers.files.env.API_TOKEN uses ${GH_TEST_UNSET_TOKEN}",
    );
    const res = await request("POST", "/api/servers/files/switch", { cookie, body: { on: true } });
    expect(res.status).toBe(409);
    const body = await bodyOf<{ error: { code: string; message: string } }>(res);
    expect(body.error).toMatchObject({ code: "unset_variable" });
    expect(body.error.message).toContain("mcpServers.files.env.API_TOKEN uses ${GH_TEST_UNSET_TOKEN}");
    expect((await view(t, "files")).state).toBe("dark");
  });

  it("a switched-on server whose ${VAR} is unset at the next start stays dark, with a warning naming the path", async () => {
    const uses = (dir: string) => ({
      files: pasted(dir, {
        env: { DEMO_STATE_FILE: path.join(dir, "s.json"), API_TOKEN: "${GH_TEST_TOKEN}" },
      }),
    });
    const first = await start(uses, undefined, { GH_TEST_TOKEN: "tok-1234" });
    const res = await request("POST", "/api/servers/files/switch", {
      cookie: first.cookie,
      body: { on: true },
    });
    expect(res.status).toBe(200);
    await waitForServersReady(first.rt.runtime, ["files"]);
    await first.rt.stop({ keepDir: true });

    const lines: string[] = [];
    const write = process.stderr.write.bind(process.stderr);
    vi.spyOn(process.stderr, "write").mockImplementation((chunk: string | Uint8Array, ...rest: unknown[]) => {
      lines.push(String(chunk));
      return (write as (c: string | Uint8Array, ...r: unknown[]) => boolean)(chunk, ...rest);
    });
    const second = await start(uses, first.dir, {}, first.databaseUrl);
    expect(await view(second.rt, "files")).toMatchObject({ enabled: false, state: "dark" });
    const warned = lines.filter((l) => l.includes("WARN") && l.includes("stays dark"));
    expect(warned).toHaveLength(1);
    // The reference itself sits in a credential's field, so the line redacts it; path and name stay.
    expect(warned[0]).toContain("mcpServers.files.env.API_TOKEN uses");
    expect(warned[0]).toContain("set GH_TEST_TOKEN there");
    vi.restoreAllMocks();
  }, 60_000);

  it("only an owner may switch, from a page of Gatehouse's own origin", async () => {
    const { rt: t, cookie } = await start((dir) => ({ files: pasted(dir) }));
    const reviewer = await createTestUser(t.runtime, "rita", ["reviewer"]);
    const asReviewer = await request("POST", "/api/servers/files/switch", {
      cookie: reviewer.cookie,
      body: { on: true },
    });
    expect(asReviewer.status).toBe(403);
    const crossSite = await request("POST", "/api/servers/files/switch", {
      cookie,
      body: { on: true },
      origin: "http://evil.example",
    });
    expect(crossSite.status).toBe(403);
    expect((await view(t, "files")).state).toBe("dark");
    expect(await switchRows(t, "server.switch_on")).toEqual([]);
  });

  it("switches sent at the same moment take turns: the server ends as the last to take its turn left it, with no tool server orphaned", async () => {
    const slow = path.join(REPO_ROOT, "test", "fixtures", "servers", "slow.mjs");
    // No file: the server was never started (switched off before its turn to start came).
    const pids = (dir: string) =>
      existsSync(path.join(dir, "pids"))
        ? readFileSync(path.join(dir, "pids"), "utf8").split("\n").filter(Boolean).map(Number)
        : [];
    const {
      rt: t,
      cookie,
      dir,
    } = await start((d) => ({
      files: {
        command: "node",
        args: [slow],
        env: { RUNS_FILE: path.join(d, "runs.json"), PID_FILE: path.join(d, "pids") },
      },
    }));
    const answers = await Promise.all(
      [true, false, true].map((on) => request("POST", "/api/servers/files/switch", { cookie, body: { on } })),
    );
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200]);
    // Which of them came last is the order they reached the switch, after each request's sign-in
    // check (on PostgreSQL those run side by side): the audit says it.
    const switches = await t.runtime.db
      .select({ action: auditEvents.action })
      .from(auditEvents)
      .where(eq(auditEvents.subject, "files"))
      .orderBy(asc(auditEvents.id));
    const last = switches.filter((r) => r.action.startsWith("server.switch_")).at(-1)?.action;
    if (last === "server.switch_on") {
      await waitForServersReady(t.runtime, ["files"]);
      expect(await view(t, "files")).toMatchObject({ enabled: true, state: "ready" });
    } else {
      expect(last).toBe("server.switch_off");
      expect(await view(t, "files")).toMatchObject({ enabled: false, state: "dark" });
    }
    await t.stop({ keepDir: true });
    rt = undefined;
    // Stopping Gatehouse stops every child it started: one left alive was started by a
    // supervisor the manager no longer knew.
    const alive = pids(dir).filter((pid) => {
      try {
        process.kill(pid, 0);
        return true;
      } catch {
        return false;
      }
    });
    for (const pid of alive) process.kill(pid, "SIGKILL");
    expect(alive).toEqual([]);
  }, 60_000);
});
