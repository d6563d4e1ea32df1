/**
 * Catalogue freshness end to end, through a real runtime and its SQLite catalogue: tools/list
 * paging (bounded at MAX_TOOL_PAGES), list_changed refreshes that keep existing rows' status
 * and coalesce bursts, and the periodic refresh. Shared bookkeeping is in lifecycle-fixtures.ts.
 */
import { join } from "node:path";
import { eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { FIXTURES, gatehouse, tempDir, text } from "@/test/support/mcp-harness";
import { waitForEvent } from "@/test/support/runtime";
import { setToolStatus } from "../catalogue/catalogue";
import type { ServerConfig } from "../config";
import { createRuntime, type Runtime } from "../runtime";
import { tools as toolsTable } from "../store/schema";
import { registerLifecycleCleanup, runtimes, SLOW, stdioServer } from "./lifecycle-fixtures";
import { MAX_TOOL_PAGES } from "./supervision";

const PAGED = join(FIXTURES, "paged.mjs");
const GROWING = join(FIXTURES, "growing.mjs");
const DRIFTING = join(FIXTURES, "drifting.mjs");

registerLifecycleCleanup();

describe("catalogue freshness", () => {
  async function startRuntime(servers: ServerConfig[], refreshSeconds = 0): Promise<Runtime> {
    // `gatehouse()` bypasses validateConfig, whose minimum refreshSeconds is 10.
    const runtime = await createRuntime({
      config: gatehouse(servers, refreshSeconds),
      dbFile: join(tempDir(), "gatehouse.db"),
    });
    runtimes.push(runtime);
    return runtime;
  }

  /** remote tool name → status of the catalogue rows of `server`. */
  async function rowsOf(runtime: Runtime, server: string): Promise<Map<string, string>> {
    const rows = await runtime.db
      .select({ name: toolsTable.remoteName, status: toolsTable.status })
      .from(toolsTable)
      .where(eq(toolsTable.server, server));
    return new Map(rows.map((r) => [r.name, r.status]));
  }

  /** Resolves once the catalogue of `server` satisfies `probe` (checked now and on every catalogue event). */
  async function catalogueUntil(
    runtime: Runtime,
    server: string,
    what: string,
    probe: (rows: Map<string, string>) => boolean,
    timeoutMs = 15_000,
  ): Promise<void> {
    const ok = async () => probe(await rowsOf(runtime, server));
    await waitForEvent(runtime.bus, (e) => e.type === "catalogue" && e.server === server && ok(), {
      already: ok,
      timeoutMs,
      what: async () =>
        `${what} (catalogue of ${server}: ${JSON.stringify([...(await rowsOf(runtime, server))])})`,
    });
  }

  async function ready(runtime: Runtime, server: string): Promise<void> {
    const isReady = () => runtime.manager.get(server).snapshot().state === "ready";
    await waitForEvent(runtime.bus, (e) => e.type === "server" && e.name === server && isReady(), {
      already: isReady,
      timeoutMs: 15_000,
      what: () => `${server} to be ready (${JSON.stringify(runtime.manager.get(server).snapshot())})`,
    });
  }

  async function listCount(runtime: Runtime, server: string): Promise<number> {
    return Number(text(await runtime.manager.callTool(server, "list_count", {})));
  }

  it(
    "tools/list follows nextCursor: 25 tools over 3 pages all reach the catalogue",
    async () => {
      const runtime = await startRuntime([stdioServer("paged", PAGED)]);
      await catalogueUntil(runtime, "paged", "25 rows", (rows) => rows.size === 25);
      await ready(runtime, "paged");
      const expected = [
        "list_count",
        ...Array.from({ length: 24 }, (_, i) => `tool_${String(i + 1).padStart(2, "0")}`),
      ];
      const rows = await rowsOf(runtime, "paged");
      expect([...rows.keys()].sort()).toEqual(expected.sort());
      expect(new Set(rows.values())).toEqual(new Set(["proposed"]));
      expect(runtime.manager.get("paged").snapshot().listedTools).toBe(25);
      expect(await listCount(runtime, "paged")).toBe(3);
    },
    SLOW,
  );

  it(
    "a server that never stops paging is read for MAX_TOOL_PAGES pages, and still becomes ready",
    async () => {
      const runtime = await startRuntime([
        stdioServer("endless", PAGED, { env: { ENDLESS: "1", PAGE_SIZE: "5" } }),
      ]);
      const t0 = performance.now();
      await ready(runtime, "endless");
      const readyMs = performance.now() - t0;
      expect(runtime.manager.get("endless").snapshot().listedTools).toBe(MAX_TOOL_PAGES * 5);
      expect((await rowsOf(runtime, "endless")).size).toBe(MAX_TOOL_PAGES * 5);
      expect(await listCount(runtime, "endless")).toBe(MAX_TOOL_PAGES);
      console.info(
        `[timing] endless paging: ready after ${readyMs.toFixed(0)} ms, ${MAX_TOOL_PAGES} pages read`,
      );
    },
    SLOW,
  );

  it(
    "list_changed refreshes the catalogue: the new tool is proposed and existing rows keep their status",
    async () => {
      const runtime = await startRuntime([stdioServer("growing", GROWING)]);
      await ready(runtime, "growing");
      expect(await rowsOf(runtime, "growing")).toEqual(
        new Map([
          ["grow", "proposed"],
          ["list_count", "proposed"],
        ]),
      );
      await setToolStatus(runtime.db, { localName: "growing_grow", status: "enabled", actor: "test" });
      await setToolStatus(runtime.db, { localName: "growing_list_count", status: "disabled", actor: "test" });

      const t0 = performance.now();
      expect(text(await runtime.manager.callTool("growing", "grow", {}))).toBe("grown_1");
      await catalogueUntil(runtime, "growing", "a row for grown_1", (rows) => rows.has("grown_1"));
      const ms = performance.now() - t0;
      expect(await rowsOf(runtime, "growing")).toEqual(
        new Map([
          ["grow", "enabled"],
          ["grown_1", "proposed"],
          ["list_count", "disabled"],
        ]),
      );
      expect(runtime.manager.get("growing").snapshot().listedTools).toBe(3);
      console.info(`[timing] list_changed: new row ${ms.toFixed(0)} ms after the grow call started`);
    },
    SLOW,
  );

  it(
    "a burst of 5 list_changed notifications leads to far fewer than 5 tools/list requests",
    async () => {
      const runtime = await startRuntime([stdioServer("growing", GROWING)]);
      await ready(runtime, "growing");
      const before = await listCount(runtime, "growing");
      expect(before).toBe(1);

      // The fixture sends all 5 notifications before it answers, on the same ordered stream: by
      // the time the call resolves, every refresh they cause has been scheduled, and the first
      // catalogue event that has grown_1 is that refresh.
      expect(text(await runtime.manager.callTool("growing", "grow", { notify: 5 }))).toBe("grown_1");
      await catalogueUntil(runtime, "growing", "a row for grown_1", (rows) => rows.has("grown_1"));
      const lists = (await listCount(runtime, "growing")) - before;
      expect(lists).toBeGreaterThanOrEqual(1);
      expect(lists).toBeLessThanOrEqual(2);
      console.info(`[timing] list_changed burst: 5 notifications → ${lists} tools/list request(s)`);
    },
    SLOW,
  );

  it(
    "the periodic refresh (refreshSeconds 1) finds a tool added without any notification",
    async () => {
      const runtime = await startRuntime([stdioServer("drifting", DRIFTING)], 1);
      await ready(runtime, "drifting");
      await catalogueUntil(runtime, "drifting", "a row for steady", (rows) => rows.has("steady"));
      expect(await rowsOf(runtime, "drifting")).toEqual(new Map([["steady", "proposed"]]));
      const t0 = performance.now();
      await catalogueUntil(runtime, "drifting", "a row for late", (rows) => rows.has("late"), 10_000);
      const ms = performance.now() - t0;
      expect(await rowsOf(runtime, "drifting")).toEqual(
        new Map([
          ["late", "proposed"],
          ["steady", "proposed"],
        ]),
      );
      console.info(
        `[timing] periodic refresh: "late" catalogued ${ms.toFixed(0)} ms after ready (refreshSeconds 1)`,
      );
    },
    SLOW,
  );
});
