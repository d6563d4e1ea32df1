/**
 * A runtime for the notification tests: the demo tool server and the given config, installed as
 * the process runtime (the route modules read it), resolved once `demo_add_note` has its row and
 * is enabled, on the demo's SQLite file or (postgres project) a fresh PostgreSQL database. What
 * it started is stopped by the `cleanup` list the caller drains after each test.
 */
import { afterEach } from "vitest";
import type { LiveEvent } from "@/lib/api-types";
import type { GatehouseConfig } from "@/server/config";
import { type Answer, type DemoConfig, type Receiver, receiver } from "@/server/notify/notify-fixtures";
import { createRuntime, type Runtime, setRuntime } from "@/server/runtime";
import { loadSecretKey } from "@/server/secrets";
import { closeDb, type Db, openStore } from "@/server/store/db";
import type { StoreLocation } from "@/server/store/location";
import { tools } from "@/server/store/schema";
import { ADD_NOTE, enableTool, waitForEvent } from "./runtime";
import { freshDatabaseUrl, testDialect } from "./store";

/** What a test started, stopped after it in reverse order. */
export type Cleanup = (() => Promise<void> | void)[];

/** Registers an `afterEach` that drains the returned list, last in first out. */
export function registerCleanup(): Cleanup {
  const cleanup: Cleanup = [];
  afterEach(async () => {
    for (const fn of cleanup.splice(0).reverse()) await fn();
  });
  return cleanup;
}

/** A webhook receiver on 127.0.0.1 answering `answers` in turn, closed after the test. */
export async function startReceiver(cleanup: Cleanup, answers?: Answer[]): Promise<Receiver> {
  const rx = await receiver(answers);
  cleanup.push(() => rx.close());
  return rx;
}

const locations = new WeakMap<DemoConfig, Promise<StoreLocation>>();

/**
 * Where `demo`'s runtime keeps its store: its SQLite file, or in the postgres project a fresh
 * database, the same one for every use of `demo` (a test that prepares the store first).
 */
export function demoStoreLocation(demo: DemoConfig): Promise<StoreLocation> {
  let location = locations.get(demo);
  if (!location) {
    location =
      testDialect === "postgres"
        ? freshDatabaseUrl().then((url) => ({ dialect: "postgres", url }))
        : Promise.resolve({ dialect: "sqlite", file: demo.dbFile });
    locations.set(demo, location);
  }
  return location;
}

/** Opens `demo`'s store (migrated) before its runtime starts, hands it to `fill`, and closes it. */
export async function prepareDemoStore(demo: DemoConfig, fill: (db: Db) => Promise<void>): Promise<void> {
  const db = await openStore(await demoStoreLocation(demo));
  try {
    await fill(db);
  } finally {
    await closeDb(db);
  }
}

/** The key a runtime on PostgreSQL must be given (it has no key file beside a store). */
const secretKey = loadSecretKey({ env: { GATEHOUSE_SECRET_KEY: "b".repeat(64) }, dbFile: ":memory:" });

export async function startDemoRuntime(
  demo: DemoConfig,
  cleanup: Cleanup,
  opts: { config?: GatehouseConfig; onEvent?: (e: LiveEvent, runtime: Runtime) => void } = {},
): Promise<Runtime> {
  const location = await demoStoreLocation(demo);
  const runtime = await createRuntime({
    config: opts.config ?? demo.config,
    dbFile: demo.dbFile,
    ...(location.dialect === "postgres" ? { databaseUrl: location.url, secretKey } : {}),
  });
  setRuntime(runtime);
  const { onEvent } = opts;
  if (onEvent) cleanup.push(runtime.bus.subscribe((e) => onEvent(e, runtime)));
  cleanup.push(async () => {
    await runtime.stop();
    setRuntime(undefined);
    demo.remove();
  });
  const ready = async () =>
    (await runtime.db.select({ name: tools.localName }).from(tools)).some((t) => t.name === ADD_NOTE);
  await waitForEvent(runtime.bus, async (e) => e.type === "catalogue" && (await ready()), {
    already: ready,
    timeoutMs: 20_000,
  });
  await enableTool(runtime, ADD_NOTE);
  return runtime;
}
