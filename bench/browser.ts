/** Debian's Chromium for the benchmark's page rows, started as the end-to-end tests start it (e2e/support/chromium.ts). */
import { type Browser, type BrowserContext, chromium } from "@playwright/test";
import { chromiumLaunch } from "../e2e/support/chromium";

export function launchBrowser(): Promise<Browser> {
  return chromium.launch(chromiumLaunch);
}

/** A browser context signed in with `cookie` (`name=value`, as bench/gatehouse.ts holds it) on `base`. */
export async function signedIn(browser: Browser, base: string, cookie: string): Promise<BrowserContext> {
  const context = await browser.newContext();
  const at = cookie.indexOf("=");
  await context.addCookies([{ name: cookie.slice(0, at), value: cookie.slice(at + 1), url: base }]);
  return context;
}
