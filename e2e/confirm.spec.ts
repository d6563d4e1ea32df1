import type { APIRequestContext, Browser, Page } from "@playwright/test";
import { people, readState } from "./support/env";
import { demoRuns, expect, snap, test } from "./support/fixtures";

/**
 * The confirm flow in the browser, after the journey (its owner, reviewer and enabled
 * demo tools): what a reviewer sees to decide (why, what the tool does, the countdown, long
 * arguments folded), two reviewers deciding live and at the same moment, an owner's "Try" that
 * the owner cannot approve, and the activity list with one call's story.
 */
const second = { name: "rex", password: "rex-reviewer-pass-1" };

test.describe
  .serial("the confirm flow", () => {
    let agent: APIRequestContext;

    test.beforeAll(async ({ playwright }) => {
      const { baseURL } = readState();
      const origin = { Origin: baseURL };
      const owner = await playwright.request.newContext({ baseURL });
      expect((await owner.post("/api/session", { headers: origin, data: people.owner })).status()).toBe(200);
      const user = await owner.post("/api/users", {
        headers: origin,
        data: { ...second, roles: ["reviewer"] },
      });
      expect([201, 409]).toContain(user.status());
      const token = await owner.post("/api/tokens", { headers: origin, data: { name: "confirm-bot" } });
      expect(token.status()).toBe(201);
      const { secret } = (await token.json()) as { secret: string };
      await owner.dispose();
      agent = await playwright.request.newContext({
        baseURL,
        extraHTTPHeaders: { Authorization: `Bearer ${secret}` },
      });
    });

    test.afterAll(async () => {
      await agent.dispose();
    });

    async function requestNote(text: string): Promise<string> {
      const res = await agent.post("/api/calls", { data: { tool: "demo_add_note", arguments: { text } } });
      expect(res.status()).toBe(202);
      return ((await res.json()) as { id: string }).id;
    }

    test("a reviewer sees why a call needs approval, what the tool does, a live countdown and long arguments folded", async ({
      page,
    }) => {
      await signIn(page, people.reviewer);
      await page.goto("/approvals");
      // A long note with a quote, a newline and a right-to-left override hidden in it.
      const text = `Dear team,\n"ship it" \u202Etxt.exe\u202C ${"all work and no play makes jack a dull boy. ".repeat(40)}THE END`;
      const id = await requestNote(text);
      const card = page.getByTestId(`call-${id}`);
      await expect(card).toBeVisible();
      await expect(card).toContainText("Add a note to the demo notebook.");
      await expect(card).toContainText("Needs approval: no readOnlyHint");
      await expect(card).toContainText(`agent confirm-bot`);

      // The countdown runs: what it shows changes by itself.
      const countdown = card.getByText(/^expires in \d+:\d\d$/);
      await expect(countdown).toBeVisible();
      const first = await countdown.textContent();
      await expect(countdown).not.toHaveText(first ?? "");

      // Folded, saying how much is hidden; the override is shown as an escape, never applied.
      const unfold = card.getByRole("button", { name: /^Show all [\d,]+ characters/ });
      await expect(unfold).toBeVisible();
      await expect(card).not.toContainText("THE END");
      await expect(card).toContainText('"text": "Dear team,\\n\\"ship it\\" \\u202etxt.exe\\u202c');
      await snap(page, "approvals-long-argument");
      await unfold.click();
      await expect(card).toContainText('dull boy. THE END"');
      await card.getByRole("button", { name: "fold" }).click();
      await expect(card).not.toContainText("THE END");

      // Deny with a reason: one decision.
      await card.getByRole("button", { name: "Deny" }).click();
      await card.getByLabel("Reason").fill("too long to be a note");
      await card.getByRole("button", { name: "Confirm deny" }).click();
      await expect(card).toBeHidden();
      const seen = (await (await agent.get(`/api/calls/${id}`)).json()) as { status: string; reason: string };
      expect(seen).toMatchObject({ status: "denied", reason: "too long to be a note" });
    });

    test("a call that arrives while a reviewer's live stream is still connecting appears once it connects", async ({
      page,
    }) => {
      let release: () => void = () => {};
      const connected = new Promise<void>((resolve) => {
        release = resolve;
      });
      await page.route("**/api/events", async (route) => {
        await connected;
        await route.continue();
      });
      await signIn(page, people.reviewer);
      await page.goto("/approvals");
      await expect(page.getByRole("heading", { name: "Approvals", level: 1 })).toBeVisible();
      // The list is loaded; the call arrives before the stream is open, so its event is missed.
      await expect(page.getByRole("list", { name: "Recently decided calls" })).toBeVisible();
      const id = await requestNote("arrived early");
      release();
      const card = page.getByTestId(`call-${id}`);
      await expect(card).toBeVisible();
      await card.getByRole("button", { name: "Deny" }).click();
      await card.getByLabel("Reason").fill("only a test of the live stream");
      await card.getByRole("button", { name: "Confirm deny" }).click();
      await expect(card).toBeHidden();
    });

    test("when one reviewer approves, the card leaves every other reviewer's page without a reload", async ({
      browser,
    }) => {
      const [rita, rex] = await Promise.all([
        reviewerPage(browser, people.reviewer),
        reviewerPage(browser, second),
      ]);
      const before = demoRuns();
      const id = await requestNote("approved live");
      const ritaCard = rita.getByTestId(`call-${id}`);
      const rexCard = rex.getByTestId(`call-${id}`);
      await expect(ritaCard).toBeVisible();
      await expect(rexCard).toBeVisible();
      await snap(rex, "approvals-two-reviewers-before");

      const navigations: string[] = [];
      rex.on("framenavigated", (frame) => navigations.push(frame.url()));
      await ritaCard.getByRole("button", { name: "Approve" }).click();
      await expect(rexCard).toBeHidden();
      expect(navigations).toEqual([]);
      await expect(rex.getByRole("link", { name: `Story of demo_add_note call ${id}` })).toBeVisible();
      const done = (await (await agent.get(`/api/calls/${id}?wait=30`)).json()) as { status: string };
      expect(done.status).toBe("succeeded");
      expect(demoRuns()).toBe(before + 1);
      await rita.context().close();
      await rex.context().close();
    });

    test("two reviewers clicking Approve at the same moment run the call once, and the loser is told it was already decided", async ({
      browser,
    }) => {
      const [rita, rex] = await Promise.all([
        reviewerPage(browser, people.reviewer),
        reviewerPage(browser, second),
      ]);
      const before = demoRuns();
      const id = await requestNote("approved twice at once");
      const ritaCard = rita.getByTestId(`call-${id}`);
      const rexCard = rex.getByTestId(`call-${id}`);
      await expect(ritaCard).toBeVisible();
      await expect(rexCard).toBeVisible();

      // Hold both pages' list refreshes, so the live update cannot remove a card before its click.
      let release: () => void = () => {};
      const gate = new Promise<void>((resolve) => {
        release = resolve;
      });
      for (const page of [rita, rex]) {
        await page.route(
          (url) => url.pathname === "/api/calls" && url.searchParams.get("status") === "pending",
          async (route) => {
            await gate;
            await route.continue();
          },
        );
      }
      const approvals = [rita, rex].map((page) =>
        page.waitForResponse((r) => r.url().endsWith(`/api/calls/${id}/approve`)),
      );
      await Promise.all([
        ritaCard.getByRole("button", { name: "Approve" }).click(),
        rexCard.getByRole("button", { name: "Approve" }).click(),
      ]);
      const statuses = (await Promise.all(approvals)).map((r) => r.status()).sort();
      expect(statuses).toEqual([200, 409]);
      release();

      const done = (await (await agent.get(`/api/calls/${id}?wait=30`)).json()) as {
        status: string;
        decidedBy: string;
      };
      expect(done.status).toBe("succeeded");
      expect(demoRuns()).toBe(before + 1);
      const loser = done.decidedBy === people.reviewer.name ? rex : rita;
      await expect(loser.getByTestId(`call-${id}`)).toBeHidden();
      const alert = loser.getByRole("alert").filter({ hasText: "Already decided" });
      await expect(alert).toContainText(`Already decided: ${done.decidedBy} approved it.`);
      await snap(loser, "approvals-already-decided");
      await rita.context().close();
      await rex.context().close();
    });

    test("an owner's Try of a destructive tool waits for another reviewer, and the owner cannot approve it", async ({
      page,
      browser,
    }) => {
      await signIn(page, people.owner);
      await page.goto("/tools");
      const before = demoRuns();

      // A read-only tool answers at once.
      const readRow = page.getByRole("row").filter({ hasText: "demo_list_notes" });
      await readRow.getByRole("button", { name: "Try demo_list_notes" }).click();
      const readDialog = page.getByRole("dialog", { name: "Try demo_list_notes" });
      await readDialog.getByRole("button", { name: "Call tool" }).click();
      await expect(readDialog.getByTestId("try-outcome")).toContainText("succeeded");
      await expect(readDialog.getByTestId("try-outcome")).toContainText("approved live");
      await readDialog.getByRole("button", { name: "Close" }).click();

      const writeRow = page.getByRole("row").filter({ hasText: "demo_add_note" });
      await writeRow.getByRole("button", { name: "Try demo_add_note" }).click();
      const dialog = page.getByRole("dialog", { name: "Try demo_add_note" });
      await expect(dialog).toContainText("This tool needs approval");
      // The form is built from the schema: nothing is sent until the required text is filled.
      await expect(dialog.getByTestId("try-problems")).toHaveText("Fill in text.");
      await expect(dialog.getByRole("button", { name: "Call tool" })).toBeDisabled();
      await dialog.getByLabel("text", { exact: true }).fill("tried by the owner");
      await dialog.getByRole("button", { name: "Call tool" }).click();
      const outcome = dialog.getByTestId("try-outcome");
      await expect(outcome).toContainText("pending");
      await expect(outcome).toContainText("Waiting for a reviewer's approval.");
      await snap(page, "tools-try-pending", false);
      await dialog.getByRole("button", { name: "Close" }).click();

      await page.goto("/approvals");
      const card = page.getByTestId(/^call-/).filter({ hasText: "tried by the owner" });
      await expect(card).toContainText(`user ${people.owner.name}`);
      // Self-approval is off: the requester is told another person approves, and gets no Approve.
      await expect(card.getByTestId("own-call-note")).toHaveText(
        "You requested this call. Another person has to approve it: you cannot approve a call you requested.",
      );
      await expect(card.getByRole("button", { name: "Deny" })).toBeVisible();
      await expect(card.getByRole("button", { name: "Approve" })).toHaveCount(0);
      await snap(page, "approvals-self-approval");
      expect(demoRuns()).toBe(before);

      // Another reviewer can, and the owner's page sees the card go.
      const id = (await card.getAttribute("data-testid"))?.replace(/^call-/, "") ?? "";
      const rita = await reviewerPage(browser, people.reviewer);
      await rita.getByTestId(`call-${id}`).getByRole("button", { name: "Approve" }).click();
      await expect(card).toBeHidden();
      const done = (await (await page.request.get(`/api/calls/${id}?wait=30`)).json()) as { status: string };
      expect(done.status).toBe("succeeded");
      expect(demoRuns()).toBe(before + 1);
      await rita.context().close();
    });

    test("the activity page lists calls newest first, filters them, and tells one call's whole story", async ({
      page,
    }) => {
      await signIn(page, people.reviewer);
      await page.goto("/activity");
      const table = page.getByRole("table", { name: "Calls" });
      await expect(table).toBeVisible();
      // The owner's Try is there, as the person who requested it.
      await expect(table.getByRole("row").filter({ hasText: people.owner.name }).first()).toContainText(
        "demo_add_note",
      );
      await expect(table.getByRole("columnheader", { name: "Run time" })).toBeVisible();
      await snap(page, "activity");

      await page.getByLabel("Status").selectOption("denied");
      await page.getByLabel("Requester").fill("confirm-bot");
      await page.getByRole("button", { name: "Apply filters" }).click();
      await expect(page).toHaveURL(/status=denied/);
      const denied = table.getByRole("row").filter({ hasText: "too long to be a note" });
      await expect(denied).toHaveCount(1);
      // The Decision column speaks in sentence case, as the rest of the page does.
      await expect(denied).toContainText(`Denied by ${people.reviewer.name}: too long to be a note`);
      // The header and the two denials of this spec.
      await expect(table.getByRole("row")).toHaveCount(3);
      await snap(page, "activity-filtered");

      await denied.getByRole("link", { name: "demo_add_note" }).click();
      await expect(page).toHaveURL(/\/activity\/[0-9a-f-]+$/);
      await expect(page.getByRole("heading", { name: "demo_add_note" })).toBeVisible();
      const trail = page.getByRole("list", { name: "Audit trail" });
      await expect(trail.getByRole("listitem")).toHaveCount(2);
      await expect(trail.getByRole("listitem").nth(0)).toContainText(
        "Requested by confirm-bot · waiting for a reviewer's approval",
      );
      await expect(trail.getByRole("listitem").nth(1)).toContainText(`Denied by ${people.reviewer.name}`);
      await expect(trail.getByRole("listitem").nth(1)).toContainText("Reason: too long to be a note");
      // It never ran: no run time is claimed.
      await expect(page.getByTestId("run-time")).toHaveCount(0);
      await expect(page.getByText("THE END")).toHaveCount(0);
      await snap(page, "activity-story");

      // The filters live in the URL: a reload keeps them.
      await page.goto("/activity?status=succeeded&tool=add_note");
      await expect(page.getByLabel("Status")).toHaveValue("succeeded");
      await expect(table.getByRole("row").filter({ hasText: "approved twice at once" })).toHaveCount(0);
      await expect(table.getByRole("row").nth(1)).toContainText("succeeded");
    });
  });

async function reviewerPage(browser: Browser, who: { name: string; password: string }): Promise<Page> {
  const context = await browser.newContext();
  const page = await context.newPage();
  await signIn(page, who);
  await page.goto("/approvals");
  await expect(page.getByRole("heading", { name: "Approvals", level: 1 })).toBeVisible();
  return page;
}

async function signIn(page: Page, who: { name: string; password: string }) {
  await page.goto("/login");
  await page.getByLabel("Name").fill(who.name);
  await page.getByLabel("Password").fill(who.password);
  await page.getByRole("button", { name: "Sign in" }).click();
  await expect(page).not.toHaveURL(/\/login/);
}
