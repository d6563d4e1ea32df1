/**
 * Calls whose tool server fails under them or is coming back: a destructive call the server died
 * under (or never answered) is `interrupted`, outcome unknown, never `failed`; a call for a
 * server that is reconnecting waits for it instead of failing at once. Real runtimes, real fixture
 * servers (test/fixtures/servers/dies-after-work.mjs, silent.mjs).
 */
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import type { ServerState } from "@/lib/api-types";
import {
  enableTool,
  REPO_ROOT,
  type TestRuntime,
  waitForCallStatus,
  waitForEvent,
} from "@/test/support/runtime";
import { getToolRow, updateTool } from "../catalogue/catalogue";
import { approve, auditRows, call, callRow, people, runtimes } from "./call-fixtures";

const { start } = runtimes();

const SERVERS = path.join(REPO_ROOT, "test", "fixtures", "servers");

/** A runtime with the demo server and "frail" (dies-after-work.mjs), its three tools enabled. */
async function startWithFrail(): Promise<{ rt: TestRuntime; work: () => string[] }> {
  const dir = mkdtempSync(path.join(tmpdir(), "gatehouse-test-"));
  const runsFile = path.join(dir, "frail-runs.txt");
  const rt = await start({
    dir,
    servers: {
      frail: {
        command: "node",
        args: [path.join(SERVERS, "dies-after-work.mjs")],
        env: { RUNS_FILE: runsFile },
        enabled: true,
      },
    },
  });
  const listed = async () => (await getToolRow(rt.runtime.db, "frail_echo")) !== null;
  await waitForEvent(rt.runtime.bus, listed, { already: listed, what: () => "the frail server's tools" });
  for (const tool of ["frail_write", "frail_write_then_die", "frail_echo"])
    await enableTool(rt.runtime, tool);
  const work = () => (existsSync(runsFile) ? readFileSync(runsFile, "utf8").trim().split("\n") : []);
  return { rt, work };
}

/** Resolves once server `name` is in `state` (woken by the bus). */
function serverState(rt: TestRuntime, name: string, state: ServerState): Promise<unknown> {
  const now = () => rt.runtime.manager.get(name).snapshot().state === state;
  return waitForEvent(rt.runtime.bus, (e) => e.type === "server" && e.name === name && e.state === state, {
    already: now,
    what: () => `server ${name} to be ${state} (it is ${rt.runtime.manager.get(name).snapshot().state})`,
  });
}

describe("a destructive call whose server fails under it", () => {
  it("an approved destructive call whose server dies mid-call is interrupted (outcome unknown), not failed", async () => {
    const { rt, work } = await startWithFrail();
    const { agent, alice } = await people(rt);
    const held = await call(agent, "frail_write_then_die", { text: "once" });
    expect((await approve(held.id, alice.cookie)).status).toBe(200);
    await waitForEvent(
      rt.runtime.bus,
      (e) => e.type === "call" && e.id === held.id && e.status !== "running" && e.status !== "pending",
      { already: async () => !["running", "pending"].includes((await callRow(rt, held.id))?.status ?? "") },
    );
    const row = await callRow(rt, held.id);
    expect(row?.status).toBe("interrupted");
    expect(row?.errorCode).toBe("interrupted");
    expect(row?.errorMessage).toContain("outcome unknown");
    // The server did the work before it died: "failed" would have been false.
    expect(work()).toEqual(["write_then_die once"]);
    const audit = (await auditRows(rt, held.id)).map((a) => a.action);
    expect(audit).toContain("call.interrupted");
    expect(audit).not.toContain("call.failed");
  });

  it("a destructive call whose server never answers within timeoutMs is interrupted, outcome unknown", async () => {
    const rt = await start({
      servers: {
        silent: { command: "node", args: [path.join(SERVERS, "silent.mjs")], enabled: true, timeoutMs: 1000 },
      },
    });
    const listed = async () => (await getToolRow(rt.runtime.db, "silent_hang")) !== null;
    await waitForEvent(rt.runtime.bus, listed, { already: listed, what: () => "the silent server's tool" });
    await enableTool(rt.runtime, "silent_hang");
    const { agent, alice } = await people(rt);
    const held = await call(agent, "silent_hang", {});
    expect((await approve(held.id, alice.cookie)).status).toBe(200);
    await waitForCallStatus(rt.runtime, held.id, "interrupted");
    const row = await callRow(rt, held.id);
    expect(row?.errorMessage).toContain("did not answer within 1000 ms");
    expect(row?.errorMessage).toContain("outcome unknown");
  });

  it("a read-only call whose server dies mid-call stays failed", async () => {
    const { rt } = await startWithFrail();
    const { agent } = await people(rt);
    // Vouched read-only, the dying tool runs at once: nothing it may have done needs a reviewer.
    await updateTool(rt.runtime.db, {
      localName: "frail_write_then_die",
      actor: "owner",
      status: "enabled",
      vouch: true,
    });
    const ran = await call(agent, "frail_write_then_die", { text: "read" }, 200);
    expect(ran.status).toBe("failed");
    expect(ran.error?.code).toBe("upstream_error");
  });

  it("a destructive call refused before anything was sent stays failed", async () => {
    const { rt, work } = await startWithFrail();
    const { agent, alice } = await people(rt);
    const held = await call(agent, "frail_write", { text: "never sent" });
    // Stopped: the call fails at once, nothing reaches the server.
    await rt.runtime.manager.get("frail").stop();
    expect((await approve(held.id, alice.cookie)).status).toBe(200);
    await waitForCallStatus(rt.runtime, held.id, "failed");
    expect((await callRow(rt, held.id))?.errorCode).toBe("server_unavailable");
    expect(work()).toEqual([]);
  });
});

describe("a call for a server that is reconnecting", () => {
  it("an approval given while the server is in backoff waits for it and runs, and its story says it waited", async () => {
    const { rt, work } = await startWithFrail();
    const { agent, alice } = await people(rt);
    const dying = await call(agent, "frail_write_then_die", { text: "first" });
    const next = await call(agent, "frail_write", { text: "second" });
    const backoff = serverState(rt, "frail", "backoff");
    expect((await approve(dying.id, alice.cookie)).status).toBe(200);
    await backoff;
    expect((await approve(next.id, alice.cookie)).status).toBe(200);
    await waitForEvent(
      rt.runtime.bus,
      (e) => e.type === "call" && e.id === next.id && (e.status === "succeeded" || e.status === "failed"),
      { already: async () => ["succeeded", "failed"].includes((await callRow(rt, next.id))?.status ?? "") },
    );
    expect((await callRow(rt, next.id))?.errorMessage ?? null).toBeNull();
    expect((await callRow(rt, next.id))?.status).toBe("succeeded");
    expect(work()).toEqual(["write_then_die first", "write second"]);
    const outcome = (await auditRows(rt, next.id)).find((a) => a.action === "call.succeeded");
    expect(outcome?.detail).toMatch(/waited \d+ ms for server frail to reconnect \(it was in backoff\)/);
  });

  it("a read-only call made while its server is in backoff waits for it instead of failing at once", async () => {
    const { rt } = await startWithFrail();
    const { agent, alice } = await people(rt);
    const dying = await call(agent, "frail_write_then_die", { text: "x" });
    const backoff = serverState(rt, "frail", "backoff");
    expect((await approve(dying.id, alice.cookie)).status).toBe(200);
    await backoff;
    const ran = await call(agent, "frail_echo", { text: "hi" }, 200);
    expect(ran.error).toBeNull();
    expect(ran.status).toBe("succeeded");
  });
});
