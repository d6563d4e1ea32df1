import { readFileSync } from "node:fs";
import { E2E_SECRET, people, readState } from "./support/env";
import { expect, snap, test } from "./support/fixtures";

/**
 * What the owner sees when servers misbehave: a crowded server (202 tools, a 60-character
 * name, markup and bidi characters in a description), one that cannot start, and a dark one.
 */
test.describe("pages under stress", () => {
  test.beforeEach(async ({ page }) => {
    await page.goto("/login");
    await page.getByLabel("Name").fill(people.owner.name);
    await page.getByLabel("Password").fill(people.owner.password);
    await page.getByRole("button", { name: "Sign in" }).click();
    await expect(page).toHaveURL(/\/servers$/);
  });

  test("the servers page shows a failing server's error and a dark server as dark", async ({ page }) => {
    // Its process never starts: backoff, then failed once the crash loop limit is reached.
    await expect(page.getByTestId("server-broken")).toContainText(/backoff|failed/);
    await expect(page.getByTestId("server-broken")).toContainText(/could not start|ENOENT/);
    await expect(page.getByTestId("server-dark")).toContainText("dark");
    await expect(page.getByTestId("server-crowd")).toContainText("ready");
    await expect(page.getByTestId("server-crowd")).toContainText("2 over the cap");
    // A server at a loopback address without allowPrivate: refused at dial time, and said so.
    await expect(page.getByTestId("server-private")).toContainText("backoff");
    await expect(page.getByTestId("server-private")).toContainText(
      /refused: localhost resolves to (127\.0\.0\.1|::1), a loopback address; set allowPrivate to allow/,
    );
    await snap(page, "servers-stress");
  });

  test("the tools page stays usable with 200 rows, long names and hostile descriptions", async ({ page }) => {
    await page.goto("/tools");
    const rows = page.getByRole("row").filter({ hasText: "crowd_" });
    await expect(rows).toHaveCount(200);
    // Markup from a tool server is text, never HTML.
    await expect(page.getByText('<script>alert("owned")</script>', { exact: false })).toBeVisible();
    expect(await page.locator("script:text('owned')").count()).toBe(0);
    const unusable = page.getByRole("row").filter({ hasText: "crowd_has space" });
    await expect(unusable).toContainText("unusable");
    await expect(unusable.getByRole("button", { name: "Enable" })).toBeDisabled();
    // A long name must not push the table wider than the window.
    const width = await page.evaluate(() => document.documentElement.scrollWidth);
    expect(width).toBeLessThanOrEqual(page.viewportSize()?.width ?? 1280);
    await snap(page, "tools-200");
    await snap(page, "tools-200-top", false);
    // 202 listed, 200 admitted in name order: tool_198 and tool_199 are over the cap.
    await page.getByLabel("Filter tools").fill("tool_19");
    await expect(page.getByRole("row").filter({ hasText: "crowd_tool_19" })).toHaveCount(8);
    await expect(page.getByRole("row").filter({ hasText: "crowd_tool_198" })).toHaveCount(0);
  });

  test("secrets from the config never reach pages, API responses or the log", async ({ page }) => {
    for (const path of ["/servers", "/tools", "/approvals", "/settings"]) {
      await page.goto(path);
      await expect(page.getByRole("heading", { level: 1 })).toBeVisible();
      expect(await page.content()).not.toContain(E2E_SECRET);
    }
    const reads = [
      "/api/me",
      "/api/servers",
      "/api/catalogue",
      "/api/calls?limit=500",
      "/api/users",
      "/api/tokens",
    ];
    for (const path of reads) {
      const res = await page.request.get(path);
      expect(res.status(), path).toBe(200);
      expect(await res.text(), path).not.toContain(E2E_SECRET);
    }
    const log = readFileSync(readState().logFile, "utf8");
    expect(log).toContain("server private failed");
    expect(log).not.toContain(E2E_SECRET);
  });
});
