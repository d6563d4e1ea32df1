/**
 * A runtime for the notification tests: the demo tool server and the given config, installed as
 * the process runtime (the route modules read it), resolved once `demo_add_note` has its row and
 * is enabled. What it started is stopped by the `cleanup` list the caller drains after each test.
 */
import type { LiveEvent } from "@/lib/api-types";
import type { GatehouseConfig } from "@/server/config";
import type { DemoConfig } from "@/server/notify/notify-fixtures";
import { createRuntime, type Runtime, setRuntime } from "@/server/runtime";
import { tools } from "@/server/store/schema";
import { ADD_NOTE, enableTool, waitForEvent } from "./runtime";

export async function startDemoRuntime(
  demo: DemoConfig,
  cleanup: (() => Promise<void> | void)[],
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
