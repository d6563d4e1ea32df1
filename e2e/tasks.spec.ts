import type { TaskId } from "@modelcontextprotocol/ext-tasks/core";
import type { Browser, Page } from "@playwright/test";
import { connectTaskClient, type TaskClient } from "../server/agent-mcp/task-fixtures";
import { people, readState } from "./support/env";
import { demoRuns, expect, snap, test } from "./support/fixtures";

/**
 * A task-aware agent (SDK v2's client in 2026-07-28 with `@modelcontextprotocol/ext-tasks`'
 * session, over real HTTP to the running app's `/mcp`), after the journey enabled the demo
 * tools: its mutation comes back at once as a task that stays `working` while the call is
 * pending; the reviewer approves it on /approvals in the browser, and the agent's `tasks/get`
 * returns the tool's result. Cancelling another task withdraws its call, and its card leaves
 * the reviewer's page.
 */
test.describe
  .serial("an agent's held call as a task", () => {
    let agent: TaskClient;

    test.beforeAll(async ({ playwright }) => {
      const { baseURL } = readState();
      const owner = await playwright.request.newContext({ baseURL, extraHTTPHeaders: { Origin: baseURL } });
      expect((await owner.post("/api/session", { data: people.owner })).status()).toBe(200);
      const token = await owner.post("/api/tokens", { data: { name: "task-bot" } });
      expect(token.status()).toBe(201);
      const { secret } = (await token.json()) as { secret: string };
      await owner.dispose();
      agent = await connectTaskClient({ url: `${baseURL}/mcp`, token: secret });
    });

    test.afterAll(async () => {
      await agent?.close();
    });

    /** Calls the demo's mutation as a task, detached so that only the test's own `tasks/get`s poll. */
    async function noteAsTask(text: string): Promise<TaskId> {
      const execution = await agent.session.callTool("demo_add_note", { text });
      expect(execution.kind).toBe("task");
      if (execution.kind !== "task") throw new Error("no task");
      await execution.detach();
      return execution.handle.taskId;
    }

    test("the server offers tasks, and a read-only call still answers at once", async () => {
      expect(agent.client.getProtocolEra()).toBe("modern");
      expect(agent.client.getServerCapabilities()?.extensions).toHaveProperty([
        "io.modelcontextprotocol/tasks",
      ]);
      const execution = await agent.session.callTool("demo_list_notes", {});
      expect(execution.kind).toBe("immediate");
      expect((await execution.result()).status).toBe("completed");
    });

    test("the task is working while the call is pending, the reviewer approves it in the browser, and tasks/get returns the result", async ({
      browser,
    }) => {
      const before = demoRuns();
      const id = await noteAsTask("from a task");
      const task = agent.session.task(id);
      expect(await task.snapshot()).toMatchObject({ taskId: id, status: "working" });
      expect(demoRuns()).toBe(before);

      const page = await reviewerPage(browser);
      const card = page.getByTestId(`call-${id}`);
      await expect(card).toBeVisible();
      await expect(card).toContainText("agent task-bot");
      await expect(card).toContainText("from a task");
      await snap(page, "approvals-task-call");
      await card.getByRole("button", { name: "Approve" }).click();
      await expect(card).toBeHidden();
      await page.context().close();

      // The agent's own polling (tasks/get at the interval Gatehouse suggests) until it is done.
      const outcome = await task.result();
      expect(outcome.status).toBe("completed");
      if (outcome.status !== "completed") return;
      const { content } = outcome.result as { content: { type: string; text?: string }[] };
      expect(content.map((c) => c.text ?? "").join("\n")).toContain("from a task");
      expect(demoRuns()).toBe(before + 1);
    });

    test("cancelling a task withdraws its call: the card leaves the reviewer's page and nothing runs", async ({
      browser,
    }) => {
      const before = demoRuns();
      const page = await reviewerPage(browser);
      const id = await noteAsTask("never mind");
      const card = page.getByTestId(`call-${id}`);
      await expect(card).toBeVisible();
      await agent.session.task(id).cancel();
      await expect(card).toBeHidden();
      expect((await agent.session.task(id).snapshot()).status).toBe("cancelled");
      expect(demoRuns()).toBe(before);
      await page.context().close();
    });
  });

async function reviewerPage(browser: Browser): Promise<Page> {
  const context = await browser.newContext();
  const page = await context.newPage();
  await page.goto("/login");
  await page.getByLabel("Name").fill(people.reviewer.name);
  await page.getByLabel("Password").fill(people.reviewer.password);
  await page.getByRole("button", { name: "Sign in" }).click();
  await expect(page).not.toHaveURL(/\/login/);
  await page.goto("/approvals");
  await expect(page.getByRole("heading", { name: "Approvals", level: 1 })).toBeVisible();
  return page;
}
