import { readFileSync } from "node:fs";
import path from "node:path";
import { test as base, expect, type Page } from "@playwright/test";
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

/** Creates the first owner on the setup page at `setupLink`; resolves on the Servers page, signed in. */
export async function createFirstOwner(
  page: Page,
  setupLink: string,
  owner: { name: string; password: string },
): Promise<void> {
  await page.goto(setupLink);
  await page.getByLabel("Name").fill(owner.name);
  await page.getByLabel("Password", { exact: true }).fill(owner.password);
  await page.getByLabel("Confirm password").fill(owner.password);
  await page.getByRole("button", { name: "Create owner" }).click();
  await expect(page).toHaveURL(/\/servers$/);
}

export const test = base.extend<{ setupLink: string }>({
  // biome-ignore lint/correctness/noEmptyPattern: Playwright fixtures must destructure their first argument.
  baseURL: async ({}, use) => use(readState().baseURL),
  // biome-ignore lint/correctness/noEmptyPattern: Playwright fixtures must destructure their first argument.
  setupLink: async ({}, use) => use(readState().setupLink),
});

export { expect } from "@playwright/test";
