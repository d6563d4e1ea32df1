/**
 * A server that floods `notifications/tools/list_changed` and flips a tool's definition on every
 * listing (test/fixtures/servers/flapping.mjs, a real child process) is re-listed at a bounded
 * pace, the status says so, the catalogue keeps one feed row for the flapping tool and the bus
 * carries one catalogue event per listing, not one per notification.
 *
 * Time is virtual and moves only in the test's ticks: a ManualClock handed to the supervisor,
 * or the faked clock (timers and Date) under a whole runtime. Each step waits on events: the
 * listing the supervisor started reaching it, then the server's next notifications arriving.
 */
import { join } from "node:path";
import type { Tool } from "@modelcontextprotocol/client";
import { asc, eq } from "drizzle-orm";
import { describe, expect, it, vi } from "vitest";
import { FIXTURES, gatehouse, quiet, tempDir, text } from "@/test/support/mcp-harness";
import { createRuntime } from "../runtime";
import { first } from "../store/db";
import { catalogueChanges, tools } from "../store/schema";
import {
  realClearTimeout,
  realSetTimeout,
  registerLifecycleCleanup,
  runtimes,
  SLOW,
  stdioServer,
} from "./lifecycle-fixtures";
import { ManualClock } from "./pacing-fixtures";
import { pacingNote, REFRESH_PACING } from "./refresh-pacing";
import type { SupervisorSnapshot } from "./supervision";
import { ServerSupervisor } from "./supervisor";

const FLAPPING = join(FIXTURES, "flapping.mjs");
/** How much virtual time each test floods for, and the step time moves by. */
const FLOOD_MS = 60_000;
const TICK_MS = 100;

registerLifecycleCleanup();

/** Something to wait on: `until` resolves once `probe` holds, checked now and at every `changed()`. */
function waiter() {
  const listeners = new Set<() => void>();
  return {
    changed() {
      for (const l of [...listeners]) l();
    },
    until(what: string, probe: () => boolean, timeoutMs = 15_000): Promise<void> {
      return new Promise((resolve, reject) => {
        const check = () => {
          if (!probe()) return;
          realClearTimeout(timer);
          listeners.delete(check);
          resolve();
        };
        const timer = realSetTimeout(() => {
          listeners.delete(check);
          reject(new Error(`no ${what} within ${timeoutMs} ms`));
        }, timeoutMs);
        listeners.add(check);
        check();
      });
    },
  };
}

/**
 * Counts `supervisor`'s re-lists and the notifications that ask for one, and floods it for
 * `FLOOD_MS` of virtual time: moves time by `TICK_MS` until a re-list starts, waits for its
 * listing to arrive (`listings()` grows) and for the server's next notification, and repeats.
 */
function flooding(supervisor: ServerSupervisor, advance: (ms: number) => void, now: () => number) {
  const w = waiter();
  let asked = 0;
  let relists = 0;
  let lastRefresh: Promise<void> = Promise.resolve();
  const schedule = supervisor.scheduleRefresh.bind(supervisor);
  const refresh = supervisor.refreshTools.bind(supervisor);
  vi.spyOn(supervisor, "scheduleRefresh").mockImplementation(() => {
    asked++;
    schedule();
    w.changed();
  });
  vi.spyOn(supervisor, "refreshTools").mockImplementation(() => {
    relists++;
    lastRefresh = refresh();
    return lastRefresh;
  });
  return {
    changed: () => w.changed(),
    counts: () => ({ asked, relists }),
    async run(listings: () => number): Promise<void> {
      // Ready, listed once, and flooding: a re-list before `ready` would be skipped.
      const ready = () => supervisor.snapshot().state === "ready";
      await w.until("ready, listed and notified", () => ready() && listings() > 0 && asked > 0);
      const end = now() + FLOOD_MS;
      while (now() < end) {
        const before = relists;
        const seen = listings();
        while (relists === before && now() < end) advance(TICK_MS);
        if (relists === before) break;
        const askedBefore = asked;
        await w.until(`listing ${seen + 1}`, () => listings() > seen);
        await lastRefresh;
        await w.until("the next notification", () => asked > askedBefore);
      }
    },
  };
}

describe("a server flooding list_changed is re-listed at a bounded pace", () => {
  it(
    "re-lists stay within the bucket (burst, then one per interval) and the status carries the note",
    async () => {
      const clock = new ManualClock();
      const listed: Tool[][] = [];
      const states: SupervisorSnapshot[] = [];
      let flood: ReturnType<typeof flooding> | null = null;
      const supervisor = new ServerSupervisor(stdioServer("flapping", FLAPPING), {
        log: quiet,
        refreshSeconds: 0,
        clock,
        onState: (s) => {
          states.push(s);
          flood?.changed();
        },
        onTools: (_server, tools) => {
          listed.push(tools);
          flood?.changed();
        },
      });
      runtimes.push(supervisor);
      flood = flooding(
        supervisor,
        (ms) => clock.advance(ms),
        () => clock.now(),
      );
      await supervisor.start();
      await flood.run(() => listed.length);

      const { asked, relists } = flood.counts();
      const { burst, intervalMs } = REFRESH_PACING;
      // The first listing of the connection, then the bucket: burst, and one per intervalMs.
      expect(listed.length).toBe(1 + relists);
      expect(relists).toBeLessThanOrEqual(burst + FLOOD_MS / intervalMs);
      expect(relists).toBeGreaterThanOrEqual(burst + FLOOD_MS / intervalMs - 1);
      // Every listing brought 20 notifications: the flood was real.
      expect(asked).toBeGreaterThanOrEqual(20 * relists);
      // The fixture served exactly the listings the supervisor made.
      expect(Number(text(await supervisor.callTool("list_count", {})))).toBe(listed.length);
      expect(listed.at(-1)?.find((t) => t.name === "flappy")?.description).toBe(`version ${listed.length}`);

      const note = pacingNote(REFRESH_PACING);
      expect(supervisor.snapshot().refreshNote).toBe(note);
      expect(supervisor.snapshot().state).toBe("ready");
      // Published like any status change, so the Servers page learns of it.
      expect(states.some((s) => s.refreshNote === note)).toBe(true);
      console.info(`[flood] ${asked} notifications → ${relists} re-lists in ${FLOOD_MS} ms of virtual time`);
    },
    SLOW,
  );

  it(
    "through a whole runtime: one catalogue event per listing, one feed row for the flapping tool",
    async () => {
      vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "setInterval", "clearInterval", "Date"] });
      const runtime = await createRuntime({
        config: gatehouse([stdioServer("flapping", FLAPPING)]),
        dbFile: join(tempDir(), "gatehouse.db"),
      });
      runtimes.push(runtime);
      let catalogueEvents = 0;
      let flood: ReturnType<typeof flooding> | null = null;
      runtime.bus.subscribe((e) => {
        if (e.type === "catalogue" && e.server === "flapping") catalogueEvents++;
        flood?.changed();
      });
      const supervisor = runtime.manager.get("flapping") as ServerSupervisor;
      flood = flooding(
        supervisor,
        (ms) => vi.advanceTimersByTime(ms),
        () => Date.now(),
      );
      await flood.run(() => catalogueEvents);

      const { asked, relists } = flood.counts();
      const { burst, intervalMs } = REFRESH_PACING;
      expect(relists).toBeLessThanOrEqual(burst + FLOOD_MS / intervalMs);
      expect(asked).toBeGreaterThanOrEqual(20 * relists);
      // One event per listing (the first one's included), however many notifications came.
      expect(catalogueEvents).toBe(1 + relists);
      expect(supervisor.snapshot().refreshNote).toBe(pacingNote(REFRESH_PACING));

      const rows = await runtime.db
        .select()
        .from(catalogueChanges)
        .where(eq(catalogueChanges.server, "flapping"))
        .orderBy(asc(catalogueChanges.id));
      expect(rows.map((r) => `${r.kind} ${r.tool}`)).toEqual([
        "added list_count",
        "added flappy",
        "changed flappy",
      ]);
      const changed = JSON.parse(rows[2]?.detail ?? "{}");
      expect(changed).toMatchObject({ status: "proposed", summary: ["description"] });
      // The one row shows the latest definition, changed from the first one listed.
      const row = await first(runtime.db.select().from(tools).where(eq(tools.localName, "flapping_flappy")));
      expect(row?.description).toBe(`version ${1 + relists}`);
      expect(changed.toHash).toBe(row?.definitionHash.slice(0, 12));
      expect(changed.fromHash).not.toBe(changed.toHash);
      console.info(
        `[flood] runtime: ${asked} notifications → ${relists} re-lists, ${catalogueEvents} catalogue events`,
      );
    },
    SLOW,
  );
});
