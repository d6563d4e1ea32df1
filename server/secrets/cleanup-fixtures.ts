/** What the key tests share: temp dirs and child processes that are gone after each test. */
import type { ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach } from "vitest";

/**
 * Registers an `afterEach` that kills (SIGKILL, awaiting the exit) every child handed to `track`
 * and still running, then removes every dir `tempDir` made. Call once at a test file's top level.
 */
export function cleansUp(prefix: string): { tempDir(): string; track(child: ChildProcess): ChildProcess } {
  const dirs: string[] = [];
  const children: ChildProcess[] = [];
  afterEach(async () => {
    for (const child of children.splice(0)) {
      if (child.exitCode !== null || child.signalCode !== null) continue;
      const gone = new Promise((resolve) => child.once("exit", resolve));
      child.kill("SIGKILL");
      await gone;
    }
    for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
  });
  return {
    tempDir() {
      const dir = mkdtempSync(path.join(tmpdir(), prefix));
      dirs.push(dir);
      return dir;
    },
    track(child) {
      children.push(child);
      return child;
    },
  };
}
