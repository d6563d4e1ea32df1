import { readFileSync } from "node:fs";
import path from "node:path";
import { test as base, type Page } from "@playwright/test";
import { readState } from "./env";

/** Runs of the demo server's mutating tool, read from its state file. */
export function demoRuns(): number {
  try {
    return (JSON.parse(readFileSync(readState().demoStateFile, "utf8")) as { addNoteRuns: number })
      .addNoteRuns;
  } catch {
    return 0;
  }
}

/** Saves a full-page screenshot under test-results/screenshots/ for people to look at. */
export async function snap(page: Page, name: string, fullPage = true): Promise<void> {
  const dir = process.env.NEXT_DIST_DIR
    ? `screenshots-${process.env.NEXT_DIST_DIR.replace(/[^A-Za-z0-9_-]/g, "_")}`
    : "screenshots";
  await page.screenshot({ path: path.join("test-results", dir, `${name}.png`), fullPage });
}

export const test = base.extend<{ setupLink: string }>({
  // biome-ignore lint/correctness/noEmptyPattern: Playwright fixtures must destructure their first argument.
  baseURL: async ({}, use) => use(readState().baseURL),
  // biome-ignore lint/correctness/noEmptyPattern: Playwright fixtures must destructure their first argument.
  setupLink: async ({}, use) => use(readState().setupLink),
});

export { expect } from "@playwright/test";
