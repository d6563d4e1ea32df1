import path from "node:path";
import { fileURLToPath } from "node:url";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { expect, test } from "@playwright/test";
import { createFirstOwner, snap } from "./support/fixtures";
import { type Instance, startInstance } from "./support/instance";

/**
 * Tool sets on Settings: a Gatehouse of its own whose config defines two sets; the owner creates
 * a token in one on Settings, the agent (REST and the SDK v1 client on `/mcp`) sees only that
 * set's tools, then the owner moves it to the other set there and the agent's next list follows.
 */
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

test.describe
  .serial("tool sets", () => {
    let gatehouse: Instance;
    const owner = { name: "olga", password: "olga-owner-pass-1" };

    test.beforeAll(async () => {
      gatehouse = await startInstance({
        mcpServers: {
          demo: {
            command: process.execPath,
            args: [path.join(root, "demo", "server.mjs")],
            env: { DEMO_STATE_FILE: "{dir}/demo-state.json" },
            enabled: true,
          },
        },
        toolSets: {
          readers: { tools: ["demo_list_*"] },
          writers: { tools: ["demo_add_note"] },
        },
        rules: [
          { name: "notes-bot-writes", tools: ["demo_add_note"], agents: ["notes-bot"], decision: "review" },
        ],
      });
    });
    test.afterAll(async () => {
      await gatehouse?.stop();
    });

    test("an owner puts a token in a set on Settings and moves it; the agent's view follows", async ({
      page,
    }) => {
      test.setTimeout(90_000);
      const base = gatehouse.baseURL;
      await createFirstOwner(page, gatehouse.setupLink, owner);
      const catalogue = (await (await page.request.get(`${base}/api/catalogue`)).json()) as {
        tools: { localName: string; definitionHash: string }[];
      };
      const enabled = await page.request.post(`${base}/api/catalogue/bulk`, {
        headers: { origin: base },
        data: {
          status: "enabled",
          names: catalogue.tools.map((t) => t.localName),
          expectedHashes: Object.fromEntries(catalogue.tools.map((t) => [t.localName, t.definitionHash])),
        },
      });
      expect(enabled.status()).toBe(200);

      await page.goto(`${base}/settings`);
      await page.getByLabel("Token name").fill("notes-bot");
      await page.getByLabel("Tool set", { exact: true }).selectOption("readers");
      await page.getByRole("button", { name: "Create token" }).click();
      const secret = (
        (await page.getByRole("figure", { name: "New token secret" }).textContent()) ?? ""
      ).trim();
      const row = page.getByTestId("token-notes-bot");
      const choice = row.getByLabel("Tool set of notes-bot");
      await expect(choice).toHaveValue("readers");
      await snap(page, "settings-tool-sets");
      // The Rules page says which set a token a rule names is in.
      await page.goto(`${base}/rules`);
      await expect(page.getByRole("list", { name: "Rules" })).toContainText("notes-bot (tool set readers)");
      await snap(page, "rules-tool-sets");
      await page.goto(`${base}/settings`);

      const restTools = async () => {
        const res = await page.request.get(`${base}/api/tools`, {
          headers: { authorization: `Bearer ${secret}` },
        });
        return ((await res.json()) as { tools: { name: string }[] }).tools.map((t) => t.name);
      };
      expect(await restTools()).toEqual(["demo_list_notes"]);
      const client = new Client({ name: "set-agent", version: "1.0.0" }, { capabilities: {} });
      await client.connect(
        new StreamableHTTPClientTransport(new URL(`${base}/mcp`), {
          requestInit: { headers: { Authorization: `Bearer ${secret}` } },
        }),
      );
      try {
        expect((await client.listTools()).tools.map((t) => t.name)).toEqual(["demo_list_notes"]);
        const outside = await client.callTool({ name: "demo_add_note", arguments: { text: "not mine" } });
        expect(outside.isError).toBe(true);

        const moved = (to: string) =>
          Promise.all([
            page.waitForResponse(
              (r) => r.url().endsWith("/api/tokens/notes-bot") && r.request().method() === "PATCH",
            ),
            choice.selectOption(to),
          ]).then(([res]) => expect(res.status()).toBe(200));
        await moved("writers");
        await expect(choice).toHaveValue("writers");
        expect((await client.listTools()).tools.map((t) => t.name)).toEqual(["demo_add_note"]);
        expect(await restTools()).toEqual(["demo_add_note"]);

        await moved("");
        await expect(choice).toHaveValue("");
        expect((await client.listTools()).tools.map((t) => t.name).sort()).toEqual([
          "demo_add_note",
          "demo_list_notes",
        ]);
        // Owners see what the token has been doing: a write that waits for a reviewer.
        const waiting = await page.request.post(`${base}/api/calls`, {
          headers: { authorization: `Bearer ${secret}` },
          data: { tool: "demo_add_note", arguments: { text: "for review" } },
        });
        expect(waiting.status()).toBe(202);
        await page.reload();
        const activity = row.getByTestId("token-activity");
        // The refused call outside its set counts too: it is on record, as a refusal.
        await expect(activity).toContainText("2 calls in the last hour");
        await expect(activity).toContainText("1 waiting now");
        await snap(page, "settings-token-activity");
      } finally {
        await client.close();
      }
    });
  });
