/** The benchmark's watching people: an owner's /tools and a reviewer's /approvals in a real Chromium. */
import type { Page } from "@playwright/test";
import { launchBrowser, signedIn } from "./browser";
import { type Gatehouse, quiet } from "./gatehouse";

/** What a page needs of the Gatehouse (or replica) it is opened on. */
export type Site = Pick<Gatehouse, "base" | "cookie" | "reviewerCookie" | "pid">;

export interface Dashboards {
  /** API requests the pages made (their live-event streams excluded) since the last `reset()`. */
  requests(): number;
  reset(): void;
  close(): Promise<void>;
}

/**
 * An owner's browser on /tools at `tools` and a reviewer's on /approvals at `approvals` (the same
 * Gatehouse unless given; another replica of it otherwise), each signed in and holding the page's
 * live-event stream, as two people watching would. Resolves once both pages have stopped fetching
 * and the servers have gone quiet.
 */
export async function openDashboards(tools: Site, approvals: Site = tools): Promise<Dashboards> {
  const browser = await launchBrowser();
  let requests = 0;
  const open = async (site: Site, cookie: string, pathname: string): Promise<Page> => {
    const context = await signedIn(browser, site.base, cookie);
    const page = await context.newPage();
    page.on("request", (req) => {
      const at = new URL(req.url()).pathname;
      if (at.startsWith("/api/") && at !== "/api/events") requests++;
    });
    const stream = page.waitForResponse((res) => new URL(res.url()).pathname === "/api/events", {
      timeout: 120_000,
    });
    await page.goto(`${site.base}${pathname}`, { waitUntil: "commit", timeout: 120_000 });
    const res = await stream;
    if (res.status() !== 200 || new URL(page.url()).pathname !== pathname)
      throw new Error(`${pathname}: live events answered ${res.status()} at ${page.url()}`);
    return page;
  };
  try {
    const toolsPage = await open(tools, tools.cookie, "/tools");
    await toolsPage.getByRole("row").filter({ hasText: "echo_echo" }).first().waitFor({ timeout: 120_000 });
    await open(approvals, approvals.reviewerCookie, "/approvals");
    // The pages refetch everything once their stream opens; measuring starts after that.
    let seen = -1;
    for (let i = 0; i < 30 && seen !== requests; i++) {
      seen = requests;
      await new Promise((r) => setTimeout(r, 500));
    }
    await quiet(tools.pid, 10_000);
    if (approvals.pid !== tools.pid) await quiet(approvals.pid, 10_000);
  } catch (err) {
    await browser.close();
    throw err;
  }
  return {
    requests: () => requests,
    reset() {
      requests = 0;
    },
    close: () => browser.close(),
  };
}
