import { readFileSync } from "node:fs";
import { expect, type Page, test } from "@playwright/test";
import { snap } from "./support/fixtures";
import { type Instance, startInstance } from "./support/instance";

/**
 * A new owner's first minutes, on a Gatehouse of its own with an empty store and the
 * repository's config (the demo server): from the setup link to an approved state-changing
 * call, by following only what the pages say. Every click below is on a link or button the
 * previous page offered; nothing is typed into the address bar after the setup link.
 */
test.describe
  .serial("a lone owner reaches an approved call by following the pages", () => {
    let gatehouse: Instance;
    const owner = { name: "olga", password: "olga-owner-pass-1" };
    const reviewer = { name: "rita", password: "rita-reviewer-pass-1" };

    function demoRuns(): number {
      try {
        return (JSON.parse(readFileSync(gatehouse.demoStateFile, "utf8")) as { addNoteRuns: number })
          .addNoteRuns;
      } catch {
        return 0;
      }
    }

    async function signIn(page: Page, who: { name: string; password: string }) {
      await page.getByLabel("Name").fill(who.name);
      await page.getByLabel("Password").fill(who.password);
      await page.getByRole("button", { name: "Sign in" }).click();
    }

    test.beforeAll(async () => {
      gatehouse = await startInstance();
    });
    test.afterAll(async () => {
      await gatehouse?.stop();
    });

    test("setup, the steps, a Try that waits, a reviewer added from the hint, an approval", async ({
      page,
    }) => {
      test.setTimeout(120_000);
      await page.goto(gatehouse.setupLink);
      await page.getByLabel("Name").fill(owner.name);
      await page.getByLabel("Password", { exact: true }).fill(owner.password);
      await page.getByLabel("Confirm password").fill(owner.password);
      await page.getByRole("button", { name: "Create owner" }).click();
      await expect(page).toHaveURL(/\/servers$/);
      // Every page names its icon, and the address browsers ask for anyway answers with it.
      await expect(page.locator('link[rel="icon"]')).toHaveAttribute("href", /^\/favicon\.ico/);
      const icon = await page.request.get(`${gatehouse.baseURL}/favicon.ico`);
      expect(icon.status()).toBe(200);
      expect(icon.headers()["content-type"]).toBe("image/x-icon");

      // The first screen offers the three next steps, none done yet.
      const steps = page.getByTestId("next-steps");
      await expect(steps).toContainText("Get started");
      await expect(steps).toContainText("3 steps left");
      await expect(page.getByTestId("next-step-look")).toContainText("Look at the demo server");
      await expect(page.getByTestId("next-step-enable")).toContainText("Enable its tools");
      await expect(page.getByTestId("next-step-reviewer")).toContainText("Add a reviewer");
      await expect(page.getByTestId("server-demo")).toContainText("ready");
      await snap(page, "first-steps");

      await page.getByTestId("next-step-look").getByRole("link", { name: "Show it" }).click();
      await expect(page.getByTestId("next-step-look")).toHaveAttribute("data-done", "true");
      await expect(steps).toContainText("2 steps left");

      await page.getByTestId("next-step-enable").getByRole("link", { name: "Go to Tools" }).click();
      await expect(page).toHaveURL(/\/tools\?server=demo$/);
      await expect(page.getByLabel("Server")).toHaveValue("demo");
      const writeRow = page.getByRole("row").filter({ hasText: "demo_add_note" });
      await writeRow.getByRole("button", { name: "Enable" }).click();
      // Enabling a destructive tool says what that means for its calls.
      await expect(page.getByTestId("enabled-notice")).toContainText(
        "demo_add_note is enabled. It can change things, so every call waits on Approvals until a reviewer approves it.",
      );
      await expect(page.getByTestId("next-step-enable")).toHaveAttribute("data-done", "true");
      const readRow = page.getByRole("row").filter({ hasText: "demo_list_notes" });
      await readRow.getByRole("button", { name: "Enable" }).click();
      await expect(page.getByTestId("enabled-notice")).toContainText(
        "demo_list_notes is enabled. It is read-only: agents' calls run at once, without approval.",
      );
      // Nothing proposed is left: no bulk hint, no greyed "Enable selected".
      await expect(page.getByText("Select proposed tools to enable several at once.")).toHaveCount(0);
      await expect(page.getByRole("button", { name: /Enable selected/ })).toHaveCount(0);
      await snap(page, "first-tools-enabled");

      // The owner tries the destructive tool: the form asks for its one field.
      await writeRow.getByRole("button", { name: "Try demo_add_note" }).click();
      const dialog = page.getByRole("dialog", { name: "Try demo_add_note" });
      await expect(dialog.getByRole("button", { name: "Call tool" })).toBeDisabled();
      await dialog.getByLabel("text", { exact: true }).fill("first note");
      await dialog.getByRole("button", { name: "Call tool" }).click();
      await expect(dialog.getByTestId("try-outcome")).toContainText("Waiting for a reviewer's approval.");
      // The dialog says nobody can approve it yet, rather than leaving the owner to wait there.
      const hint = dialog.getByTestId("try-pending-hint");
      await expect(hint).toHaveText(
        "Nobody else may approve it yet, and you cannot approve a call you requested. Add a reviewer; they approve it on Approvals.",
      );
      await expect(hint.getByRole("link", { name: "Add a reviewer" })).toHaveAttribute(
        "href",
        "/settings?add=reviewer#add-user",
      );
      await snap(page, "first-try-pending");
      await dialog.getByRole("button", { name: "Close" }).click();

      // The menu counts what waits, live.
      await expect(page.getByTestId("approvals-pending")).toHaveText("1");
      await page
        .getByRole("navigation", { name: "Main" })
        .getByRole("link", { name: /Approvals/ })
        .click();
      const card = page.getByTestId(/^call-/).filter({ hasText: "first note" });
      const note = card.getByTestId("own-call-note");
      await expect(note).toContainText(
        "You requested this call. Another person has to approve it: you cannot approve a call you requested.",
      );
      await expect(note).toContainText(
        "Nobody else may approve calls yet. Add a reviewer, or let people approve their own calls with approvals.selfApproval.",
      );
      // The owner may not approve it, so no Approve button is offered; Deny stays.
      await expect(card.getByRole("button", { name: "Approve" })).toHaveCount(0);
      await expect(card.getByRole("button", { name: "Deny" })).toBeVisible();
      await snap(page, "first-own-call");

      // The setting the hint names is shown with its value.
      await note.getByRole("link", { name: "approvals.selfApproval" }).click();
      await expect(page).toHaveURL(/\/settings#approval-settings$/);
      await expect(page.getByTestId("setting-approvals.selfApproval")).toHaveText("false");
      await page.goBack();

      await page.getByTestId("own-call-note").getByRole("link", { name: "Add a reviewer" }).click();
      await expect(page).toHaveURL(/\/settings\?add=reviewer#add-user$/);
      await expect(page.getByTestId("add-reviewer-intro")).toBeVisible();
      const form = page.locator("#add-user");
      await expect(form.getByLabel("Name", { exact: true })).toBeFocused();
      await expect(form.getByLabel("Reviewer")).toBeChecked();
      await expect(form.getByLabel("Owner")).not.toBeChecked();
      await form.getByLabel("Name", { exact: true }).fill(reviewer.name);
      await form.getByLabel("Password", { exact: true }).fill(reviewer.password);
      await form.getByRole("button", { name: "Add user" }).click();
      await expect(form.getByRole("status")).toHaveText(
        `Added user ${reviewer.name}. They sign in at ${gatehouse.baseURL}/login with the password you chose.`,
      );
      await snap(page, "first-reviewer-added");

      // The steps are all done now, so they are gone.
      await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Servers" }).click();
      await expect(page.getByTestId("server-demo")).toBeVisible();
      await expect(page.getByTestId("next-steps")).toHaveCount(0);

      await page.getByRole("button", { name: "Sign out" }).click();
      await expect(page).toHaveURL(/\/login$/);
      await signIn(page, reviewer);
      await expect(page).toHaveURL(/\/approvals$/);
      await expect(page.getByTestId("approvals-pending")).toHaveText("1");
      const theirs = page.getByTestId(/^call-/).filter({ hasText: "first note" });
      await expect(theirs).toContainText(`user ${owner.name}`);
      expect(demoRuns()).toBe(0);
      await snap(page, "first-reviewer-queue");
      await theirs.getByRole("button", { name: "Approve" }).click();
      await expect(theirs).toHaveCount(0);
      await expect(page.getByTestId("approvals-pending")).toHaveCount(0);
      await expect.poll(demoRuns).toBe(1);
      // The outcome, and who decided it: Gatehouse ran it as rita approved it.
      const decided = page.getByRole("list", { name: "Recently decided calls" });
      await expect(decided).toContainText("succeeded");
      await expect(decided).toContainText(`approved by ${reviewer.name}`);
      await snap(page, "first-approved");
    });
  });
