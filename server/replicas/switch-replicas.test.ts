/**
 * A server switched on or off from the Servers page of one replica is switched on every replica
 * of the store (its switch is in `server_switches`; the others follow on the event it causes), and
 * a stdio one then runs on exactly one of them. Two real runtimes on one PostgreSQL database and
 * the demo server, real programs; on SQLite (one process per store) there is nobody to follow.
 */
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { DEMO_SERVER, startTestRuntime, type TestRuntime } from "@/test/support/runtime";
import { testDialect } from "@/test/support/store";
import { serverViews } from "../servers/status";
import { switchServer } from "../servers/switch";
import { recordedHolder } from "./replica-fixtures";

const LEASE_MS = 2_000;
/** Within the lease plus a margin for a loaded machine: a functional bound, not a timing claim. */
const WITHIN_MS = LEASE_MS + 8_000;

const started: TestRuntime[] = [];
afterEach(async () => {
  for (const rt of started.splice(0).reverse()) await rt.stop();
});

/** Replica A, then B on its database, each with `pasted`: the demo server with no `enabled` key. */
async function twoReplicas(): Promise<{ a: TestRuntime; b: TestRuntime }> {
  const pasted = (dir: string) => ({
    pasted: { command: "node", args: [DEMO_SERVER], env: { DEMO_STATE_FILE: path.join(dir, "pasted.json") } },
  });
  const { mkdtempSync } = await import("node:fs");
  const { tmpdir } = await import("node:os");
  const dirA = mkdtempSync(path.join(tmpdir(), "gh-switch-a-"));
  const a = await startTestRuntime({ dir: dirA, servers: pasted(dirA), replicaLeaseMs: LEASE_MS });
  started.push(a);
  const dirB = mkdtempSync(path.join(tmpdir(), "gh-switch-b-"));
  const b = await startTestRuntime({
    dir: dirB,
    servers: pasted(dirB),
    replicaLeaseMs: LEASE_MS,
    ...(a.databaseUrl ? { databaseUrl: a.databaseUrl } : {}),
  });
  started.push(b);
  return { a, b };
}

const runsOn = (rt: TestRuntime) => rt.runtime.holding?.holds("pasted") ?? false;

describe.runIf(testDialect === "postgres")("switches across replicas", () => {
  it("switched on at one replica, a server is on at every replica and runs on exactly one; switched off at another, it runs nowhere", async () => {
    const { a, b } = await twoReplicas();
    expect(a.runtime.manager.get("pasted").config.enabled).toBe(false);
    expect(b.runtime.manager.get("pasted").config.enabled).toBe(false);

    await switchServer(a.runtime.manager, a.runtime.db, { name: "pasted", on: true, actor: "olga" });
    await expect
      .poll(() => b.runtime.manager.get("pasted").config.enabled, { timeout: WITHIN_MS })
      .toBe(true);
    await expect.poll(() => runsOn(a) || runsOn(b), { timeout: WITHIN_MS }).toBe(true);
    expect(runsOn(a) && runsOn(b)).toBe(false);
    const holder = runsOn(a) ? a : b;
    const other = holder === a ? b : a;
    await expect
      .poll(() => other.runtime.manager.get("pasted").snapshot().state, { timeout: WITHIN_MS })
      .toBe("ready");
    // The Servers page of the other replica says where it runs.
    const shown = (await serverViews(other.runtime.manager, other.runtime.db)).find(
      (s) => s.name === "pasted",
    );
    expect(shown?.replica).toEqual({ label: expect.stringContaining("pid"), here: false });
    const onHolder = (await serverViews(holder.runtime.manager, holder.runtime.db)).find(
      (s) => s.name === "pasted",
    );
    expect(onHolder?.replica?.here).toBe(true);

    await switchServer(b.runtime.manager, b.runtime.db, { name: "pasted", on: false, actor: "olga" });
    await expect
      .poll(() => a.runtime.manager.get("pasted").config.enabled, { timeout: WITHIN_MS })
      .toBe(false);
    await expect.poll(() => runsOn(a) || runsOn(b), { timeout: WITHIN_MS }).toBe(false);
    await expect.poll(() => recordedHolder(a.runtime, "pasted"), { timeout: WITHIN_MS }).toBeNull();
    expect(holder.runtime.manager.get("pasted").snapshot().state).toBe("dark");
  }, 90_000);

  it("the demo server, on in the file, is shown on each replica's Servers page with the replica that runs it", async () => {
    const { a, b } = await twoReplicas();
    await expect
      .poll(() => recordedHolder(a.runtime, "demo"), { timeout: WITHIN_MS })
      .toBe(a.runtime.replica.id);
    const onA = (await serverViews(a.runtime.manager, a.runtime.db)).find((s) => s.name === "demo");
    const onB = (await serverViews(b.runtime.manager, b.runtime.db)).find((s) => s.name === "demo");
    expect(onA?.replica).toEqual({ label: onB?.replica?.label, here: true });
    expect(onB?.replica?.here).toBe(false);
    expect(onB?.replica?.label).toMatch(/ pid \d+$/);
  }, 90_000);
});
