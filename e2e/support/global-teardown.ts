import { existsSync, rmSync } from "node:fs";
import { RECEIVERS, readState, STATE_FILE } from "./env";

/**
 * Stops Gatehouse (SIGTERM to its process group, so tool servers go too), then the OAuth
 * authorization and resource servers and the SMTP server and webhook receiver global-setup
 * started — in that order, so no request of a Gatehouse still running meets a closed port.
 */
export default async function globalTeardown(): Promise<void> {
  if (!existsSync(STATE_FILE)) return stopReceivers();
  const state = readState();
  try {
    await stopProcess(-state.pid);
  } finally {
    try {
      await Promise.all(state.oauth.pids.map((pid) => stopProcess(pid)));
    } finally {
      await stopReceivers();
    }
  }
  if (!process.env.E2E_KEEP) rmSync(state.dir, { recursive: true, force: true });
  rmSync(STATE_FILE, { force: true });
}

async function stopReceivers(): Promise<void> {
  const stop = (globalThis as Record<symbol, unknown>)[RECEIVERS];
  if (typeof stop === "function") await (stop as () => Promise<void>)();
}

/**
 * SIGTERM to `pid` (a negative one is a process group), then SIGKILL if it is still there after
 * 10 s; resolves once it is gone. Exits are polled: these are not children of a handle this
 * process still holds.
 */
async function stopProcess(pid: number): Promise<void> {
  try {
    process.kill(pid, "SIGTERM");
  } catch {
    return;
  }
  const deadline = Date.now() + 10_000;
  await new Promise<void>((resolve) => {
    const check = () => {
      try {
        process.kill(pid, 0);
      } catch {
        return resolve();
      }
      if (Date.now() > deadline) {
        process.kill(pid, "SIGKILL");
        return resolve();
      }
      setTimeout(check, 100);
    };
    check();
  });
}
