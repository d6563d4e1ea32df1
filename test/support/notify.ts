/**
 * A runtime for the notification tests: the demo tool server and the given config, installed as
 * the process runtime (the route modules read it), resolved once `demo_add_note` has its row and
 * is enabled. What it started is stopped by the `cleanup` list the caller drains after each test.
 */
import { afterEach } from "vitest";
import type { LiveEvent } from "@/lib/api-types";
import type { GatehouseConfig } from "@/server/config";
import { type Answer, type DemoConfig, type Receiver, receiver } from "@/server/notify/notify-fixtures";
import { createRuntime, type Runtime, setRuntime } from "@/server/runtime";
import { tools } from "@/server/store/schema";
import { ADD_NOTE, enableTool, waitForEvent } from "./runtime";

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

export async function startDemoRuntime(
  demo: DemoConfig,
  cleanup: Cleanup,
  opts: { config?: GatehouseConfig; onEvent?: (e: LiveEvent, runtime: Runtime) => void } = {},
): Promise<Runtime> {
  const runtime = createRuntime({ config: opts.config ?? demo.config, dbFile: demo.dbFile });
  setRuntime(runtime);
  const { onEvent } = opts;
  if (onEvent) cleanup.push(runtime.bus.subscribe((e) => onEvent(e, runtime)));
  cleanup.push(async () => {
    await runtime.stop();
    setRuntime(undefined);
    demo.remove();
  });
  const ready = () =>
    runtime.db
      .select()
      .from(tools)
      .all()
      .some((t) => t.localName === ADD_NOTE);
  await waitForEvent(runtime.bus, (e) => e.type === "catalogue" && ready(), {
    already: ready,
    timeoutMs: 20_000,
  });
  enableTool(runtime, ADD_NOTE);
  return runtime;
}
