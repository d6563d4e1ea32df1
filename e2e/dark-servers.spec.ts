import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { type BrowserContext, expect, type Page, test } from "@playwright/test";
import { snap } from "./support/fixtures";
import { type Instance, startInstance } from "./support/instance";

/**
 * A config pasted from a desktop MCP client: its `mcpServers` entries never say `enabled`, so
 * they start dark. The Servers page says so in the file's own terms, with the place to change
 * it, and tells such an entry from one switched off on purpose (`"enabled": false`); the start
 * warns of both before anything listens.
 *
 * A Gatehouse of its own (e2e/support/instance.ts) on an empty store, with this spec's config.
 */

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const demoServer = path.join(root, "demo", "server.mjs");
const manyTools = path.join(root, "test", "fixtures", "servers", "many-tools.mjs");
const LONG = "browser_take_a_screenshot_of_the_whole_page_";
const owner = { name: "dora", password: "dora-owner-pass-1" };

const config = {
  mcpServers: {
    demo: {
      command: process.execPath,
      args: [demoServer],
      env: { DEMO_STATE_FILE: "{dir}/demo-state.json" },
      enabled: true,
    },
    // As a desktop client's config has it: no "enabled".
    files: {
      command: process.execPath,
      args: [demoServer],
      env: { DEMO_STATE_FILE: "{dir}/files-state.json" },
    },
    tasks: {
      command: process.execPath,
      args: [demoServer],
      env: { DEMO_STATE_FILE: "{dir}/tasks-state.json" },
      enabled: false,
    },
    // 32 tools against a cap of 4: 28 over it, more than the card shows unfolded.
    crowd: {
      command: process.execPath,
      args: [manyTools],
      // Names long enough to wrap on the card.
      env: { TOOL_COUNT: "30", TOOL_PREFIX: LONG },
      maxTools: 4,
      enabled: true,
    },
  },
  approvals: { expireAfterSeconds: 900, waitSeconds: 60, selfApproval: false },
  catalogue: { descriptionMaxChars: 1024, refreshSeconds: 300 },
};

/** test-results/screenshots…/<name>.png, beside what `snap` writes. */
const shotPath = (name: string) =>
  path.join(
    "test-results",
    process.env.NEXT_DIST_DIR
      ? `screenshots-${process.env.NEXT_DIST_DIR.replace(/[^A-Za-z0-9_-]/g, "_")}`
      : "screenshots",
    `${name}.png`,
  );

test.describe
  .serial("dark servers from a pasted config", () => {
    let instance: Instance;
    let context: BrowserContext;
    let page: Page;
    let configFile: string;
    /** The 1-based line of `"<name>": {` in the config file as written. */
    let lineOf: (name: string) => number;

    test.beforeAll(async ({ browser }) => {
      instance = await startInstance(config);
      configFile = path.join(instance.dir, "gatehouse.json");
      const lines = readFileSync(configFile, "utf8").split("\n");
      lineOf = (name) => lines.findIndex((l) => l.trim() === `"${name}": {`) + 1;
      context = await browser.newContext({ baseURL: instance.baseURL });
      page = await context.newPage();
    });

    test.afterAll(async () => {
      await context?.close();
      await instance?.stop();
    });

    test("the start warns of both dark servers, with their lines", async () => {
      expect(lineOf("files")).toBeGreaterThan(1);
      const log = () => readFileSync(path.join(instance.dir, "server.log"), "utf8");
      await expect
        .poll(log)
        .toContain(
          `2 servers are dark (no "enabled": true): files (line ${lineOf("files")}), ` +
            `tasks (line ${lineOf("tasks")}, "enabled": false)`,
        );
    });

    test("the Servers page says why each is dark and where to switch it on", async () => {
      await page.goto(instance.setupLink);
      await page.getByLabel("Name").fill(owner.name);
      await page.getByLabel("Password", { exact: true }).fill(owner.password);
      await page.getByLabel("Confirm password").fill(owner.password);
      await page.getByRole("button", { name: "Create owner" }).click();
      await expect(page).toHaveURL(/\/servers$/);
      await expect(page.getByTestId("server-demo")).toContainText("ready");

      const files = page.getByTestId("server-files");
      await expect(files).toContainText("dark");
      await expect(files).toContainText(
        'Not switched on: add "enabled": true to this entry in gatehouse.json.',
      );
      await expect(files).toContainText(`${configFile} line ${lineOf("files")}: "files": {`);
      // The old hint claimed the file said something it does not.
      await expect(files).not.toContainText("enabled: false");

      const tasks = page.getByTestId("server-tasks");
      await expect(tasks).toContainText("dark");
      await expect(tasks).toContainText(
        'Switched off: this entry in gatehouse.json says "enabled": false. Change it to true for Gatehouse to dial this server.',
      );
      await expect(tasks).toContainText(`${configFile} line ${lineOf("tasks")}: "tasks": {`);
      await expect(tasks).not.toContainText("Not switched on");

      for (const card of [files, tasks]) {
        await expect(card.getByRole("button", { name: "Reconnect" })).toBeDisabled();
      }
      await snap(page, "dark-servers");
    });

    test("an owner switches a pasted server on from its card, sees it connect, and switches it off", async () => {
      const files = page.getByTestId("server-files");
      // The file's "enabled": false wins: no switch on that card.
      await expect(page.getByTestId("server-tasks").getByRole("button", { name: "Switch on" })).toHaveCount(
        0,
      );
      await expect(files).toContainText('An "enabled" key in gatehouse.json wins over this switch');
      await files.getByRole("button", { name: "Switch on" }).click();
      await expect(files).toContainText("ready");
      await expect(files).toContainText(`Switched on here by ${owner.name}`);
      await expect(files.getByRole("button", { name: "Reconnect" })).toBeEnabled();
      await files.screenshot({ path: shotPath("dark-servers-switched-on-card") });
      await snap(page, "dark-servers-switched-on");

      await files.getByRole("button", { name: "Switch off" }).click();
      await expect(files).toContainText("dark");
      await expect(files).toContainText(
        'Not switched on: add "enabled": true to this entry in gatehouse.json.',
      );
      await expect(files.getByRole("button", { name: "Switch on" })).toBeVisible();
    });

    test("a server's card names the tools over its cap and where to raise maxTools", async () => {
      const crowd = page.getByTestId("server-crowd");
      await expect(crowd).toContainText("ready");
      const cap = crowd.getByTestId("server-cap");
      await expect(cap).toContainText("28 tools over the cap of 4");
      await expect(cap).toContainText('"maxTools" (now 4)');
      // In name order: the first four have rows, the rest wait, long names wrapping in their place.
      await expect(cap.getByRole("listitem").filter({ hasText: `${LONG}tool_003` })).toBeVisible();
      await expect(cap).toContainText("and 16 more");
      await expect(cap).toContainText(`${configFile} line ${lineOf("crowd")}: "crowd": {`);
      await cap.getByText("and 16 more").click();
      await expect(cap.getByRole("listitem").filter({ hasText: `${LONG}tool_029` })).toBeVisible();
      await expect(cap.getByRole("listitem").filter({ hasText: /^has space$/ })).toBeVisible();
      await crowd.screenshot({ path: shotPath("dark-servers-over-cap-card") });
      await snap(page, "dark-servers-over-cap");
    });

    test("a server's history marks where Gatehouse started", async () => {
      const demo = page.getByTestId("server-demo");
      await demo.getByText(/^History \(\d+ changes?\)$/).click();
      const first = demo.getByRole("listitem").filter({ hasText: "Gatehouse started" });
      await expect(first).toHaveCount(1);
      await expect(first).toContainText("connecting");
      await snap(page, "dark-servers-history");
    });
  });
