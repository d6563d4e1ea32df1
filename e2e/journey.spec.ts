import type { APIRequestContext } from "@playwright/test";
import { people, readState } from "./support/env";
import { demoRuns, expect, snap, test } from "./support/fixtures";

/**
 * The whole path from PRODUCT.md §9: the owner sets up, enables a read-only and a destructive
 * tool, adds a reviewer and an agent token; the agent reads freely; its mutation waits for the
 * reviewer, who sees it arrive live and approves; the agent's long-poll gets the result, and
 * the demo server ran the mutation exactly once. Then a denial, with its reason.
 */
test.describe
  .serial("owner enables, agent calls, reviewer approves", () => {
    let agentSecret = "";

    async function agentApi(playwright: {
      request: { newContext: (o: object) => Promise<APIRequestContext> };
    }) {
      return playwright.request.newContext({
        baseURL: readState().baseURL,
        extraHTTPHeaders: { Authorization: `Bearer ${agentSecret}` },
      });
    }

    test("the owner creates their account from the printed setup link", async ({ page, setupLink }) => {
      await page.goto(setupLink);
      await expect(page.getByRole("heading", { name: "Create the first owner" })).toBeVisible();
      await snap(page, "setup");
      await page.getByLabel("Name").fill(people.owner.name);
      await page.getByLabel("Password", { exact: true }).fill(people.owner.password);
      await page.getByLabel("Confirm password").fill(people.owner.password);
      await page.getByRole("button", { name: "Create owner" }).click();
      await expect(page).toHaveURL(/\/servers$/);
      const demo = page.getByTestId("server-demo");
      await expect(demo).toContainText("ready");
      await snap(page, "servers");

      // The link is one-time: opening it again cannot create another owner.
      await page.context().clearCookies();
      const again = await page.request.post("/api/setup", {
        headers: { Origin: readState().baseURL },
        data: {
          code: new URL(setupLink).searchParams.get("code"),
          name: "mallory",
          password: "mallory-pass-123",
        },
      });
      expect(again.status()).toBe(409);
      // And the page itself no longer offers the form: it says so and points to sign-in.
      await page.goto(setupLink);
      await expect(page.getByRole("heading", { name: "Already set up" })).toBeVisible();
      await expect(page.getByRole("link", { name: "Sign in" })).toBeVisible();
      // True for whoever opened it, the lone owner too: no "ask an owner".
      await expect(page.getByRole("main")).toContainText("No account yet? Ask whoever runs this Gatehouse.");
      await expect(page.getByRole("main")).toContainText("npm run gatehouse -- user set NAME --password");
      await expect(page.getByRole("main")).not.toContainText(/ask an owner/i);
      await snap(page, "setup-used");
    });

    test("a path Gatehouse has no page for says so in its own look, with a way back", async ({ page }) => {
      const res = await page.goto("/no-such-page");
      expect(res?.status()).toBe(404);
      await expect(page.getByRole("heading", { name: "No such page" })).toBeVisible();
      await expect(page.getByRole("link", { name: "Go to Gatehouse" })).toBeVisible();
      await snap(page, "not-found");
    });

    test("the owner sees discovered tools as proposed and enables two of them", async ({ page }) => {
      await signIn(page, people.owner);
      await page.goto("/tools");
      const readRow = page.getByRole("row").filter({ hasText: "demo_list_notes" });
      const writeRow = page.getByRole("row").filter({ hasText: "demo_add_note" });
      await expect(readRow).toContainText("proposed");
      await expect(writeRow).toContainText("proposed");
      await expect(readRow).toContainText(/read-only/i);
      await expect(writeRow).toContainText(/destructive/i);
      await snap(page, "tools-proposed");
      await readRow.getByRole("button", { name: "Enable" }).click();
      await expect(readRow.getByRole("button", { name: "Disable" })).toBeVisible();
      await writeRow.getByRole("button", { name: "Enable" }).click();
      await expect(writeRow.getByRole("button", { name: "Disable" })).toBeVisible();
      await expect(writeRow).toContainText("enabled");
      await snap(page, "tools-enabled");
    });

    test("the owner adds a reviewer and creates an agent token", async ({ page }) => {
      await signIn(page, people.owner);
      await page.goto("/settings");
      await page.getByLabel("Name", { exact: true }).fill(people.reviewer.name);
      await page.getByLabel("Password", { exact: true }).fill(people.reviewer.password);
      await page.getByLabel("Reviewer").check();
      await page.getByRole("button", { name: "Add user" }).click();
      await expect(page.getByRole("row").filter({ hasText: people.reviewer.name })).toBeVisible();

      await page.getByLabel("Token name").fill(people.agentToken);
      await page.getByRole("button", { name: "Create token" }).click();
      const secret = page.getByLabel("New token secret");
      await expect(secret).toContainText("gh_");
      agentSecret = ((await secret.textContent()) ?? "").trim();
      expect(agentSecret).toMatch(/^gh_[A-Za-z0-9_-]{40,}$/);
      // The column says what its value is: a live token is active, not "revoked: active".
      const tokens = page.getByRole("table", { name: "Agent tokens" });
      await expect(tokens.getByRole("columnheader", { name: "Status" })).toBeVisible();
      await expect(tokens.getByRole("columnheader", { name: "Revoked" })).toHaveCount(0);
      await expect(page.getByTestId(`token-${people.agentToken}`)).toContainText("active");
      await expect(page.getByTestId(`token-${people.agentToken}`)).toContainText("Never");
      await snap(page, "settings");
    });

    test("the agent reads at once; its mutation waits for a reviewer who approves it live", async ({
      browser,
      playwright,
    }) => {
      const agent = await agentApi(playwright);
      const tools = await agent.get("/api/tools");
      expect(tools.status()).toBe(200);
      const names = ((await tools.json()) as { tools: { name: string }[] }).tools.map((t) => t.name).sort();
      expect(names).toEqual(["demo_add_note", "demo_list_notes"]);

      const read = await agent.post("/api/calls", { data: { tool: "demo_list_notes", arguments: {} } });
      expect(read.status()).toBe(200);
      expect(JSON.stringify(await read.json())).toContain("The notebook is empty.");

      // The reviewer is already looking at the queue when the call arrives.
      const reviewerContext = await browser.newContext();
      const reviewer = await reviewerContext.newPage();
      await signIn(reviewer, people.reviewer);
      await expect(reviewer).toHaveURL(/\/approvals$/);
      await expect(reviewer.getByText("No calls are waiting for approval")).toBeVisible();
      await snap(reviewer, "approvals-empty");

      const write = await agent.post("/api/calls", {
        data: { tool: "demo_add_note", arguments: { text: "ship it" } },
      });
      expect(write.status()).toBe(202);
      const pending = (await write.json()) as { id: string; status: string };
      expect(pending.status).toBe("pending");
      expect(demoRuns()).toBe(0);

      const card = reviewer.getByTestId(`call-${pending.id}`);
      await expect(card).toBeVisible();
      await expect(card).toContainText("demo_add_note");
      await expect(card).toContainText("demo");
      await expect(card).toContainText(people.agentToken);
      await expect(card).toContainText('"text": "ship it"');
      await snap(reviewer, "approvals-pending");
      expect(demoRuns()).toBe(0);

      const waited = agent.get(`/api/calls/${pending.id}?wait=30`);
      await card.getByRole("button", { name: "Approve" }).click();
      const outcome = await waited;
      expect(outcome.status()).toBe(200);
      const done = (await outcome.json()) as { status: string; decidedBy: string; result: unknown };
      expect(done.status).toBe("succeeded");
      expect(done.decidedBy).toBe(people.reviewer.name);
      expect(JSON.stringify(done.result)).toContain("ship it");
      expect(demoRuns()).toBe(1);
      await expect(card).toBeHidden();
      await snap(reviewer, "approvals-decided");
      await reviewerContext.close();
      await agent.dispose();
    });

    test("a denied call never runs and the agent learns the reason", async ({ page, playwright }) => {
      const agent = await agentApi(playwright);
      await signIn(page, people.reviewer);
      const write = await agent.post("/api/calls", {
        data: { tool: "demo_add_note", arguments: { text: "rm -rf" } },
      });
      expect(write.status()).toBe(202);
      const { id } = (await write.json()) as { id: string };
      const card = page.getByTestId(`call-${id}`);
      await expect(card).toBeVisible();
      const waited = agent.get(`/api/calls/${id}?wait=30`);
      await card.getByRole("button", { name: "Deny" }).click();
      await card.getByLabel("Reason").fill("not on a Friday");
      await snap(page, "approvals-deny");
      await card.getByRole("button", { name: "Confirm deny" }).click();
      const done = (await (await waited).json()) as { status: string; reason: string };
      expect(done.status).toBe("denied");
      expect(done.reason).toBe("not on a Friday");
      expect(demoRuns()).toBe(1);
      await agent.dispose();
    });

    test("the owner's health panel counts the journey's calls and follows a new one live", async ({
      page,
      browser,
      playwright,
    }) => {
      await signIn(page, people.owner);
      await page.goto("/servers");
      const panel = page.getByTestId("health-panel");
      const figure = (label: string) =>
        panel
          .locator("div")
          .filter({ has: page.getByText(label, { exact: true }) })
          .locator("dd");
      // So far: a read that ran at once, a write approved, a write denied.
      await expect(figure("Waiting now")).toHaveText("0");
      await expect(figure("Decided, last hour")).toHaveText("2");
      await expect(figure("Failed deliveries, 24 h")).toHaveText("0");
      await expect(panel.getByRole("img", { name: "demo: 3 calls in 24 hours" })).toBeVisible();
      await expect(panel.getByText(/latest hour with decisions: p50/)).toBeVisible();

      const agent = await agentApi(playwright);
      const write = await agent.post("/api/calls", {
        data: { tool: "demo_add_note", arguments: { text: "later" } },
      });
      expect(write.status()).toBe(202);
      const { id } = (await write.json()) as { id: string };
      // Live: no reload.
      await expect(figure("Waiting now")).toHaveText("1");
      await expect(panel.getByRole("img", { name: "demo: 4 calls in 24 hours" })).toBeVisible();
      await snap(page, "servers-health");

      const reviewerContext = await browser.newContext();
      const reviewer = await reviewerContext.newPage();
      await signIn(reviewer, people.reviewer);
      const denied = await reviewer.request.post(`/api/calls/${id}/deny`, {
        data: { reason: "the panel has seen it" },
        headers: { origin: readState().baseURL },
      });
      expect(denied.status()).toBe(200);
      await expect(figure("Waiting now")).toHaveText("0");
      await expect(figure("Decided, last hour")).toHaveText("3");
      await reviewerContext.close();
      await agent.dispose();
    });
  });

async function signIn(page: import("@playwright/test").Page, who: { name: string; password: string }) {
  await page.goto("/login");
  await page.getByLabel("Name").fill(who.name);
  await page.getByLabel("Password").fill(who.password);
  await page.getByRole("button", { name: "Sign in" }).click();
  await expect(page).not.toHaveURL(/\/login/);
}
