import type { Browser, Page } from "@playwright/test";
import { people, readState } from "./support/env";
import { expect, snap, test } from "./support/fixtures";

/**
 * People managed in Settings (PRODUCT.md §1), after the journey (its owner). The owner adds lena,
 * resets her password while she is signed in elsewhere (her page is sent to sign-in, the new
 * password works), signs her out everywhere, and finally removes her; lena changes her own
 * password on her Settings page, which asks for the current one and signs her other sessions
 * out. The only owner's Remove says why it cannot be done. Forms close on Escape and give the
 * focus back to the button that opened them.
 */
const lena = { name: "lena", first: "lena-first-pass-1", reset: "lena-reset-pass-2", own: "lena-own-pass-3" };

async function signIn(page: Page, who: { name: string; password: string }): Promise<void> {
  await page.goto("/login");
  await page.getByLabel("Name").fill(who.name);
  await page.getByLabel("Password").fill(who.password);
  await page.getByRole("button", { name: "Sign in" }).click();
  await expect(page).not.toHaveURL(/\/login/);
}

/** A page of its own browser context, signed in as `who`. */
async function pageAs(browser: Browser, who: { name: string; password: string }): Promise<Page> {
  const page = await (await browser.newContext()).newPage();
  await signIn(page, who);
  return page;
}

/** The page is signed out: loading a console page lands on sign-in. */
async function expectSignedOut(page: Page): Promise<void> {
  await page.goto("/settings");
  await expect(page).toHaveURL(/\/login/);
}

test.describe
  .serial("people in Settings", () => {
    let owner: Page;
    let lenaPage: Page;

    test.beforeAll(async ({ browser }) => {
      owner = await pageAs(browser, people.owner);
      await owner.goto("/settings");
      const add = owner.getByRole("form", { name: "Add user" });
      await add.getByLabel("Name", { exact: true }).fill(lena.name);
      await add.getByLabel("Password", { exact: true }).fill(lena.first);
      await add.getByRole("button", { name: "Add user" }).click();
      await expect(owner.getByTestId(`user-${lena.name}`)).toContainText("reviewer");
      lenaPage = await pageAs(browser, { name: lena.name, password: lena.first });
    });

    test.afterAll(async () => {
      await owner?.context().close();
      await lenaPage?.context().close();
    });

    test("an owner resets a password: the person's sessions end and only the new password works", async () => {
      const row = owner.getByTestId(`user-${lena.name}`);
      const open = row.getByRole("button", { name: `Reset password for ${lena.name}` });
      await open.click();
      const form = owner.getByRole("form", { name: `Reset password of ${lena.name}` });
      const field = form.getByLabel(`New password for ${lena.name}`);
      await expect(field).toBeFocused();
      await field.fill("short");
      await form.getByRole("button", { name: "Reset password" }).click();
      await expect(form.getByRole("alert")).toHaveText("New password: Use at least 10 characters.");
      await field.press("Escape");
      await expect(form).toBeHidden();
      await expect(open).toBeFocused();

      await open.click();
      await form.getByLabel(`New password for ${lena.name}`).fill(lena.reset);
      await snap(owner, "people-reset-password");
      await form.getByRole("button", { name: "Reset password" }).click();
      await expect(owner.getByTestId(`user-${lena.name}-panel`).getByRole("status")).toHaveText(
        `Password reset for ${lena.name}; 1 session ended.`,
      );
      await expect(open).toBeFocused();

      await expectSignedOut(lenaPage);
      const old = await lenaPage.request.post("/api/session", {
        headers: { Origin: readState().baseURL },
        data: { name: lena.name, password: lena.first },
      });
      expect(old.status()).toBe(401);
      await signIn(lenaPage, { name: lena.name, password: lena.reset });
    });

    test("an owner signs a person out everywhere, and nothing else of them changes", async () => {
      const row = owner.getByTestId(`user-${lena.name}`);
      await row.getByRole("button", { name: `Sign out everywhere for ${lena.name}` }).click();
      const form = owner.getByRole("form", { name: `Sign ${lena.name} out everywhere` });
      await expect(form).toContainText(`Sign ${lena.name} out on every device?`);
      await form.getByRole("button", { name: "Sign out everywhere" }).click();
      await expect(owner.getByTestId(`user-${lena.name}-panel`).getByRole("status")).toHaveText(
        `Signed ${lena.name} out everywhere; 1 session ended.`,
      );
      await expect(row).toContainText("reviewer");
      await expectSignedOut(lenaPage);
      await signIn(lenaPage, { name: lena.name, password: lena.reset });
    });

    test("a reviewer changes their own password: the current one is asked for, other sessions end", async ({
      playwright,
    }) => {
      const { baseURL } = readState();
      const elsewhere = await playwright.request.newContext({ baseURL });
      const signedIn = await elsewhere.post("/api/session", {
        headers: { Origin: baseURL },
        data: { name: lena.name, password: lena.reset },
      });
      expect(signedIn.status()).toBe(200);

      await lenaPage.goto("/settings");
      const form = lenaPage.getByRole("form", { name: "Change your password" });
      await expect(lenaPage.getByRole("region", { name: "Users" })).toHaveCount(0);
      await form.getByLabel("Current password").fill("not-the-password");
      await form.getByLabel("New password", { exact: true }).fill(lena.own);
      await form.getByLabel("Repeat the new password").fill(lena.own);
      await form.getByRole("button", { name: "Change password" }).click();
      await expect(form.getByRole("alert")).toHaveText(
        "The current password is not right. (invalid_credentials)",
      );

      await form.getByLabel("Current password").fill(lena.reset);
      await form.getByLabel("Repeat the new password").fill(`${lena.own}x`);
      await form.getByRole("button", { name: "Change password" }).click();
      await expect(form.getByRole("alert")).toHaveText("Repeat the new password: the two do not match.");

      await form.getByLabel("Repeat the new password").fill(lena.own);
      await form.getByRole("button", { name: "Change password" }).click();
      await expect(form.getByRole("status")).toHaveText("Password changed; 1 other session signed out.");
      await snap(lenaPage, "people-own-password");
      expect((await elsewhere.get("/api/me")).status()).toBe(401);
      // This browser stays signed in.
      await lenaPage.reload();
      await expect(lenaPage.getByRole("form", { name: "Change your password" })).toBeVisible();
      await elsewhere.dispose();
    });

    test("the only owner cannot be removed; removing a person ends their sessions and their row", async () => {
      await owner.reload();
      const oliveRow = owner.getByTestId(`user-${people.owner.name}`);
      const removeOlive = oliveRow.getByRole("button", { name: `Remove ${people.owner.name}` });
      await removeOlive.click();
      const refused = owner.getByRole("form", { name: `Remove ${people.owner.name}` });
      await expect(refused).toContainText(`${people.owner.name} is the last owner and cannot be removed`);
      await expect(refused.getByRole("button", { name: `Remove ${people.owner.name}` })).toHaveCount(0);
      await refused.getByRole("button", { name: "Close" }).press("Escape");
      await expect(refused).toBeHidden();
      await expect(removeOlive).toBeFocused();

      const row = owner.getByTestId(`user-${lena.name}`);
      await row.getByRole("button", { name: `Remove ${lena.name}` }).click();
      const confirm = owner.getByRole("form", { name: `Remove ${lena.name}` });
      await expect(confirm).toContainText(`${lena.name} will no longer be able to sign in.`);
      await snap(owner, "people-remove-confirm");
      await confirm.getByRole("button", { name: `Remove ${lena.name}` }).click();
      const note = owner.getByRole("region", { name: "Users" }).getByRole("status");
      await expect(note).toHaveText(`Removed ${lena.name}; 0 grants ended, 0 pending calls withdrawn.`);
      await expect(note).toBeFocused();
      await expect(row).toHaveCount(0);

      await expectSignedOut(lenaPage);
      const listed = (await (await owner.request.get("/api/users")).json()) as { users: { name: string }[] };
      expect(listed.users.map((u) => u.name)).not.toContain(lena.name);
    });
  });
