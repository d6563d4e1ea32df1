import os from "node:os";
import path from "node:path";
import type { APIRequestContext, Browser, Page } from "@playwright/test";
import Database from "better-sqlite3";
import { people, readState } from "./support/env";
import { expect, snap, test } from "./support/fixtures";

/**
 * Reaching reviewers, the browser's side (PRODUCT.md §10), after the journey (its owner, reviewer
 * and enabled demo tools): a link to `/approvals/<id>` opens that one call for decision and shows
 * a decision taken elsewhere live; an expired call and an unknown id say so; signing in from the
 * link comes back to it, and nothing sends anyone off-site; the tab title counts pending calls;
 * and, once allowed, a new call raises a system notification while the tab is in the background.
 */
const rex = { name: "rex", password: "rex-reviewer-pass-1" };
/** A reviewer who signs in for the first time from a link. */
const newcomer = { name: "rhea", password: "rhea-reviewer-pass-1" };
const TOKEN = "reach-bot";

test.describe
  .serial("reaching reviewers in the browser", () => {
    let agent: APIRequestContext;
    let rexApi: APIRequestContext;

    test.beforeAll(async ({ playwright }) => {
      const { baseURL } = readState();
      const owner = await signedInApi(playwright, people.owner);
      for (const who of [rex, newcomer]) {
        const user = await owner.post("/api/users", {
          headers: { Origin: baseURL },
          data: { ...who, roles: ["reviewer"] },
        });
        expect([201, 409]).toContain(user.status());
      }
      const token = await owner.post("/api/tokens", { headers: { Origin: baseURL }, data: { name: TOKEN } });
      expect(token.status()).toBe(201);
      const { secret } = (await token.json()) as { secret: string };
      await owner.dispose();
      agent = await playwright.request.newContext({
        baseURL,
        extraHTTPHeaders: { Authorization: `Bearer ${secret}` },
      });
      rexApi = await signedInApi(playwright, rex);
    });

    test.afterAll(async () => {
      // Leave no call of this spec waiting: later specs count what is pending.
      await denyPending(rexApi, "reach spec: cleaning up");
      await agent.dispose();
      await rexApi.dispose();
    });

    async function requestNote(text: string): Promise<string> {
      const res = await agent.post("/api/calls", { data: { tool: "demo_add_note", arguments: { text } } });
      expect(res.status()).toBe(202);
      return ((await res.json()) as { id: string }).id;
    }

    test("a link to /approvals/<id> opens the call for decision, and a decision taken elsewhere shows there live", async ({
      page,
    }) => {
      const id = await requestNote("reach: decided elsewhere");
      await signIn(page, people.reviewer);
      await page.goto(`/approvals/${id}`);
      await expect(page.getByRole("heading", { name: "Approval", level: 1 })).toBeVisible();
      const card = page.getByTestId(`call-${id}`);
      await expect(card).toContainText("demo_add_note");
      await expect(card).toContainText("on demo");
      await expect(card).toContainText(`agent ${TOKEN}`);
      await expect(card).toContainText("Needs approval: no readOnlyHint");
      await expect(card).toContainText('"text": "reach: decided elsewhere"');
      await expect(card.getByText(/^expires in \d+:\d\d$/)).toBeVisible();
      const story = page.getByRole("list", { name: "Audit trail" });
      await expect(story.getByRole("listitem")).toHaveCount(1);
      await expect(story).toContainText(
        new RegExp(`Requested by ${TOKEN} · waiting for (a reviewer's )?approval`),
      );
      await expect(story).not.toContainText(`approval by ${TOKEN}`);
      await expect(card.getByRole("button", { name: "Approve" })).toBeVisible();
      await snap(page, "approval-pending");

      // Another reviewer approves through the API; this page follows without a reload.
      const navigations: string[] = [];
      page.on("framenavigated", (frame) => navigations.push(frame.url()));
      const approved = await rexApi.post(`/api/calls/${id}/approve`, {
        headers: { Origin: readState().baseURL },
      });
      expect(approved.status()).toBe(200);
      const outcome = page.getByTestId("call-outcome");
      await expect(outcome).toContainText("Approved");
      await expect(outcome).toContainText(`${rex.name} approved it at`);
      await expect(outcome).toContainText("The tool ran and succeeded");
      await expect(page.getByRole("button", { name: "Approve" })).toHaveCount(0);
      await expect(page.getByRole("button", { name: "Deny" })).toHaveCount(0);
      await expect(page.getByText(/^expires in/)).toHaveCount(0);
      await expect(story.getByRole("listitem")).toHaveCount(3);
      await expect(story).toContainText(`Approved by ${rex.name}`);
      // Gatehouse ran it, as rex approved it; the requester made nothing succeed.
      await expect(story.getByRole("listitem").nth(2)).toContainText(
        new RegExp(`Succeeded in [\\d.]+ m?s · Gatehouse ran it, approved by ${rex.name}`),
      );
      expect(navigations).toEqual([]);
      await snap(page, "approval-decided");
    });

    test("on its own page a call follows the queue's rules: no approving one's own call, and a denial with its reason", async ({
      page,
    }) => {
      // The owner requests it (as "Try" does), so the owner may not approve it.
      await signIn(page, people.owner);
      const res = await page.request.post("/api/calls", {
        headers: { Origin: readState().baseURL },
        data: { tool: "demo_add_note", arguments: { text: "reach: the owner's own call" } },
      });
      expect(res.status()).toBe(202);
      const { id } = (await res.json()) as { id: string };
      await page.goto(`/approvals/${id}`);
      const card = page.getByTestId(`call-${id}`);
      await expect(card).toContainText(`user ${people.owner.name}`);
      await expect(card.getByTestId("own-call-note")).toContainText(
        "You requested this call. Another person has to approve it",
      );
      // Not offered at all, rather than offered and refused.
      await expect(card.getByRole("button", { name: "Approve" })).toHaveCount(0);

      // Denying one's own call is allowed, with a reason.
      await card.getByRole("button", { name: "Deny" }).click();
      await card.getByLabel("Reason").fill("asked by mistake");
      await card.getByRole("button", { name: "Confirm deny" }).click();
      const outcome = page.getByTestId("call-outcome");
      await expect(outcome).toContainText("Denied");
      await expect(outcome).toContainText(`${people.owner.name} denied it at`);
      await expect(outcome).toContainText("Reason: asked by mistake");
      await expect(page.getByRole("button", { name: "Approve" })).toHaveCount(0);
      const seen = (await (await page.request.get(`/api/calls/${id}`)).json()) as { status: string };
      expect(seen.status).toBe("denied");
    });

    test("an expired call says so without buttons, and an unknown id says there is no such call", async ({
      page,
    }) => {
      const id = await requestNote("reach: nobody decides");
      await signIn(page, people.reviewer);
      await page.goto(`/approvals/${id}`);
      const card = page.getByTestId(`call-${id}`);
      await expect(card.getByRole("button", { name: "Approve" })).toBeVisible();

      // Time passes: its deadline moves into the past and Gatehouse's expiry timer (1 s) takes it.
      const dbFile = path.join(readState().dir, "gatehouse.db");
      // Writing to a store by hand is only ever done to the suite's own temporary one.
      expect(path.resolve(dbFile).startsWith(os.tmpdir())).toBe(true);
      const db = new Database(dbFile, { timeout: 5_000 });
      try {
        db.prepare("UPDATE calls SET expires_at = ? WHERE id = ? AND status = 'pending'").run(
          new Date(Date.now() - 1_000).toISOString(),
          id,
        );
      } finally {
        db.close();
      }
      const outcome = page.getByTestId("call-outcome");
      await expect(outcome).toContainText("Expired");
      await expect(outcome).toContainText("Nobody decided before its deadline; it expired at");
      await expect(outcome.getByText("expired", { exact: true })).toBeVisible();
      await expect(page.getByRole("button", { name: "Approve" })).toHaveCount(0);
      await expect(page.getByRole("list", { name: "Audit trail" })).toContainText(
        "Expired without a decision",
      );
      await snap(page, "approval-expired");

      const unknown = "0c0ffee0-0000-4000-8000-000000000000";
      await page.goto(`/approvals/${unknown}`);
      await expect(page.getByRole("heading", { name: "No such call" })).toBeVisible();
      await expect(page.getByText(`This Gatehouse has no call ${unknown}.`)).toBeVisible();
      await expect(page.getByRole("link", { name: "See the calls waiting for approval" })).toBeVisible();
      await snap(page, "approval-unknown");
    });

    test("a reviewer who has never signed in follows the link, signs in, and lands on the call", async ({
      browser,
    }) => {
      const id = await requestNote("reach: a link from chat");
      const context = await browser.newContext();
      const page = await context.newPage();
      await page.goto(`/approvals/${id}`);
      await expect(page).toHaveURL(`/login?next=${encodeURIComponent(`/approvals/${id}`)}`);
      await expect(page.getByText("the call you were sent opens right after")).toBeVisible();
      await snap(page, "login-from-link");
      await page.getByLabel("Name").fill(newcomer.name);
      await page.getByLabel("Password").fill(newcomer.password);
      await page.getByRole("button", { name: "Sign in" }).click();
      await expect(page).toHaveURL(`/approvals/${id}`);
      await expect(page.getByTestId(`call-${id}`).getByRole("button", { name: "Approve" })).toBeVisible();
      await expect(page.getByText(`Signed in as ${newcomer.name}`)).toBeVisible();
      await context.close();
    });

    test("sign-in never sends anyone off-site, whatever next says", async ({ browser }) => {
      const { baseURL } = readState();
      const offSite = [
        "//evil.example/approvals",
        "/\\evil.example/approvals",
        "https://evil.example/approvals",
        "javascript:alert(document.cookie)",
        "/\t/evil.example",
        "approvals",
      ];
      for (const next of offSite) {
        const context = await browser.newContext();
        const page = await context.newPage();
        const hosts = new Set<string>();
        page.on("request", (request) => hosts.add(new URL(request.url()).host));
        await page.goto(`/login?next=${encodeURIComponent(next)}`);
        await page.getByLabel("Name").fill(people.reviewer.name);
        await page.getByLabel("Password").fill(people.reviewer.password);
        await page.getByRole("button", { name: "Sign in" }).click();
        // A reviewer's home page, as if there were no next at all.
        await expect(page, `next=${next}`).toHaveURL(`${baseURL}/approvals`);
        await expect(page.getByRole("heading", { name: "Approvals", level: 1 })).toBeVisible();
        expect([...hosts], `next=${next}`).toEqual([new URL(baseURL).host]);
        await context.close();
      }
    });

    test("the Approvals tab's title counts the pending calls, live", async ({ page, browser }) => {
      await denyPending(rexApi, "reach spec: an empty queue for the title count");
      await signIn(page, people.reviewer);
      await page.goto("/approvals");
      await expect(page.getByText("No calls are waiting for approval")).toBeVisible();
      await expect(page).toHaveTitle("Approvals · Gatehouse");

      const first = await requestNote("reach: counted one");
      await expect(page).toHaveTitle("(1) Approvals · Gatehouse");
      const second = await requestNote("reach: counted two");
      await expect(page).toHaveTitle("(2) Approvals · Gatehouse");
      await showTitle(browser, await page.title(), "title-count");

      // The call's own page counts too; a decision elsewhere lowers the count there.
      await page.getByRole("link", { name: `Open demo_add_note call ${first} on its own page` }).click();
      await expect(page).toHaveURL(`/approvals/${first}`);
      await expect(page).toHaveTitle("(2) Approval · Gatehouse");
      const denied = await rexApi.post(`/api/calls/${second}/deny`, {
        headers: { Origin: readState().baseURL },
        data: { reason: "counted enough" },
      });
      expect(denied.status()).toBe(200);
      await expect(page).toHaveTitle("(1) Approval · Gatehouse");
      await page.getByTestId(`call-${first}`).getByRole("button", { name: "Approve" }).click();
      await expect(page.getByTestId("call-outcome")).toContainText("Approved");
      await expect(page).toHaveTitle("Approval · Gatehouse");

      // Other pages keep their plain titles.
      await page.getByRole("link", { name: "Activity" }).click();
      await expect(page).toHaveTitle("Activity · Gatehouse");
    });

    test("once allowed, a new pending call raises a system notification while the tab is in the background, and its click opens the call", async ({
      browser,
    }) => {
      const { baseURL } = readState();
      const context = await browser.newContext();
      await context.addInitScript(recordNotifications);
      const page = await context.newPage();
      await signIn(page, people.reviewer);
      const before = await requestNote("reach: already waiting");
      await page.goto("/approvals");
      await expect(page.getByTestId(`call-${before}`)).toBeVisible();

      // Nothing is asked until the reviewer clicks "Notify me". Headless Chromium answers the
      // prompt with "denied" by itself; the reviewer then allows it in the site settings, which
      // the page notices (grantPermissions fires the permission's change event).
      const notifyMe = page.getByRole("button", { name: "Notify me" });
      await expect(notifyMe).toBeVisible();
      expect(await page.evaluate(() => window.__notify.asked)).toBe(0);
      await snap(page, "approvals-notify-me", false);
      await notifyMe.click();
      await expect(page.getByText("Notifications are blocked for this site")).toBeVisible();
      expect(await page.evaluate(() => window.__notify.asked)).toBe(1);
      await context.grantPermissions(["notifications"], { origin: baseURL });
      await expect(page.getByText("Notifications on")).toBeVisible();

      // In the foreground a new call shows on the page, and nothing else.
      const seenHere = await requestNote("reach: arrives while looking");
      await expect(page.getByTestId(`call-${seenHere}`)).toBeVisible();
      expect(await page.evaluate(() => window.__notify.shown.length)).toBe(0);

      // In the background (see recordNotifications), the next one notifies, once.
      await page.evaluate(() => window.__notify.setHidden(true));
      expect(await page.evaluate(() => document.visibilityState)).toBe("hidden");
      const id = await requestNote("reach: arrives in the background");
      await expect.poll(() => page.evaluate(() => window.__notify.shown.length)).toBe(1);
      const [shown] = await page.evaluate(() =>
        window.__notify.shown.map(({ title, body, tag }) => ({ title, body, tag })),
      );
      expect(shown).toEqual({
        title: "Approval needed: demo_add_note",
        body: `Requested by agent ${TOKEN} on demo`,
        tag: `gatehouse-call-${id}`,
      });

      // Its click brings the tab forward and opens the call.
      await page.evaluate(() => window.__notify.click(0));
      await expect(page).toHaveURL(`/approvals/${id}`);
      expect(await page.evaluate(() => window.__notify.focused)).toBe(1);
      await expect(page.getByTestId(`call-${id}`).getByRole("button", { name: "Approve" })).toBeVisible();
      expect(await page.evaluate(() => window.__notify.shown.length)).toBe(1);
      await context.close();
    });

    test("the call's page stays within the window with a long tool name and long arguments, wide and narrow", async ({
      page,
    }) => {
      const id = await requestNote(
        `reach: ${"a long note that goes on and on without a break ".repeat(36)}END`,
      );
      await signIn(page, people.reviewer);
      // The demo's names are short: this look swaps in a 66-character tool and server name.
      const long = "crowd_a_very_long_tool_name_that_goes_on_and_on_and_on_for_sixty_ch";
      await page.route(`**/api/calls/${id}/story`, async (route) => {
        const answer = await route.fetch();
        const story = (await answer.json()) as { call: Record<string, unknown> };
        story.call.tool = long;
        story.call.server = "a-server-with-a-name-much-longer-than-anyone-would-choose-for-it";
        await route.fulfill({ response: answer, json: story });
      });
      await page.goto(`/approvals/${id}`);
      const card = page.getByTestId(`call-${id}`);
      await expect(card).toContainText(long);
      await expect(card.getByRole("button", { name: /^Show all [\d,]+ characters/ })).toBeVisible();
      const width = await page.evaluate(() => document.documentElement.scrollWidth);
      expect(width).toBeLessThanOrEqual(page.viewportSize()?.width ?? 1280);
      await snap(page, "approval-long");
      await page.setViewportSize({ width: 390, height: 844 });
      const narrow = await page.evaluate(() => document.documentElement.scrollWidth);
      expect(narrow).toBeLessThanOrEqual(390);
      await snap(page, "approval-long-narrow");
    });
  });

test.describe("the owner's delivery log on Settings", () => {
  test("without webhooks or email, Settings says so and points to the README", async ({ page }) => {
    // The e2e config has a webhook and email (e2e/notify.spec.ts follows them): this look is of
    // a Gatehouse without either, so the answer is the one such a Gatehouse gives.
    await page.route("**/api/notifications", (route) =>
      route.fulfill({ json: { publicUrl: null, channels: [] } }),
    );
    await signIn(page, people.owner);
    await page.goto("/settings");
    const section = page.getByRole("region", { name: "Notifications" });
    await expect(section).toContainText("No webhooks or email configured");
    await expect(section).toContainText('the README\'s "Reaching reviewers" section shows how');
    await section.scrollIntoViewIfNeeded();
    await snap(page, "settings-notifications-empty");
  });

  // A fixture in the shape of NotificationsView, for the states a healthy e2e receiver never
  // produces (queued, retried, given up, long names); e2e/notify.spec.ts reads the real log.
  test("each channel shows where it goes, what it sends and how its last deliveries fared", async ({
    page,
  }) => {
    const at = (secondsAgo: number) => new Date(Date.now() - secondsAgo * 1000).toISOString();
    const delivery = (n: number, fields: Record<string, unknown>) => ({
      id: n,
      deliveryId: `d-${n}`,
      event: "call.pending",
      callId: `call-${n}`,
      recipient: null,
      attempts: 1,
      createdAt: at(60 * n),
      finishedAt: at(60 * n - 1),
      nextAttemptAt: null,
      lastStatus: 200,
      lastError: null,
      status: "delivered",
      ...fields,
    });
    const view = {
      publicUrl: "https://gatehouse.example.com",
      channels: [
        {
          channel: "webhook",
          name: "ops-chat",
          target: "https://hooks.example.com",
          format: "slack",
          events: ["call.pending", "call.decided"],
          signed: false,
          deliveries: [
            delivery(1, {
              status: "queued",
              attempts: 2,
              finishedAt: null,
              nextAttemptAt: at(-20),
              lastStatus: 503,
              lastError: "HTTP 503",
            }),
            delivery(2, {}),
            delivery(3, {
              status: "failed",
              attempts: 5,
              lastStatus: null,
              lastError: "timed out after 5 s",
            }),
            ...Array.from({ length: 12 }, (_, i) => delivery(4 + i, { event: "call.decided" })),
          ],
        },
        {
          channel: "webhook",
          name: "pager-with-a-rather-long-name-that-should-wrap-somewhere-sensible",
          target: "https://ops.example.com",
          format: "json",
          events: ["call.pending", "call.expired"],
          signed: true,
          deliveries: [],
        },
        {
          channel: "email",
          name: "email",
          target: "smtp.example.com",
          format: "email",
          events: ["call.pending"],
          signed: false,
          deliveries: [delivery(40, { lastStatus: null })],
        },
      ],
    };
    await page.route("**/api/notifications", (route) => route.fulfill({ json: view }));
    await signIn(page, people.owner);
    await page.goto("/settings");
    const section = page.getByRole("region", { name: "Notifications" });
    await expect(section).toContainText("Links in messages start with https://gatehouse.example.com.");
    const chat = section.getByRole("article", { name: "Webhook ops-chat" });
    await expect(chat).toContainText("https://hooks.example.com");
    await expect(chat).toContainText("slack");
    await expect(chat).toContainText("unsigned");
    await expect(chat.getByTestId("delivery-d-1")).toContainText("queued");
    await expect(chat.getByTestId("delivery-d-1")).toContainText("2 tries");
    await expect(chat.getByTestId("delivery-d-1")).toContainText("(last: HTTP 503)");
    await expect(chat.getByTestId("delivery-d-2")).toContainText("HTTP 200 at");
    await expect(chat.getByTestId("delivery-d-3")).toContainText("gave up at");
    await expect(chat.getByTestId("delivery-d-3")).toContainText(": timed out after 5 s");
    // Ten first, the rest on request.
    await expect(chat.getByRole("row")).toHaveCount(11);
    await chat.getByRole("button", { name: "Show all 15" }).click();
    await expect(chat.getByRole("row")).toHaveCount(16);
    const pager = section.getByRole("article", { name: /^Webhook pager-with/ });
    await expect(pager).toContainText("signed");
    await expect(pager).toContainText("Nothing sent yet.");
    await expect(section.getByRole("article", { name: "Email" })).toContainText("smtp.example.com");
    const width = await page.evaluate(() => document.documentElement.scrollWidth);
    expect(width).toBeLessThanOrEqual(page.viewportSize()?.width ?? 1280);
    await section.scrollIntoViewIfNeeded();
    await snap(page, "settings-notifications");
  });
});

declare global {
  interface Window {
    __notify: {
      asked: number;
      focused: number;
      shown: { title: string; body: string; tag: string; notification: Notification }[];
      setHidden: (hidden: boolean) => void;
      click: (index: number) => void;
    };
  }
}

/**
 * Runs in the page before its scripts. It records every `new Notification(...)` (the real one is
 * still made) and every permission request and `window.focus()`. It also lets the test put the
 * page in the background: headless Chromium reports every tab as visible (another tab brought to
 * front, or a minimised window, leaves `document.visibilityState` at "visible"), so
 * `setHidden(true)` makes `document.visibilityState` answer "hidden" and fires `visibilitychange`,
 * as a real background tab would.
 */
function recordNotifications(): void {
  const Real = window.Notification;
  const record: Window["__notify"] = {
    asked: 0,
    focused: 0,
    shown: [],
    setHidden: (value) => {
      hidden = value;
      document.dispatchEvent(new Event("visibilitychange"));
    },
    click: (index) => {
      record.shown[index]?.notification.dispatchEvent(new Event("click"));
    },
  };
  let hidden = false;
  Object.defineProperty(Document.prototype, "visibilityState", {
    configurable: true,
    get: () => (hidden ? "hidden" : "visible"),
  });
  Object.defineProperty(Document.prototype, "hidden", { configurable: true, get: () => hidden });
  const focus = window.focus.bind(window);
  window.focus = () => {
    record.focused += 1;
    focus();
  };
  const Recording = new Proxy(Real, {
    construct(target, args: [string, NotificationOptions?]) {
      const notification = new target(...args);
      record.shown.push({ title: args[0], body: args[1]?.body ?? "", tag: args[1]?.tag ?? "", notification });
      return notification;
    },
  });
  const request = Real.requestPermission.bind(Real);
  Object.defineProperty(Recording, "requestPermission", {
    value: (...args: Parameters<typeof Notification.requestPermission>) => {
      record.asked += 1;
      return request(...args);
    },
  });
  window.Notification = Recording;
  window.__notify = record;
}

/** Headless Chromium has no tab strip: this draws one with the title the page really had. */
async function showTitle(browser: Browser, title: string, name: string): Promise<void> {
  const context = await browser.newContext({ viewport: { width: 520, height: 64 } });
  const tab = await context.newPage();
  await tab.setContent(
    `<body style="margin:0;background:#dee1e6;font:13px system-ui,sans-serif">
       <div style="margin:12px 0 0 12px;width:260px;padding:10px 14px;background:#fff;border-radius:8px 8px 0 0;white-space:nowrap;overflow:hidden;text-overflow:ellipsis" id="tab"></div>
     </body>`,
  );
  await tab.locator("#tab").evaluate((node, text) => {
    node.textContent = text;
  }, title);
  await snap(tab, name, false);
  await context.close();
}

async function signedInApi(
  playwright: { request: { newContext: (o: object) => Promise<APIRequestContext> } },
  who: { name: string; password: string },
): Promise<APIRequestContext> {
  const { baseURL } = readState();
  const api = await playwright.request.newContext({ baseURL });
  const res = await api.post("/api/session", { headers: { Origin: baseURL }, data: who });
  expect(res.status()).toBe(200);
  return api;
}

/** Denies every pending call (as the given reviewer), so a count can start from nothing. */
async function denyPending(api: APIRequestContext, reason: string): Promise<void> {
  const { baseURL } = readState();
  const list = (await (await api.get("/api/calls?status=pending&limit=500")).json()) as {
    calls: { id: string }[];
  };
  for (const call of list.calls) {
    const res = await api.post(`/api/calls/${call.id}/deny`, {
      headers: { Origin: baseURL },
      data: { reason },
    });
    expect([200, 409]).toContain(res.status());
  }
}

async function signIn(page: Page, who: { name: string; password: string }) {
  await page.goto("/login");
  await page.getByLabel("Name").fill(who.name);
  await page.getByLabel("Password").fill(who.password);
  await page.getByRole("button", { name: "Sign in" }).click();
  await expect(page).not.toHaveURL(/\/login/);
}
