import { readFileSync } from "node:fs";
import type { APIRequestContext, Page } from "@playwright/test";
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
    // A server at a loopback address without allowPrivate: refused at dial time, and said so; no
    // retry can change that, so it is failed at once rather than retried for ever.
    await expect(page.getByTestId("server-private")).toContainText("failed");
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

/**
 * Grants, four eyes and rules as people see them (e2e/grants.spec.ts proves they work): /grants
 * empty and then with a few grants (one for a 64-character token name with long arguments, one
 * used, one revoked), /rules, an approval card with the grant options open, and a card after the
 * first of two approvals. Runs before the grants spec, so /grants starts empty; it leaves no grant
 * live and no call waiting.
 */
test.describe
  .serial("grants, four eyes and rules, as they look", () => {
    const LONG_TOKEN = "looks-bot-with-a-token-name-as-long-as-names-go-sixty-four-chars";
    /** Named in the e2e config's `pair-review` rule, beside the grants spec's own token. */
    const PAIR_TOKEN = "pair-look-bot";
    const agents = new Map<string, APIRequestContext>();
    let rita: APIRequestContext;
    const origin = () => ({ Origin: readState().baseURL });

    test.beforeAll(async ({ playwright }) => {
      const { baseURL } = readState();
      const owner = await playwright.request.newContext({ baseURL });
      expect((await owner.post("/api/session", { headers: origin(), data: people.owner })).status()).toBe(
        200,
      );
      for (const name of ["looks-bot", LONG_TOKEN, PAIR_TOKEN]) {
        const token = await owner.post("/api/tokens", { headers: origin(), data: { name } });
        expect(token.status()).toBe(201);
        const { secret } = (await token.json()) as { secret: string };
        agents.set(
          name,
          await playwright.request.newContext({
            baseURL,
            extraHTTPHeaders: { Authorization: `Bearer ${secret}` },
          }),
        );
      }
      await owner.dispose();
      rita = await playwright.request.newContext({ baseURL });
      expect((await rita.post("/api/session", { headers: origin(), data: people.reviewer })).status()).toBe(
        200,
      );
    });

    test.afterAll(async () => {
      const mine = (name: string) => agents.has(name);
      const { grants } = (await (await rita.get("/api/grants")).json()) as {
        grants: { id: string; state: string; requester: { name: string } }[];
      };
      for (const grant of grants.filter((g) => g.state === "live" && mine(g.requester.name))) {
        await rita.delete(`/api/grants/${grant.id}`, { headers: origin() });
      }
      const { calls } = (await (await rita.get("/api/calls?status=pending&limit=500")).json()) as {
        calls: { id: string; requester: { name: string } }[];
      };
      for (const call of calls.filter((c) => mine(c.requester.name))) {
        await rita.post(`/api/calls/${call.id}/deny`, {
          headers: origin(),
          data: { reason: "looks: cleaning up" },
        });
      }
      await Promise.all([...agents.values(), rita].map((api) => api.dispose()));
    });

    async function requestNote(token: string, text: string): Promise<string> {
      const agent = agents.get(token);
      if (!agent) throw new Error(`no agent ${token}`);
      const res = await agent.post("/api/calls", { data: { tool: "demo_add_note", arguments: { text } } });
      expect(res.status()).toBe(202);
      return ((await res.json()) as { id: string }).id;
    }

    async function approve(
      id: string,
      grant?: { scope: "arguments" | "tool"; minutes: number; uses?: number },
    ) {
      const res = await rita.post(`/api/calls/${id}/approve`, {
        headers: origin(),
        data: grant ? { grant } : {},
      });
      expect(res.status()).toBe(200);
    }

    async function signIn(page: Page, who: { name: string; password: string }) {
      await page.goto("/login");
      await page.getByLabel("Name").fill(who.name);
      await page.getByLabel("Password").fill(who.password);
      await page.getByRole("button", { name: "Sign in" }).click();
      await expect(page).not.toHaveURL(/\/login/);
    }
    const signInAsOwner = (page: Page) => signIn(page, people.owner);

    test("/grants without any grant says how one is made", async ({ page }) => {
      await signInAsOwner(page);
      await page.goto("/grants");
      await expect(page.getByText("No grants", { exact: true })).toBeVisible();
      await expect(page.getByText(/tick “Approve and allow again…” next to Approve/)).toBeVisible();
      await snap(page, "grants-empty");
    });

    test("/rules shows each rule read-only, in order", async ({ page }) => {
      await signInAsOwner(page);
      await page.goto("/rules");
      const rule = page.getByTestId("rule-pair-review");
      await expect(rule).toContainText("review: waits for reviewers");
      await expect(rule).toContainText("matches 2 enabled tools");
      await snap(page, "rules");
    });

    test("an approval card with the grant options open reads as one sentence", async ({ page }) => {
      await signIn(page, people.reviewer);
      const id = await requestNote("looks-bot", "looks: the weekly report");
      await page.goto(`/approvals/${id}`);
      const card = page.getByTestId(`call-${id}`);
      await card.getByRole("checkbox", { name: "Approve and allow again…" }).check();
      await card.getByRole("radio", { name: "any arguments" }).check();
      await card.getByRole("radio", { name: "a working day (8 h)" }).check();
      await card.getByRole("checkbox", { name: "at most" }).check();
      await card.getByLabel("Number of calls").fill("5");
      await expect(card.getByTestId("grant-sentence")).toHaveText(
        "Also allow looks-bot to call demo_add_note with any arguments for a working day (8 h), at most 5 more calls.",
      );
      await snap(page, "approval-grant-options");
      await card.getByRole("button", { name: "Approve and allow" }).click();
      await expect(page.getByTestId("call-outcome")).toContainText("Approved");
    });

    test("a call that needs two approvals, after the first, seen by the owner whose agent asked", async ({
      page,
    }) => {
      await signInAsOwner(page);
      const id = await requestNote(PAIR_TOKEN, "looks: two people check this");
      await approve(id);
      await page.goto("/approvals");
      const card = page.getByTestId(`call-${id}`);
      await expect(card.getByTestId("approvals-progress")).toContainText(
        `1 of 2 approvals · approved by ${people.reviewer.name}`,
      );
      // The owner created the agent's token: the second approval has to come from someone else.
      await expect(card.getByTestId("own-call-note")).toContainText(
        `This call came from agent ${PAIR_TOKEN}, whose token you created.`,
      );
      await expect(card.getByRole("button", { name: "Approve" })).toHaveCount(0);
      await expect(card.getByRole("button", { name: "Deny" })).toBeVisible();
      await snap(page, "approvals-one-of-two");
    });

    test("/grants with a few grants: a long token name and long arguments stay inside the page", async ({
      page,
    }) => {
      const long = `Quarterly numbers for the board, ${"with every figure spelled out ".repeat(12)}and one unbroken ${"x".repeat(160)} at the end`;
      await approve(await requestNote(LONG_TOKEN, long), { scope: "arguments", minutes: 15, uses: 3 });
      // One covered call: "1 of 3".
      const covered = await agents.get(LONG_TOKEN)?.post("/api/calls", {
        data: { tool: "demo_add_note", arguments: { text: long } },
      });
      expect(covered?.status()).toBe(200);
      // looks-bot has a grant for any arguments by now: this one is the long token's.
      await approve(await requestNote(LONG_TOKEN, "looks: revoked soon"), {
        scope: "arguments",
        minutes: 60,
      });
      const { grants } = (await (await rita.get("/api/grants")).json()) as {
        grants: { id: string; arguments: { text?: string } | null }[];
      };
      const soon = grants.find((g) => g.arguments?.text === "looks: revoked soon");
      expect((await rita.delete(`/api/grants/${soon?.id}`, { headers: origin() })).status()).toBe(200);

      await signInAsOwner(page);
      await page.goto("/grants");
      const live = page.getByRole("table", { name: "Live grants" });
      await expect(live.getByRole("row").filter({ hasText: LONG_TOKEN })).toContainText("1 of 3");
      await expect(live.getByRole("row").filter({ hasText: "any arguments" })).toContainText("0 of 5");
      await expect(page.getByRole("table", { name: "Ended grants" })).toContainText(
        `revoked by ${people.reviewer.name}`,
      );
      const width = await page.evaluate(() => document.documentElement.scrollWidth);
      expect(width).toBeLessThanOrEqual(page.viewportSize()?.width ?? 1280);
      await snap(page, "grants");
    });
  });
