/** Debian's Chromium for the benchmark's page rows, started with the flags of playwright.config.ts. */
import { type Browser, type BrowserContext, chromium } from "@playwright/test";

export function launchBrowser(): Promise<Browser> {
  return chromium.launch({
    executablePath: process.env.CHROMIUM_PATH ?? "/usr/bin/chromium",
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      "--no-first-run",
      "--disable-quic",
    ],
  });
}

/** A browser context signed in with `cookie` (`name=value`, as bench/gatehouse.ts holds it) on `base`. */
export async function signedIn(browser: Browser, base: string, cookie: string): Promise<BrowserContext> {
  const context = await browser.newContext();
  const at = cookie.indexOf("=");
  await context.addCookies([{ name: cookie.slice(0, at), value: cookie.slice(at + 1), url: base }]);
  return context;
}
