import { defineConfig } from "@playwright/test";
import { chromiumLaunch } from "./e2e/support/chromium";

/**
 * End-to-end tests in Debian's Chromium against a production build (`npm run build` first).
 * global-setup starts Gatehouse on a free loopback port with a temporary store and config;
 * specs get its address through the `baseURL` fixture (e2e/support/fixtures.ts).
 */
export default defineConfig({
  testDir: "e2e",
  globalSetup: "./e2e/support/global-setup.ts",
  globalTeardown: "./e2e/support/global-teardown.ts",
  fullyParallel: false,
  workers: 1,
  forbidOnly: true,
  retries: 0,
  timeout: 60_000,
  expect: { timeout: 10_000 },
  // Separate per build dir (NEXT_DIST_DIR), so two runs in one checkout do not mix results.
  outputDir: `test-results/e2e${process.env.NEXT_DIST_DIR ? `-${process.env.NEXT_DIST_DIR.replace(/[^A-Za-z0-9_-]/g, "_")}` : ""}`,
  use: {
    browserName: "chromium",
    headless: true,
    screenshot: "only-on-failure",
    trace: "retain-on-failure",
    launchOptions: chromiumLaunch,
  },
  projects: [
    { name: "journey", testMatch: /journey\.spec\.ts/ },
    { name: "roles", testMatch: /roles\.spec\.ts/, dependencies: ["journey"] },
    { name: "looks", testMatch: /looks\.spec\.ts/, dependencies: ["journey"] },
    { name: "governance", testMatch: /governance\.spec\.ts/, dependencies: ["journey"] },
    { name: "confirm", testMatch: /confirm\.spec\.ts/, dependencies: ["journey"] },
    { name: "agent-mcp", testMatch: /mcp\.spec\.ts/, dependencies: ["journey"] },
    { name: "tasks", testMatch: /tasks\.spec\.ts/, dependencies: ["journey"] },
    { name: "reach", testMatch: /reach\.spec\.ts/, dependencies: ["journey"] },
    { name: "notify", testMatch: /notify\.spec\.ts/, dependencies: ["journey"] },
    // After looks: its "/grants without any grant" screenshot needs a store no grant was made in yet.
    { name: "grants", testMatch: /grants\.spec\.ts/, dependencies: ["journey", "looks"] },
    // After grants: its role edits need olive to be the only owner, which this spec also checks.
    { name: "people", testMatch: /people\.spec\.ts/, dependencies: ["journey", "grants"] },
    { name: "oauth", testMatch: /oauth\.spec\.ts/, dependencies: ["journey"] },
    // Its own Gatehouse on an empty store: a new owner's first minutes.
    { name: "first-minutes", testMatch: /first-minutes\.spec\.ts/ },
    { name: "tool-sets", testMatch: /tool-sets\.spec\.ts/ },
    // Its own Gatehouse sending traces to a receiver the spec starts.
    { name: "traces", testMatch: /traces\.spec\.ts/ },
    { name: "try-form", testMatch: /try-form\.spec\.ts/ },
    { name: "dark-servers", testMatch: /dark-servers\.spec\.ts/ },
    // Its own Gatehouse with a server whose tools fail with hostile error texts.
    { name: "call-pages", testMatch: /call-pages\.spec\.ts/ },
    // Its own PostgreSQL and three replicas of the build behind a round-robin proxy (§14).
    { name: "replicas", testMatch: /replicas\.spec\.ts/ },
  ],
});
