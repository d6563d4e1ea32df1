import { readFileSync } from "node:fs";
import type { BrowserContext, Page, Request } from "@playwright/test";
import { people, readState } from "./support/env";
import { expect, snap, test } from "./support/fixtures";

/**
 * The OAuth sign-in to a hosted MCP server in the browser (PRODUCT.md §12): `hosted` in the e2e
 * config sits behind a real authorization server (oidc-provider) and checks every bearer token
 * by introspection (both run by global-setup). The owner presses Connect, signs in at the
 * authorization server's own login page, comes back to the Servers page connected, sees hosted's
 * tools, and Disconnect revokes the tokens there. A sign-in completed in another browser than the
 * one that pressed Connect is refused. Each test leaves hosted as it found it: waiting for a sign-in.
 */

type LogEntry = { kind: string; grantType?: string | null; ok?: boolean; auth?: string; rpc?: string | null };

/** The JSON lines of a fixture's REQUEST_LOG (none yet: empty). */
function logEntries(file: string): LogEntry[] {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch {
    return [];
  }
  return text
    .split("\n")
    .filter(Boolean)
    .map((line) => JSON.parse(line) as LogEntry);
}

/** Code exchanges the authorization server answered so far. */
function codeExchanges(): LogEntry[] {
  return logEntries(readState().oauth.authorizationLog).filter(
    (e) => e.kind === "token" && e.grantType === "authorization_code",
  );
}

/**
 * The machine has no network but loopback, and the tests may send nothing elsewhere:
 * oidc-provider's login page imports a web font from fonts.googleapis.com, which is refused here.
 */
async function keepToLoopback(context: BrowserContext): Promise<void> {
  await context.route(
    (url) => !/^127\.\d+\.\d+\.\d+$/.test(url.hostname),
    (route) => route.abort("blockedbyclient"),
  );
}

async function signInToGatehouse(page: Page): Promise<void> {
  await page.goto("/login");
  await page.getByLabel("Name").fill(people.owner.name);
  await page.getByLabel("Password").fill(people.owner.password);
  await page.getByRole("button", { name: "Sign in" }).click();
  await expect(page).toHaveURL(/\/servers$/);
}

/** The browser's request for the authorization endpoint (before its redirect to the login page). */
function authorizationRequest(page: Page): Promise<Request> {
  const { issuer } = readState().oauth;
  return page.waitForRequest((req) => req.isNavigationRequest() && req.url().startsWith(`${issuer}/auth?`));
}

/** Fills oidc-provider's development login form (any login, any password) and submits it. */
async function signInAtAuthorizationServer(page: Page, login: string): Promise<void> {
  await expect(page.getByRole("heading", { name: "Sign-in" })).toBeVisible();
  await page.locator('input[name="login"]').fill(login);
  await page.locator('input[type="password"]').fill("any-password");
  await page.getByRole("button", { name: "Sign-in" }).click();
}

/** The state badge in the head of hosted's card (the card's history names states too). */
function hostedBadge(page: Page, state: string) {
  return page.getByTestId("server-hosted").locator(":scope > div").first().getByText(state, { exact: true });
}

async function expectWaiting(page: Page): Promise<void> {
  await expect(hostedBadge(page, "needs_auth")).toBeVisible();
  const block = page.getByTestId("sign-in-hosted");
  await expect(block).toContainText("Waiting for sign-in");
  await expect(block).toContainText(
    "While it waits, nothing is sent to this server and agents' calls to its tools are refused.",
  );
  await expect(block.getByRole("button", { name: "Connect", exact: true })).toBeEnabled();
  await expect(block.getByRole("button", { name: "Disconnect" })).toHaveCount(0);
  await expect(block).not.toContainText("Signed in");
}

test.describe
  .serial("signing in to a hosted server with OAuth", () => {
    test.beforeEach(async ({ context }) => {
      await keepToLoopback(context);
    });

    test("the owner connects hosted at its authorization server, uses its tools, and Disconnect revokes the tokens", async ({
      page,
      baseURL,
    }) => {
      const { issuer, resourceUrl, authorizationLog, resourceLog } = readState().oauth;
      await signInToGatehouse(page);
      const block = page.getByTestId("sign-in-hosted");
      await expectWaiting(page);
      await expect(block).toContainText("OAuth, asked for by gatehouse.json");
      await snap(page, "servers-needs-auth");

      // Connect: the browser goes to the authorization server with PKCE, state and the resource.
      const asked = authorizationRequest(page);
      await block.getByRole("button", { name: "Connect", exact: true }).click();
      const query = new URL((await asked).url()).searchParams;
      expect(query.get("code_challenge_method")).toBe("S256");
      expect(query.get("code_challenge")).toMatch(/^[A-Za-z0-9_-]{43}$/);
      expect(query.get("state")).toMatch(/^[A-Za-z0-9_-]{43,}$/);
      expect(query.get("resource")).toBe(resourceUrl);
      expect(query.get("redirect_uri")).toBe(`${baseURL}/oauth/callback`);
      expect(query.get("scope")?.split(" ")).toEqual(expect.arrayContaining(["read", "write"]));
      await expect.poll(() => new URL(page.url()).origin).toBe(issuer);
      await signInAtAuthorizationServer(page, "alice");

      // Back on the Servers page, connected; the outcome is taken out of the address.
      const banner = page.getByTestId("sign-in-banner");
      await expect(banner.getByText("hosted is connected.", { exact: true })).toBeVisible();
      await expect(banner).toHaveAttribute("role", "status");
      await expect(page).toHaveURL(`${baseURL}/servers`);
      await expect(block).toContainText(`Signed in at ${issuer} by ${people.owner.name}`);
      const scopes = block.getByRole("listitem");
      await expect(scopes).toHaveText(["read", "write"]);
      await expect(block).toContainText("Scopes granted");
      await expect(block).toContainText("the token renews automatically");
      await expect(hostedBadge(page, "ready")).toBeVisible();
      await expect(block).not.toContainText("Waiting for sign-in");
      await expect(block.getByRole("button", { name: "Disconnect" })).toBeVisible();
      await expect(block.getByRole("button", { name: "Connect", exact: true })).toHaveCount(0);
      await snap(page, "servers-connected");
      // Gatehouse listed its tools with the access token the sign-in gave.
      expect(
        logEntries(resourceLog).some((e) => e.rpc === "tools/list" && e.auth === "active"),
        "tools/list with an active token",
      ).toBe(true);

      await page.goto("/tools");
      await expect(page.getByRole("row").filter({ hasText: "hosted_whoami" })).toBeVisible();
      await expect(page.getByRole("row").filter({ hasText: "hosted_write_note" })).toBeVisible();

      // Disconnect asks first, then revokes at the authorization server.
      await page.goto("/servers");
      const revocationsBefore = logEntries(authorizationLog).filter((e) => e.kind === "revocation").length;
      await block.getByRole("button", { name: "Disconnect" }).click();
      const confirm = block.getByRole("group", { name: "Disconnect hosted" });
      await expect(confirm).toContainText("Agents lose its tools until someone connects again.");
      await expect(confirm.getByRole("button", { name: "Cancel" })).toBeFocused();
      await confirm.getByRole("button", { name: "Confirm" }).click();
      await expect(block.getByRole("status")).toHaveText(
        "Disconnected. The authorization server revoked the tokens.",
      );
      await expectWaiting(page);
      await snap(page, "servers-disconnected");
      const revocations = logEntries(authorizationLog).filter((e) => e.kind === "revocation");
      expect(revocations.length).toBeGreaterThan(revocationsBefore);
      expect(revocations.slice(revocationsBefore).every((e) => e.ok)).toBe(true);
    });

    test("a sign-in completed in a browser that did not press Connect is refused, and nothing is connected", async ({
      page,
      browser,
      baseURL,
    }) => {
      const { issuer } = readState().oauth;
      // Page A presses Connect and gets as far as the authorization server's login page.
      await signInToGatehouse(page);
      await expectWaiting(page);
      const asked = authorizationRequest(page);
      await page.getByTestId("sign-in-hosted").getByRole("button", { name: "Connect", exact: true }).click();
      const authorizationUrl = (await asked).url();
      await expect(page.getByRole("heading", { name: "Sign-in" })).toBeVisible();
      expect(new URL(page.url()).origin).toBe(issuer);

      // Page B: the same owner signed in to Gatehouse in another browser, which never pressed
      // Connect, opens the captured authorization URL and completes the sign-in.
      const exchangesBefore = codeExchanges().length;
      const other = await browser.newContext({ baseURL });
      try {
        await keepToLoopback(other);
        const pageB = await other.newPage();
        await signInToGatehouse(pageB);
        await pageB.goto(authorizationUrl);
        await signInAtAuthorizationServer(pageB, "alice");
        const banner = pageB.getByTestId("sign-in-banner");
        await expect(banner).toContainText(
          "The sign-in to hosted was started by another person or in another browser session, so it was not accepted. Press Connect here to sign in yourself.",
        );
        await expect(banner).toHaveAttribute("role", "alert");
        await expect(pageB).toHaveURL(`${baseURL}/servers`);
        await expectWaiting(pageB);
        await snap(pageB, "servers-sign-in-wrong-user");
      } finally {
        await other.close();
      }
      // The code was never exchanged, so no tokens exist for it.
      expect(codeExchanges().length).toBe(exchangesBefore);

      // The refused sign-in used its state up: page A finishing it now connects nothing either.
      await signInAtAuthorizationServer(page, "alice");
      await expect(page).toHaveURL(`${baseURL}/servers`);
      // …and is told so, though the callback could name no server.
      await expect(page.getByTestId("sign-in-banner")).toContainText("could not match to one it started");
      await expectWaiting(page);
      expect(codeExchanges().length).toBe(exchangesBefore);
      const servers = (await (await page.request.get("/api/servers")).json()) as {
        servers: { name: string; state: string; auth: { connected: boolean } | null }[];
      };
      const hosted = servers.servers.find((s) => s.name === "hosted");
      expect(hosted?.state).toBe("needs_auth");
      expect(hosted?.auth?.connected).toBe(false);
    });
  });
