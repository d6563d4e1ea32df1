/**
 * How Debian's Chromium is started here, by the end-to-end tests (playwright.config.ts) and the
 * benchmark's page rows (bench/browser.ts) alike: Playwright cannot download its own browser on
 * this machine, and without the background-networking flags Chromium keeps dialling Google's
 * hosts, which the closed network refuses.
 */
export const chromiumLaunch = {
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
};
