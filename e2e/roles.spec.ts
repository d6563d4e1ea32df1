import securityHeaders from "../server/http/security-headers.json" with { type: "json" };
import { people, readState } from "./support/env";
import { expect, snap, test } from "./support/fixtures";

/** Roles hold in the browser and at the API, whoever asks. Runs after the journey (its people). */
test.describe("roles", () => {
  test("a reviewer cannot enable tools", async ({ page }) => {
    await page.goto("/login");
    await page.getByLabel("Name").fill(people.reviewer.name);
    await page.getByLabel("Password").fill(people.reviewer.password);
    await page.getByRole("button", { name: "Sign in" }).click();
    await expect(page).toHaveURL(/\/approvals$/);
    await expect(page.getByRole("link", { name: "Tools" })).toHaveCount(0);

    await page.goto("/tools");
    await expect(page.getByText(/not allowed/i)).toBeVisible();
    await expect(
      page.getByText("an owner of this Gatehouse can give you the role in Settings"),
    ).toBeVisible();
    await expect(page.getByRole("button", { name: "Enable" })).toHaveCount(0);
    await snap(page, "tools-as-reviewer");

    const res = await page.request.patch("/api/catalogue/demo_list_notes", {
      headers: { Origin: readState().baseURL },
      data: { status: "disabled" },
    });
    expect(res.status()).toBe(403);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe("forbidden");
  });

  test("an agent token cannot approve", async ({ playwright }) => {
    const owner = await playwright.request.newContext({ baseURL: readState().baseURL });
    const origin = { Origin: readState().baseURL };
    expect((await owner.post("/api/session", { headers: origin, data: people.owner })).status()).toBe(200);
    const created = await owner.post("/api/tokens", { headers: origin, data: { name: "sneaky-bot" } });
    expect(created.status()).toBe(201);
    const { secret } = (await created.json()) as { secret: string };

    const agent = await playwright.request.newContext({
      baseURL: readState().baseURL,
      extraHTTPHeaders: { Authorization: `Bearer ${secret}` },
    });
    const call = await agent.post("/api/calls", {
      data: { tool: "demo_add_note", arguments: { text: "self-serve" } },
    });
    expect(call.status()).toBe(202);
    const { id } = (await call.json()) as { id: string };

    const approve = await agent.post(`/api/calls/${id}/approve`);
    expect(approve.status()).toBe(403);
    const after = (await (await agent.get(`/api/calls/${id}`)).json()) as { status: string };
    expect(after.status).toBe("pending");
    await agent.dispose();
    await owner.dispose();
  });

  test("pages, API routes and the agent hot paths all carry the security headers", async ({ playwright }) => {
    const api = await playwright.request.newContext({ baseURL: readState().baseURL });
    // A page and an API route answered by Next, and the two paths server/main.ts answers itself.
    const answers = [
      await api.get("/login"),
      await api.get("/api/me"),
      await api.post("/api/calls", { data: { tool: "demo_list_notes", arguments: {} } }),
      await api.post("/mcp", { data: { jsonrpc: "2.0", id: 1, method: "ping" } }),
    ];
    expect(answers.map((a) => a.status())).toEqual([200, 401, 401, 401]);
    for (const answer of answers) {
      for (const { key, value } of securityHeaders) {
        expect(answer.headers()[key.toLowerCase()], `${key} on ${answer.url()}`).toBe(value);
      }
    }
    await api.dispose();
  });

  test("a signed-out visitor is sent to the sign-in page", async ({ page }) => {
    await page.goto("/approvals");
    // Sign-in returns to the page that was asked for.
    await expect(page).toHaveURL(/\/login\?next=%2Fapprovals$/);
    await expect(page.getByRole("button", { name: "Sign in" })).toBeVisible();
    // True for a reviewer and for a lone owner who forgot: no "ask an owner" to oneself.
    const help = page.getByRole("main");
    await expect(help).toContainText("No account yet? Ask whoever runs this Gatehouse.");
    await expect(help).toContainText("Forgot your password? An owner can set a new one in Settings.");
    await expect(help).toContainText("npm run gatehouse -- user set NAME --password");
    await expect(help).not.toContainText(/an owner gave you|ask an owner/i);
    await snap(page, "login");
  });
});
