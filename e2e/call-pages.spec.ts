import path from "node:path";
import { fileURLToPath } from "node:url";
import {
  type APIRequestContext,
  type BrowserContext,
  expect,
  type Page,
  type Request,
  test,
} from "@playwright/test";
import { snap } from "./support/fixtures";
import { type Instance, startInstance } from "./support/instance";

/**
 * The pages that show calls, and the console around them: a failed call says why in the tool's
 * own words (one line, cleaned, capped) on Approvals and Activity; the deny form says its reason
 * is required; "Approve and allow again…" says what it does; an unknown call id gets "No such
 * call" on both call pages, each fetched once; the 404 page keeps a signed-in person's header;
 * and a page a role may not open answers 403.
 *
 * A Gatehouse of its own (e2e/support/instance.ts), with a server whose tools fail with hostile
 * error texts (test/fixtures/servers/failing.mjs).
 */

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const owner = { name: "otto", password: "otto-owner-pass-1" };
const reviewer = { name: "rhea", password: "rhea-reviewer-pass-1" };
const AGENT = "ops-bot";
const WIPE = "faulty_wipe_cache";
const STATUS = "faulty_check_status";
/** The cap on a tool's error text as shown (lib/tool-error-text.ts), the ellipsis included. */
const SHOWN_MAX = 300;

const config = {
  mcpServers: {
    faulty: {
      command: process.execPath,
      args: [path.join(root, "test", "fixtures", "servers", "failing.mjs")],
      enabled: true,
    },
  },
  // The owner approves calls of the agent whose token they made.
  approvals: { expireAfterSeconds: 900, waitSeconds: 0, selfApproval: true },
  catalogue: { descriptionMaxChars: 1024, refreshSeconds: 300 },
};

/** Characters that must never reach the page from a tool's error text. */
const HIDDEN_OR_CONTROL =
  // biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point.
  /[\u0000-\u001F\u007F-\u009F\u00AD\u200B-\u200F\u202A-\u202E\u2028\u2029\u2060-\u206F\uFEFF\u{E0000}-\u{E007F}]/u;

interface CallAnswer {
  id: string;
  status: string;
}

/** What the console shows of the fixture's hostile error: its start, cleaned, then cut. */
function expectCleanedHostileError(text: string): void {
  expect(text).not.toMatch(HIDDEN_OR_CONTROL);
  expect(text).not.toContain("\n");
  const m = /^the tool reported an error: (.*) \(tool_error\)$/u.exec(text.trim());
  expect(m, text).not.toBeNull();
  const own = m?.[1] ?? "";
  expect(own).toMatch(
    /^Permission denied txt\.terces\/ while writing <script>alert\(1\)<\/script>\[31m the disk is full; the disk is full;/,
  );
  expect(own.endsWith("…")).toBe(true);
  expect(Array.from(own).length).toBeLessThanOrEqual(SHOWN_MAX);
}

test.describe
  .serial("the pages that show calls", () => {
    let instance: Instance;
    let context: BrowserContext;
    let page: Page;
    let agent: APIRequestContext;
    let origin: { Origin: string };
    /** The agent's destructive call, approved, that failed. */
    let wiped: CallAnswer;
    /** The agent's read-only call that failed at once. */
    let checked: CallAnswer;

    async function agentCall(tool: string): Promise<{ status: number; call: CallAnswer }> {
      const res = await agent.post("/api/calls", { data: { tool, arguments: {} } });
      return { status: res.status(), call: (await res.json()) as CallAnswer };
    }

    test.beforeAll(async ({ browser, playwright }) => {
      instance = await startInstance(config);
      origin = { Origin: instance.baseURL };
      context = await browser.newContext({ baseURL: instance.baseURL });
      page = await context.newPage();
      await page.goto(instance.setupLink);
      await page.getByLabel("Name").fill(owner.name);
      await page.getByLabel("Password", { exact: true }).fill(owner.password);
      await page.getByLabel("Confirm password").fill(owner.password);
      await page.getByRole("button", { name: "Create owner" }).click();
      await expect(page).toHaveURL(/\/servers$/);

      const api = page.request;
      const listed = async () =>
        (
          (await (await api.get("/api/catalogue")).json()) as {
            tools: { localName: string; definitionHash: string }[];
          }
        ).tools;
      await expect.poll(async () => (await listed()).map((t) => t.localName).sort()).toEqual([STATUS, WIPE]);
      for (const tool of await listed()) {
        const res = await api.patch(`/api/catalogue/${tool.localName}`, {
          headers: origin,
          data: { status: "enabled", expectedHash: tool.definitionHash },
        });
        expect(res.status()).toBe(200);
      }
      const user = await api.post("/api/users", {
        headers: origin,
        data: { ...reviewer, roles: ["reviewer"] },
      });
      expect(user.status()).toBe(201);
      const token = await api.post("/api/tokens", { headers: origin, data: { name: AGENT } });
      expect(token.status()).toBe(201);
      const { secret } = (await token.json()) as { secret: string };
      agent = await playwright.request.newContext({
        baseURL: instance.baseURL,
        extraHTTPHeaders: { Authorization: `Bearer ${secret}` },
      });
    });

    test.afterAll(async () => {
      await agent?.dispose();
      await context?.close();
      await instance?.stop();
    });

    test("the deny reason is marked required, and Confirm deny waits for one", async () => {
      const { status, call } = await agentCall(WIPE);
      expect(status).toBe(202);
      await page.goto("/approvals");
      const card = page.getByTestId(`call-${call.id}`);
      // Beside Approve, the grant choice says what it does.
      await expect(card.getByRole("checkbox", { name: "Approve and allow again…" })).toBeVisible();
      await snap(page, "call-pages-approve-and-allow");
      await card.getByRole("button", { name: "Deny" }).click();
      const reason = card.getByRole("textbox", { name: /^Reason/ });
      await expect(reason).toBeFocused();
      await expect(card.getByText("Reason (required: the requester reads it)")).toBeVisible();
      const confirm = card.getByRole("button", { name: "Confirm deny" });
      await expect(confirm).toBeDisabled();
      await snap(page, "call-pages-deny-form-empty");
      await reason.fill("   ");
      await expect(confirm).toBeDisabled();
      await reason.fill("the cache is shared with billing");
      await expect(confirm).toBeEnabled();
      await snap(page, "call-pages-deny-form");
      await confirm.click();
      await expect(card).toHaveCount(0);
      const denied = (await (await page.request.get(`/api/calls/${call.id}`)).json()) as CallAnswer;
      expect(denied.status).toBe("denied");
    });

    test("a failed call shows the tool's own error text on Approvals, cleaned, on one line and capped", async () => {
      const pending = await agentCall(WIPE);
      expect(pending.status).toBe(202);
      wiped = pending.call;
      await page.goto("/approvals");
      await page
        .getByTestId(`call-${wiped.id}`)
        .getByRole("button", { name: "Approve", exact: true })
        .click();
      const recent = page.getByRole("list", { name: "Recently decided calls" });
      const row = recent
        .getByRole("listitem")
        .filter({ has: page.getByRole("link", { name: `Story of ${WIPE} call ${wiped.id}` }) });
      await expect(row.getByTestId("call-error")).toContainText(
        "the tool reported an error: Permission denied",
      );
      expectCleanedHostileError((await row.getByTestId("call-error").textContent()) ?? "");
      // The second text part is past the cap; the image part is no text.
      await expect(row).not.toContainText("second part");
      await snap(page, "call-pages-approvals-failed");

      await page.goto(`/approvals/${wiped.id}`);
      const outcome = page.getByTestId("call-outcome");
      await expect(outcome).toContainText("The tool ran and reported an error: Permission denied");
      const said = (await outcome.textContent()) ?? "";
      expect(said).not.toMatch(HIDDEN_OR_CONTROL);
      await snap(page, "call-pages-approval-failed");
    });

    test("a failed call shows the tool's own error text on Activity and in its story", async () => {
      const ran = await agentCall(STATUS);
      checked = ran.call;
      expect(checked.status).toBe("failed");
      await page.goto("/activity");
      const statusRow = page.getByTestId(`activity-${checked.id}`);
      await expect(statusRow.getByTestId("call-error")).toHaveText(
        "the tool reported an error: status endpoint answered 503 Service Unavailable (tool_error)",
      );
      const wipeRow = page.getByTestId(`activity-${wiped.id}`);
      await expect(wipeRow.getByTestId("call-error")).toContainText("Permission denied");
      expectCleanedHostileError((await wipeRow.getByTestId("call-error").textContent()) ?? "");
      await snap(page, "call-pages-activity-failed");

      await page.goto(`/activity/${wiped.id}`);
      const error = page.getByTestId("call-error");
      await expect(error).toContainText("Permission denied");
      expectCleanedHostileError((await error.textContent()) ?? "");
      await snap(page, "call-pages-story-failed");
    });

    /** Requests to a call's story, and to the pending list, sent by `page` from now on. */
    function watchRequests(
      p: Page,
      id: string,
    ): { story: () => number; pending: () => number; stop: () => void } {
      let story = 0;
      let pending = 0;
      const onRequest = (req: Request) => {
        const url = new URL(req.url());
        if (url.pathname === `/api/calls/${encodeURIComponent(id)}/story`) story++;
        if (url.pathname === "/api/calls" && url.searchParams.get("status") === "pending") pending++;
      };
      p.on("request", onRequest);
      return { story: () => story, pending: () => pending, stop: () => p.off("request", onRequest) };
    }

    test("an unknown call id shows No such call on both call pages, each fetched once", async () => {
      const unknown = "call_0000000000nosuchcall";
      for (const [where, back] of [
        [`/approvals/${unknown}`, "See the calls waiting for approval"],
        [`/activity/${unknown}`, "See every call in Activity"],
      ] as const) {
        const seen = watchRequests(page, unknown);
        await page.goto(where);
        await expect(page.getByRole("heading", { name: "No such call" })).toBeVisible();
        await expect(page.getByRole("main")).toContainText(`This Gatehouse has no call ${unknown}.`);
        await expect(page.getByRole("link", { name: back })).toBeVisible();
        // The live stream's first opening refetches the pending list; a second fetch of the call
        // would go out with it.
        await expect.poll(seen.pending).toBeGreaterThanOrEqual(2);
        await page.evaluate(() => new Promise((resolve) => requestAnimationFrame(resolve)));
        expect(seen.story(), `requests for the call on ${where}`).toBe(1);
        seen.stop();
        if (where.startsWith("/activity")) await snap(page, "call-pages-activity-no-such-call");
      }
      // A known call's pages fetch it once too.
      for (const where of [`/activity/${wiped.id}`, `/approvals/${wiped.id}`]) {
        const seen = watchRequests(page, wiped.id);
        await page.goto(where);
        await expect(page.getByText("Permission denied").first()).toBeVisible();
        await expect.poll(seen.pending).toBeGreaterThanOrEqual(2);
        await page.evaluate(() => new Promise((resolve) => requestAnimationFrame(resolve)));
        expect(seen.story(), `requests for the call on ${where}`).toBe(1);
        seen.stop();
      }
    });

    test("the 404 page keeps the console's header for a signed-in person", async ({ browser }) => {
      const answer = await page.goto("/no/such/page");
      expect(answer?.status()).toBe(404);
      await expect(page.getByRole("heading", { name: "No such page" })).toBeVisible();
      const nav = page.getByRole("navigation", { name: "Main" });
      await expect(nav.getByRole("link", { name: "Servers" })).toBeVisible();
      await expect(nav.getByRole("link", { name: "Approvals" })).toBeVisible();
      await expect(page.getByText(owner.name, { exact: true })).toBeVisible();
      await expect(page.getByRole("link", { name: "Go to Servers" })).toBeVisible();
      await snap(page, "call-pages-404-owner");

      // Signed out: the sign-in card's look, no console.
      const visitor = await browser.newContext({ baseURL: instance.baseURL });
      const outside = await visitor.newPage();
      expect((await outside.goto("/no/such/page"))?.status()).toBe(404);
      await expect(outside.getByRole("heading", { name: "No such page" })).toBeVisible();
      await expect(outside.getByRole("navigation", { name: "Main" })).toHaveCount(0);
      await visitor.close();
    });

    test("a page a role may not open answers 403, with the same page in the console", async ({ browser }) => {
      const theirs = await browser.newContext({ baseURL: instance.baseURL });
      const signIn = await theirs.request.post("/api/session", { headers: origin, data: reviewer });
      expect(signIn.status()).toBe(200);
      const p = await theirs.newPage();
      for (const where of ["/servers", "/tools", "/changes"]) {
        const answer = await p.goto(where);
        expect(answer?.status(), where).toBe(403);
        await expect(p.getByRole("heading", { name: "Not allowed: this page is for owners" })).toBeVisible();
        await expect(
          p.getByText("an owner of this Gatehouse can give you the role in Settings"),
        ).toBeVisible();
        await expect(
          p.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Approvals" }),
        ).toBeVisible();
      }
      await snap(p, "call-pages-403-reviewer");
      // Their own pages still open: the queue, and Settings for their own password.
      for (const where of ["/approvals", "/activity", "/settings"]) {
        expect((await p.goto(where))?.status(), where).toBe(200);
      }
      await theirs.close();
    });
  });
