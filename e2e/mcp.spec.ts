import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  type CallToolResult,
  type Progress,
  ToolListChangedNotificationSchema,
} from "@modelcontextprotocol/sdk/types.js";
import type { APIRequestContext } from "@playwright/test";
import { people, readState } from "./support/env";
import { demoRuns, expect, snap, test } from "./support/fixtures";

/**
 * An agent that speaks MCP: the SDK's own Client over real HTTP to the running app's
 * `/mcp`, after the journey enabled the demo tools. It lists tools, reads at once, and its
 * mutation is held open until the reviewer approves it through the reviewer API. A resource it
 * asks for is refused and listed on the Activity page.
 */
test.describe
  .serial("an MCP client uses Gatehouse", () => {
    let secret = "";
    let client: Client;
    let transport: StreamableHTTPClientTransport;

    async function signedIn(
      playwright: { request: { newContext: (o: object) => Promise<APIRequestContext> } },
      who: { name: string; password: string },
    ): Promise<APIRequestContext> {
      const { baseURL } = readState();
      const ctx = await playwright.request.newContext({ baseURL, extraHTTPHeaders: { Origin: baseURL } });
      const res = await ctx.post("/api/session", { data: who });
      expect(res.status()).toBe(200);
      return ctx;
    }

    test("the owner creates a token for the MCP client", async ({ playwright }) => {
      const owner = await signedIn(playwright, people.owner);
      const res = await owner.post("/api/tokens", { data: { name: "desktop-mcp" } });
      expect(res.status()).toBe(201);
      secret = ((await res.json()) as { secret: string }).secret;
      expect(secret).toMatch(/^gh_/);
      await owner.dispose();
    });

    test("without a token /mcp answers 401 with WWW-Authenticate", async () => {
      const res = await fetch(`${readState().baseURL}/mcp`, {
        method: "POST",
        headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
        body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "ping" }),
      });
      expect(res.status).toBe(401);
      expect(res.headers.get("www-authenticate")).toBe('Bearer realm="gatehouse"');
    });

    test("the client connects and lists the enabled tools, with readOnlyHint as Gatehouse enforces it", async () => {
      client = new Client({ name: "e2e-agent", version: "1.0.0" });
      transport = new StreamableHTTPClientTransport(new URL(`${readState().baseURL}/mcp`), {
        requestInit: { headers: { Authorization: `Bearer ${secret}` } },
      });
      await client.connect(transport);
      expect(transport.sessionId).toBeTruthy();
      expect(client.getServerVersion()?.name).toBe("gatehouse");
      const { tools } = await client.listTools();
      expect(tools.map((t) => t.name).sort()).toEqual(["demo_add_note", "demo_list_notes"]);
      expect(tools.find((t) => t.name === "demo_list_notes")?.annotations?.readOnlyHint).toBe(true);
      expect(tools.find((t) => t.name === "demo_add_note")?.annotations?.readOnlyHint).toBe(false);
    });

    test("a read-only tool answers at once", async () => {
      const result = (await client.callTool({ name: "demo_list_notes", arguments: {} })) as CallToolResult;
      expect(result.isError).toBeFalsy();
      // The journey's approved note is there.
      expect(JSON.stringify(result.content)).toContain("ship it");
    });

    test("a resource read through /mcp is listed on the Activity page with its agent and result", async ({
      browser,
    }) => {
      // The demo server lists no resources, so Gatehouse refuses this one; the refusal is a read too.
      const err = await client.readResource({ uri: "gatehouse://demo/note%3A%2F%2Fe2e%2Funlisted" }).then(
        () => null,
        (e: unknown) => e as { code?: number },
      );
      expect(err?.code).toBe(-32002);

      const context = await browser.newContext();
      const page = await context.newPage();
      await page.goto("/login");
      await page.getByLabel("Name").fill(people.reviewer.name);
      await page.getByLabel("Password").fill(people.reviewer.password);
      await page.getByRole("button", { name: "Sign in" }).click();
      await expect(page).not.toHaveURL(/\/login/);
      await page.goto("/activity");
      const reads = page.getByRole("table", { name: "Resource reads" });
      const row = reads.getByRole("row").filter({ hasText: "note://e2e/unlisted" }).first();
      await expect(row).toBeVisible();
      await expect(row).toContainText("desktop-mcp");
      await expect(row).toContainText("demo");
      await expect(row).toContainText("refused");
      await expect(row).toContainText("not listed by the server");
      await row.scrollIntoViewIfNeeded();
      await snap(page, "activity-resource-reads");
      await context.close();
    });

    test("a destructive call is held until the reviewer approves it, and the result arrives on the same request", async ({
      playwright,
    }) => {
      const runsBefore = demoRuns();
      let firstProgress: (p: Progress) => void = () => undefined;
      const progressed = new Promise<Progress>((resolve) => {
        firstProgress = resolve;
      });
      const held = client.callTool({ name: "demo_add_note", arguments: { text: "from mcp" } }, undefined, {
        onprogress: (p) => firstProgress(p),
        timeout: 55_000,
      });
      const progress = await progressed;
      const id = /call ([0-9a-f-]{36})/.exec(progress.message ?? "")?.[1] ?? "";
      expect(id).not.toBe("");
      expect(demoRuns()).toBe(runsBefore);

      const reviewer = await signedIn(playwright, people.reviewer);
      const pending = await reviewer.get(`/api/calls/${id}`);
      expect(((await pending.json()) as { status: string }).status).toBe("pending");
      const approved = await reviewer.post(`/api/calls/${id}/approve`);
      expect(approved.status()).toBe(200);

      const result = (await held) as CallToolResult;
      expect(result.isError).toBeFalsy();
      expect(JSON.stringify(result.content)).toContain("from mcp");
      expect(demoRuns()).toBe(runsBefore + 1);
      await reviewer.dispose();
    });

    test("the client hears tools/list_changed on its event stream when the owner disables a tool and enables it again", async ({
      playwright,
    }) => {
      const owner = await signedIn(playwright, people.owner);
      let heard: () => void = () => undefined;
      client.setNotificationHandler(ToolListChangedNotificationSchema, () => heard());
      const nextChange = () =>
        new Promise<void>((resolve) => {
          heard = resolve;
        });
      const setStatus = async (status: "enabled" | "disabled") => {
        // Enabling names the definition it pins, as the tools page does.
        const { tools } = (await (await owner.get("/api/catalogue")).json()) as {
          tools: { localName: string; definitionHash: string }[];
        };
        const expectedHash = tools.find((t) => t.localName === "demo_list_notes")?.definitionHash;
        const res = await owner.patch("/api/catalogue/demo_list_notes", { data: { status, expectedHash } });
        expect(res.status()).toBe(200);
      };
      const disabled = nextChange();
      await setStatus("disabled");
      try {
        await disabled;
        expect((await client.listTools()).tools.map((t) => t.name)).toEqual(["demo_add_note"]);
      } finally {
        const enabled = nextChange();
        await setStatus("enabled");
        await enabled;
      }
      expect((await client.listTools()).tools.map((t) => t.name).sort()).toEqual([
        "demo_add_note",
        "demo_list_notes",
      ]);
      await owner.dispose();
    });

    test("DELETE ends the session: its id answers 404 afterwards", async () => {
      const sid = transport.sessionId ?? "";
      await transport.terminateSession();
      await client.close();
      const res = await fetch(`${readState().baseURL}/mcp`, {
        method: "GET",
        headers: {
          Authorization: `Bearer ${secret}`,
          accept: "text/event-stream",
          "mcp-session-id": sid,
        },
      });
      expect(res.status).toBe(404);
    });
  });
