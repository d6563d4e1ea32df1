import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import type Database from "better-sqlite3";
import { afterEach, describe, expect, it } from "vitest";
import { sqliteOf } from "@/server/store/db";
import {
  bodyOf,
  createAgentToken,
  enableTool,
  LIST_NOTES,
  request,
  startTestRuntime,
  type TestRuntime,
} from "@/test/support/runtime";

/**
 * A store that cannot grow: its calls up to then stay intact and readable, every refused request
 * says so plainly, and nothing half-written is left. Two ways to fill it: SQLite's own page
 * limit on the file (`max_page_count`, works anywhere) and a real full filesystem (a small
 * tmpfs, which needs root to mount).
 */

let rt: TestRuntime | null = null;
let mounted: string | null = null;
afterEach(async () => {
  await rt?.stop();
  rt = null;
  if (mounted) {
    execFileSync("umount", [mounted]);
    rmSync(mounted, { recursive: true, force: true });
    mounted = null;
  }
});

/** A call's answer (the call itself) or an error. */
interface CallAnswer {
  id?: string;
  status?: string;
  error?: { code: string; message: string };
}

/** Makes read-only calls until the store refuses one; returns the stored ones and the refusal. */
async function callUntilFull(
  agent: string,
): Promise<{ stored: string[]; refusal: Response; body: CallAnswer }> {
  const stored: string[] = [];
  // A safety net for a store that never fills: each call writes a row and its audit entries.
  for (let i = 0; i < 5000; i++) {
    const res = await request("POST", "/api/calls", {
      bearer: agent,
      body: { tool: LIST_NOTES, arguments: {} },
    });
    const body = await bodyOf<CallAnswer>(res);
    if (res.status >= 300) return { stored, refusal: res, body };
    if (body.id) stored.push(body.id);
  }
  throw new Error("the store never filled up");
}

async function expectIntact(agent: string, stored: string[]): Promise<void> {
  expect(stored.length).toBeGreaterThan(0);
  for (const id of stored) {
    const res = await request("GET", `/api/calls/${id}`, { bearer: agent });
    expect(res.status).toBe(200);
    expect((await bodyOf<{ status: string }>(res)).status).toBe("succeeded");
  }
}

/** The refusal a full store gives: before the tool ran, "nothing was saved"; after, "do not repeat it". */
function expectFullRefusal(refusal: Response, body: CallAnswer): void {
  if (refusal.status === 507) {
    expect(body.error?.code).toBe("store_full");
    expect(body.error?.message).toContain("disk is full");
  } else {
    expect(refusal.status).toBe(500);
    expect(body.error?.message).toContain("do not repeat it");
  }
}

/** The runtime's SQLite connection (this file is about SQLite alone). */
function connection(t: TestRuntime): Database.Database {
  const sqlite = sqliteOf(t.runtime.db);
  if (!sqlite) throw new Error("not a SQLite store");
  return sqlite;
}

function callRows(t: TestRuntime): { status: string; n: number }[] {
  return connection(t)
    .prepare("SELECT status, count(*) AS n FROM calls GROUP BY status ORDER BY status")
    .all() as { status: string; n: number }[];
}

describe("a store that cannot grow", () => {
  it("keeps every committed call readable, refuses the next with store_full, and works again once there is room", async () => {
    rt = await startTestRuntime();
    await enableTool(rt.runtime, LIST_NOTES);
    const agent = await createAgentToken(rt.runtime, "filler");
    const sqlite = connection(rt);
    const pages = sqlite.pragma("page_count", { simple: true }) as number;
    // The file may not grow past a few pages more than it has now.
    sqlite.pragma(`max_page_count = ${pages + 8}`);

    const { stored, refusal, body } = await callUntilFull(agent);
    expectFullRefusal(refusal, body);
    await expectIntact(agent, stored);
    // Nothing half-written: the stored calls, plus at most the one whose outcome could not be saved.
    const rows = callRows(rt);
    const succeeded = rows.find((r) => r.status === "succeeded")?.n ?? 0;
    expect(succeeded).toBe(stored.length);
    expect(rows.filter((r) => r.status !== "succeeded").reduce((n, r) => n + r.n, 0)).toBeLessThanOrEqual(1);

    sqlite.pragma("max_page_count = 1073741823");
    const again = await request("POST", "/api/calls", {
      bearer: agent,
      body: { tool: LIST_NOTES, arguments: {} },
    });
    expect(again.status).toBe(200);
  }, 60_000);

  const root = process.getuid?.() === 0;
  // Mounting a filesystem needs root; the page-limit case above covers the same code path anywhere.
  it.skipIf(!root)(
    "on a full filesystem (a 3 MB tmpfs) keeps every committed call readable and answers store_full",
    async () => {
      const dir = mkdtempSync(path.join(tmpdir(), "gatehouse-full-"));
      execFileSync("mount", ["-t", "tmpfs", "-o", "size=3m", "tmpfs", dir]);
      mounted = dir;
      // The runtime removes its directory on stop; the mount point itself is ours.
      rt = await startTestRuntime({ dir: path.join(dir, "store") });
      await enableTool(rt.runtime, LIST_NOTES);
      const agent = await createAgentToken(rt.runtime, "filler");

      const { stored, refusal, body } = await callUntilFull(agent);
      expectFullRefusal(refusal, body);
      await expectIntact(agent, stored);
    },
    120_000,
  );
});
