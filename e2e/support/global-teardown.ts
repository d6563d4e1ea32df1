import { existsSync, rmSync } from "node:fs";
import { RECEIVERS, readState, STATE_FILE } from "./env";

/**
 * Stops Gatehouse (SIGTERM to its process group, so tool servers go too), then the SMTP server and
 * webhook receiver global-setup started in this process — in that order, so no delivery of a
 * Gatehouse still running meets a closed port.
 */
export default async function globalTeardown(): Promise<void> {
  try {
    await stopGatehouse();
  } finally {
    const stopReceivers = (globalThis as Record<symbol, unknown>)[RECEIVERS];
    if (typeof stopReceivers === "function") await (stopReceivers as () => Promise<void>)();
  }
}

async function stopGatehouse(): Promise<void> {
  if (!existsSync(STATE_FILE)) return;
  const state = readState();
  try {
    process.kill(-state.pid, "SIGTERM");
  } catch {
    return;
  }
  const deadline = Date.now() + 10_000;
  await new Promise<void>((resolve) => {
    const check = () => {
      try {
        process.kill(-state.pid, 0);
      } catch {
        return resolve();
      }
      if (Date.now() > deadline) {
        process.kill(-state.pid, "SIGKILL");
        return resolve();
      }
      setTimeout(check, 100);
    };
    check();
  });
  if (!process.env.E2E_KEEP) rmSync(state.dir, { recursive: true, force: true });
  rmSync(STATE_FILE, { force: true });
}
