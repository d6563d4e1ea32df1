import type { APIRequestContext, Browser, Page } from "@playwright/test";
import { people, readState } from "./support/env";
import { demoRuns, expect, snap, test } from "./support/fixtures";

/**
 * Grants, four eyes and rules in the browser (PRODUCT.md §11), after the journey (its owner,
 * reviewer and enabled demo tools). A reviewer approves an agent's call "and allows" the same
 * exact arguments for an hour: the agent's identical call then runs at once under the grant,
 * /grants shows it used once, and once revoked the same call waits again. A call the e2e config's
 * rule `pair-review` holds for two approvals shows "1 of 2" after the first, the reviewer who gave
 * it has no Approve button any more (a stale one is answered 409, shown), and a second reviewer's
 * approval runs it. A call the rule `no-drop-notes` denies is refused at once and its story names
 * the rule; /rules shows both rules in order with their hits.
 */
const second = { name: "rex", password: "rex-reviewer-pass-1" };
const GRANT_TOKEN = "grant-bot";
/** Named in the e2e config's `pair-review` rule (e2e/support/global-setup.ts). */
const PAIR_TOKEN = "pair-bot";

interface CallAnswer {
  id: string;
  status: string;
  grantId: string | null;
  rule: string | null;
  approvalsNeeded: number;
  approvedBy: string[];
  decidedBy: string | null;
}

test.describe
  .serial("grants, four eyes and rules", () => {
    let grantBot: APIRequestContext;
    let pairBot: APIRequestContext;
    let ritaApi: APIRequestContext;

    test.beforeAll(async ({ playwright }) => {
      const { baseURL } = readState();
      const origin = { Origin: baseURL };
      const owner = await signedInApi(playwright, people.owner);
      const user = await owner.post("/api/users", {
        headers: origin,
        data: { ...second, roles: ["reviewer"] },
      });
      expect([201, 409]).toContain(user.status());
      const agents: APIRequestContext[] = [];
      for (const name of [GRANT_TOKEN, PAIR_TOKEN]) {
        const token = await owner.post("/api/tokens", { headers: origin, data: { name } });
        expect(token.status()).toBe(201);
        const { secret } = (await token.json()) as { secret: string };
        agents.push(
          await playwright.request.newContext({
            baseURL,
            extraHTTPHeaders: { Authorization: `Bearer ${secret}` },
          }),
        );
      }
      [grantBot, pairBot] = agents as [APIRequestContext, APIRequestContext];
      await owner.dispose();
      ritaApi = await signedInApi(playwright, people.reviewer);
    });

    test.afterAll(async () => {
      // Leave no call of this spec waiting: other specs count what is pending.
      const page = (await (await ritaApi.get("/api/calls?status=pending&limit=500")).json()) as {
        calls: (CallAnswer & { requester: { name: string } })[];
      };
      for (const call of page.calls) {
        if (call.requester.name !== GRANT_TOKEN && call.requester.name !== PAIR_TOKEN) continue;
        await ritaApi.post(`/api/calls/${call.id}/deny`, {
          headers: { Origin: readState().baseURL },
          data: { reason: "grants spec: cleaning up" },
        });
      }
      await Promise.all([grantBot.dispose(), pairBot.dispose(), ritaApi.dispose()]);
    });

    const backup = { text: "grants: the nightly backup note" };

    async function callNote(agent: APIRequestContext, args: { text: string }) {
      const res = await agent.post("/api/calls", { data: { tool: "demo_add_note", arguments: args } });
      return { status: res.status(), call: (await res.json()) as CallAnswer };
    }

    test("approving with “and allow… these exact arguments for 1 hour” lets the agent's identical call run at once", async ({
      page,
    }) => {
      await signIn(page, people.reviewer);
      await page.goto("/approvals");
      const first = await callNote(grantBot, backup);
      expect(first.status).toBe(202);
      expect(first.call).toMatchObject({
        status: "pending",
        approvalsNeeded: 1,
        approvedBy: [],
        grantId: null,
      });

      const card = page.getByTestId(`call-${first.call.id}`);
      await expect(card).toContainText(`agent ${GRANT_TOKEN}`);
      // Off by default: a plain Approve.
      const allow = card.getByRole("checkbox", { name: "Approve and allow again…" });
      await expect(allow).not.toBeChecked();
      await expect(card.getByRole("radio")).toHaveCount(0);
      await allow.check();
      await expect(card.getByRole("radio", { name: "these exact arguments" })).toBeChecked();
      await card.getByRole("radio", { name: "1 hour" }).check();
      await expect(card.getByTestId("grant-sentence")).toHaveText(
        `Also allow ${GRANT_TOKEN} to call demo_add_note with these exact arguments for 1 hour.`,
      );
      await snap(page, "grants-approve-with-grant");

      const before = demoRuns();
      const waited = grantBot.get(`/api/calls/${first.call.id}?wait=30`);
      await card.getByRole("button", { name: "Approve and allow" }).click();
      expect(((await (await waited).json()) as CallAnswer).status).toBe("succeeded");
      await expect(card).toBeHidden();
      expect(demoRuns()).toBe(before + 1);

      // The same call again: no review, it ran before the answer came back.
      const again = await callNote(grantBot, backup);
      expect(again.status).toBe(200);
      expect(again.call.status).toBe("succeeded");
      expect(again.call.grantId).toEqual(expect.any(String));
      expect(again.call.decidedBy).toBeNull();
      expect(demoRuns()).toBe(before + 2);
      // The grant is for these exact arguments only.
      const other = await callNote(grantBot, { text: "grants: something else" });
      expect(other.status).toBe(202);
      await page.getByTestId(`call-${other.call.id}`).getByRole("button", { name: "Deny" }).click();
      await page.getByTestId(`call-${other.call.id}`).getByLabel("Reason").fill("not covered by the grant");
      await page.getByTestId(`call-${other.call.id}`).getByRole("button", { name: "Confirm deny" }).click();
      await expect(page.getByTestId(`call-${other.call.id}`)).toBeHidden();

      // Its story names the grant and whose it is.
      await page.goto(`/activity/${again.call.id}`);
      const grantFact = page.getByTestId("decision-source");
      await expect(grantFact).toHaveText(`Ran under a grant from ${people.reviewer.name}`);
      await expect(grantFact.getByRole("link")).toHaveAttribute("href", "/grants");
      // The run time in the call's facts is the one its audit trail gives, and says what it measures.
      const runTime = page.getByTestId("run-time");
      await expect(runTime).toContainText("from when Gatehouse sent the call");
      const figure = /^[\d.]+ m?s/.exec((await runTime.textContent()) ?? "")?.[0];
      expect(figure).toBeTruthy();
      await expect(page.getByRole("list", { name: "Audit trail" })).toContainText(
        `Succeeded in ${figure} · Gatehouse ran it`,
      );
      await expect(page.getByRole("list", { name: "Audit trail" })).toContainText(
        `Requested by ${GRANT_TOKEN} · Gatehouse ran it at once`,
      );
      await snap(page, "grants-call-story");
    });

    test("the reviewer sees the grant used once on /grants, revokes it, and the identical call waits again", async ({
      page,
    }) => {
      await signIn(page, people.reviewer);
      await page.goto("/approvals");
      await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Grants" }).click();
      await expect(page).toHaveURL(/\/grants$/);
      const live = page.getByRole("table", { name: "Live grants" });
      const row = live.getByRole("row").filter({ hasText: GRANT_TOKEN });
      await expect(row).toHaveCount(1);
      await expect(row).toContainText("demo_add_note");
      await expect(row).toContainText("with these exact arguments");
      await expect(row).toContainText(`"text": "${backup.text}"`);
      await expect(row).toContainText(people.reviewer.name);
      await expect(row).toContainText("1 (no limit)");
      // Minutes left depend on how long the steps before took; that it is counted in minutes is the point.
      await expect(row).toContainText(/in \d+ min/);
      await snap(page, "grants-live");

      await row
        .getByRole("button", {
          name: new RegExp(`^Revoke the grant for ${GRANT_TOKEN} on demo_add_note with`),
        })
        .click();
      await row.getByRole("button", { name: "Yes, revoke" }).click();
      await expect(live.getByRole("row").filter({ hasText: GRANT_TOKEN })).toHaveCount(0);
      const ended = page
        .getByRole("table", { name: "Ended grants" })
        .getByRole("row")
        .filter({ hasText: GRANT_TOKEN });
      await expect(ended).toContainText(`revoked by ${people.reviewer.name}`);
      await expect(ended.getByRole("button")).toHaveCount(0);
      await snap(page, "grants-revoked");

      const before = demoRuns();
      const after = await callNote(grantBot, backup);
      expect(after.status).toBe(202);
      expect(after.call).toMatchObject({ status: "pending", grantId: null });
      expect(demoRuns()).toBe(before);
    });

    test("four eyes: “1 of 2” after the first approval, no second click for the same reviewer, and the second reviewer runs it", async ({
      browser,
    }) => {
      const rita = await reviewerPage(browser, people.reviewer);
      const before = demoRuns();
      const held = await callNote(pairBot, { text: "grants: checked by two" });
      expect(held.status).toBe(202);
      expect(held.call).toMatchObject({
        status: "pending",
        rule: "pair-review",
        approvalsNeeded: 2,
        approvedBy: [],
      });
      const card = rita.getByTestId(`call-${held.call.id}`);
      await expect(card).toContainText("Held by rule pair-review (2 approvals)");
      await expect(card.getByTestId("approvals-progress")).toContainText("0 of 2 approvals");
      // Two approvals cannot be granted in advance: no "Approve and allow again…", and why.
      await expect(card.getByRole("checkbox", { name: "Approve and allow again…" })).toHaveCount(0);
      await expect(card).toContainText("this call needs 2 approvals");

      await card.getByRole("button", { name: "Approve" }).click();
      await expect(card.getByTestId("approvals-progress")).toContainText("1 of 2 approvals");
      await expect(card.getByTestId("approvals-progress")).toContainText(
        `approved by ${people.reviewer.name}`,
      );
      await expect(card).toContainText("You approved this call. It runs once another reviewer approves it.");
      await expect(card.getByRole("button", { name: "Approve" })).toHaveCount(0);
      await expect(card.getByRole("button", { name: "Deny" })).toBeVisible();
      await snap(rita, "grants-four-eyes-one-of-two");
      const still = (await (await pairBot.get(`/api/calls/${held.call.id}`)).json()) as CallAnswer;
      expect(still).toMatchObject({ status: "pending", approvedBy: [people.reviewer.name] });
      expect(demoRuns()).toBe(before);

      // Its page says the same, and a reload keeps it so.
      const own = await rita.context().newPage();
      await own.goto(`/approvals/${held.call.id}`);
      await expect(own.getByTestId("approvals-progress")).toContainText("1 of 2 approvals");
      await expect(own.getByRole("button", { name: "Approve" })).toHaveCount(0);
      await own.close();

      const rex = await reviewerPage(browser, second);
      const rexCard = rex.getByTestId(`call-${held.call.id}`);
      await expect(rexCard.getByTestId("approvals-progress")).toContainText(
        `1 of 2 approvals · approved by ${people.reviewer.name}`,
      );
      const waited = pairBot.get(`/api/calls/${held.call.id}?wait=30`);
      await rexCard.getByRole("button", { name: "Approve" }).click();
      const done = (await (await waited).json()) as CallAnswer;
      expect(done.status).toBe("succeeded");
      expect(done.approvedBy).toEqual([people.reviewer.name, second.name]);
      expect(demoRuns()).toBe(before + 1);
      await expect(rexCard).toBeHidden();
      // The first reviewer's page follows live.
      await expect(card).toBeHidden();

      await rex.goto(`/activity/${held.call.id}`);
      await expect(rex.getByTestId("decision-source")).toHaveText("Held by rule pair-review (2 approvals)");
      await expect(rex.getByText(`2 of 2: ${people.reviewer.name} and ${second.name}`)).toBeVisible();
      await expect(rex.getByRole("list", { name: "Audit trail" })).toContainText(
        `Gatehouse ran it, approved by ${people.reviewer.name} and ${second.name}`,
      );
      await expect(rex.getByRole("list", { name: "Audit trail" })).toContainText(
        `Requested by ${PAIR_TOKEN} · waiting for 2 approvals from different reviewers`,
      );
      await rita.context().close();
      await rex.context().close();
    });

    test("four eyes: an Approve the page still showed after the reviewer approved elsewhere is answered with its 409 message", async ({
      page,
    }) => {
      await signIn(page, people.reviewer);
      await page.goto("/approvals");
      const held = await callNote(pairBot, { text: "grants: approved twice by one" });
      const card = page.getByTestId(`call-${held.call.id}`);
      await expect(card.getByRole("button", { name: "Approve" })).toBeVisible();

      // Hold the page's list refresh, so the card still offers Approve after the approval elsewhere.
      let release: () => void = () => {};
      const gate = new Promise<void>((resolve) => {
        release = resolve;
      });
      await page.route(
        (url) => url.pathname === "/api/calls" && url.searchParams.get("status") === "pending",
        async (route) => {
          await gate;
          await route.continue();
        },
      );
      const elsewhere = await ritaApi.post(`/api/calls/${held.call.id}/approve`, {
        headers: { Origin: readState().baseURL },
      });
      expect(elsewhere.status()).toBe(200);
      expect(((await elsewhere.json()) as { call: CallAnswer }).call).toMatchObject({
        status: "pending",
        approvedBy: [people.reviewer.name],
      });

      const answer = page.waitForResponse((r) => r.url().endsWith(`/api/calls/${held.call.id}/approve`));
      await card.getByRole("button", { name: "Approve" }).click();
      expect((await answer).status()).toBe(409);
      await expect(card.getByRole("alert")).toContainText("(already_approved)");
      release();
      await expect(card.getByTestId("approvals-progress")).toContainText("1 of 2 approvals");
      await expect(card.getByRole("button", { name: "Approve" })).toHaveCount(0);
      await snap(page, "grants-four-eyes-already-approved");
      await card.getByRole("button", { name: "Deny" }).click();
      await card.getByLabel("Reason").fill("one reviewer is not two");
      await card.getByRole("button", { name: "Confirm deny" }).click();
      await expect(card).toBeHidden();
      const denied = (await (await pairBot.get(`/api/calls/${held.call.id}`)).json()) as CallAnswer;
      expect(denied.status).toBe("denied");
    });

    test("a call a deny rule refuses is refused at once, and its story names the rule", async ({ page }) => {
      const before = demoRuns();
      const refused = await grantBot.post("/api/calls", {
        data: { tool: "demo_add_note", arguments: { text: "DROP every note" } },
      });
      expect(refused.status()).toBe(403);
      expect(((await refused.json()) as { error: { code: string; message: string } }).error).toMatchObject({
        code: "denied_by_rule",
        message: expect.stringContaining("grant-bot never drops notes"),
      });
      expect(demoRuns()).toBe(before);
      const { calls } = (await (
        await ritaApi.get(`/api/calls?requester=${GRANT_TOKEN}&status=refused&limit=1`)
      ).json()) as { calls: CallAnswer[] };
      expect(calls[0]?.rule).toBe("no-drop-notes");

      await signIn(page, people.reviewer);
      await page.goto(`/activity/${calls[0]?.id}`);
      await expect(page.getByTestId("decision-source")).toHaveText("Denied by rule no-drop-notes");
      await expect(page.getByText("grant-bot never drops notes").first()).toBeVisible();
      await snap(page, "grants-denied-by-rule");
    });

    test("/rules shows the rules in order with what they match and their hit counts", async ({ page }) => {
      await signIn(page, people.reviewer);
      const listed = (await (await ritaApi.get("/api/rules")).json()) as {
        rules: { name: string; hits: number; matchingTools: string[] }[];
      };
      const rule = listed.rules.find((r) => r.name === "pair-review");
      // This spec's two pair-bot calls, at least (a looks run may have added its own).
      expect(rule?.hits).toBeGreaterThanOrEqual(2);
      expect(rule?.matchingTools).toEqual(expect.arrayContaining(["demo_add_note", "demo_list_notes"]));

      await page.goto("/approvals");
      await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Rules" }).click();
      await expect(page).toHaveURL(/\/rules$/);
      const card = page.getByTestId("rule-pair-review");
      await expect(card.getByRole("heading", { name: "pair-review" })).toBeVisible();
      await expect(card).toContainText("review: waits for reviewers");
      await expect(card).toContainText("2 approvals");
      await expect(card).toContainText("demo_*");
      await expect(card).toContainText("demo_add_note");
      await expect(card).toContainText(PAIR_TOKEN);
      await expect(card).toContainText("two people check pair-bot");
      await expect(card.getByTestId("rule-hits")).toContainText(`${rule?.hits} calls, last`);
      const deny = page.getByTestId("rule-no-drop-notes");
      await expect(page.getByRole("list", { name: "Rules" }).getByRole("listitem")).toHaveCount(2);
      await expect(page.getByRole("list", { name: "Rules" }).getByRole("listitem").nth(1)).toHaveAttribute(
        "data-testid",
        "rule-no-drop-notes",
      );
      await expect(deny).toContainText("deny: refused");
      await expect(deny).toContainText("args.text.startsWith('DROP')");
      await expect(deny.getByTestId("rule-hits")).toContainText("1 call, last");
      await snap(page, "rules-hits");
    });
  });

test("an owner edits a person's roles in Settings, and the last owner keeps the owner role", async ({
  page,
}) => {
  const gail = { name: "gail", password: "gail-reviewer-pass-1" };
  await signIn(page, people.owner);
  await page.goto("/settings");
  await page.getByLabel("Name", { exact: true }).fill(gail.name);
  await page.getByLabel("Password", { exact: true }).fill(gail.password);
  await page.getByRole("button", { name: "Add user" }).click();
  const gailRow = page.getByTestId(`user-${gail.name}`);
  await expect(gailRow).toContainText("reviewer");

  // The only owner cannot lose the role: the box is locked, and says why.
  const oliveRow = page.getByTestId(`user-${people.owner.name}`);
  await oliveRow.getByRole("button", { name: `Change roles for ${people.owner.name}` }).click();
  const oliveRoles = oliveRow.getByRole("form", { name: `Roles of ${people.owner.name}` });
  await expect(oliveRoles.getByRole("checkbox", { name: "Owner" })).toBeChecked();
  await expect(oliveRoles.getByRole("checkbox", { name: "Owner" })).toBeDisabled();
  await expect(oliveRoles).toContainText("The last owner keeps the owner role");
  await snap(page, "settings-roles-last-owner");
  await oliveRoles.getByRole("button", { name: "Cancel" }).click();

  // Gail becomes an owner as well; then olive's box may be cleared.
  await gailRow.getByRole("button", { name: `Change roles for ${gail.name}` }).click();
  const gailRoles = gailRow.getByRole("form", { name: `Roles of ${gail.name}` });
  await gailRoles.getByRole("checkbox", { name: "Owner" }).check();
  await gailRoles.getByRole("button", { name: "Save" }).click();
  await expect(gailRoles).toBeHidden();
  await expect(gailRow).toContainText("owner");
  const listed = (await (await page.request.get("/api/users")).json()) as {
    users: { name: string; roles: string[] }[];
  };
  expect(listed.users.find((u) => u.name === gail.name)?.roles.sort()).toEqual(["owner", "reviewer"]);
  await oliveRow.getByRole("button", { name: `Change roles for ${people.owner.name}` }).click();
  await expect(oliveRoles.getByRole("checkbox", { name: "Owner" })).toBeEnabled();

  // Gail stops being an owner elsewhere; this page has not heard, and the server's 409 is shown.
  const demoted = await page.request.patch(`/api/users/${gail.name}`, {
    headers: { Origin: readState().baseURL },
    data: { roles: ["reviewer"] },
  });
  expect(demoted.status()).toBe(200);
  await oliveRoles.getByRole("checkbox", { name: "Reviewer" }).check();
  await oliveRoles.getByRole("checkbox", { name: "Owner" }).uncheck();
  await oliveRoles.getByRole("button", { name: "Save" }).click();
  await expect(oliveRoles.getByRole("alert")).toContainText(
    `${people.owner.name} is the last owner: give someone else the owner role first (conflict)`,
  );
  await snap(page, "settings-roles-refused");
  await oliveRoles.getByRole("button", { name: "Cancel" }).click();
  await expect(oliveRow).toContainText("owner");
  await expect(gailRow).not.toContainText("owner");

  // A person keeps at least one role.
  await gailRow.getByRole("button", { name: `Change roles for ${gail.name}` }).click();
  await gailRoles.getByRole("checkbox", { name: "Reviewer" }).uncheck();
  await gailRoles.getByRole("button", { name: "Save" }).click();
  await expect(gailRoles.getByRole("alert")).toHaveText("Choose at least one role.");
  await gailRoles.getByRole("button", { name: "Cancel" }).click();
  const after = (await (await page.request.get("/api/users")).json()) as {
    users: { name: string; roles: string[] }[];
  };
  expect(after.users.find((u) => u.name === people.owner.name)?.roles).toEqual(["owner"]);
});

async function signedInApi(
  playwright: { request: { newContext: (o: object) => Promise<APIRequestContext> } },
  who: { name: string; password: string },
): Promise<APIRequestContext> {
  const { baseURL } = readState();
  const api = await playwright.request.newContext({ baseURL });
  expect((await api.post("/api/session", { headers: { Origin: baseURL }, data: who })).status()).toBe(200);
  return api;
}

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
