import { randomBytes } from "node:crypto";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { expect, test } from "@playwright/test";
import { type OtlpReceiver, startOtlpReceiver } from "../test/support/otlp";
import { createFirstOwner } from "./support/fixtures";
import { type Instance, startInstance } from "./support/instance";

/**
 * Traces of a held call approved in the browser: a Gatehouse of its own, started with
 * `OTEL_EXPORTER_OTLP_ENDPOINT` pointing at an OTLP/HTTP receiver this spec runs; an agent (the
 * SDK v1 client) sends a `traceparent` with its `/mcp` requests; a reviewer approves in Chromium.
 * The receiver gets one trace under the agent's span, with the request, the decision, the wait,
 * the run and the request to the tool server linked parent to child.
 */
test.describe
  .serial("traces", () => {
    let gatehouse: Instance;
    let receiver: OtlpReceiver;
    const owner = { name: "olga", password: "olga-owner-pass-1" };
    const reviewer = { name: "rita", password: "rita-reviewer-pass-1" };

    test.beforeAll(async () => {
      receiver = await startOtlpReceiver();
      gatehouse = await startInstance(undefined, { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint });
    });
    test.afterAll(async () => {
      await gatehouse?.stop();
      await receiver?.close();
    });

    test("a held /mcp call approved in the browser is one trace under the agent's span", async ({
      page,
      browser,
    }) => {
      test.setTimeout(90_000);
      const base = gatehouse.baseURL;
      await createFirstOwner(page, gatehouse.setupLink, owner);
      const asOwner = { origin: base };
      const added = await page.request.post(`${base}/api/users`, {
        headers: asOwner,
        data: { ...reviewer, roles: ["reviewer"] },
      });
      expect(added.status()).toBe(201);
      const catalogue = (await (await page.request.get(`${base}/api/catalogue`)).json()) as {
        tools: { localName: string; definitionHash: string }[];
      };
      const hash = catalogue.tools.find((t) => t.localName === "demo_add_note")?.definitionHash;
      const enabled = await page.request.patch(`${base}/api/catalogue/demo_add_note`, {
        headers: asOwner,
        data: { status: "enabled", expectedHash: hash },
      });
      expect(enabled.status()).toBe(200);
      const token = await page.request.post(`${base}/api/tokens`, {
        headers: asOwner,
        data: { name: "traced-bot" },
      });
      const { secret } = (await token.json()) as { secret: string };

      const traceId = randomBytes(16).toString("hex");
      const agentSpan = randomBytes(8).toString("hex");
      const client = new Client({ name: "traced-agent", version: "1.0.0" }, { capabilities: {} });
      await client.connect(
        new StreamableHTTPClientTransport(new URL(`${base}/mcp`), {
          requestInit: {
            headers: { Authorization: `Bearer ${secret}`, traceparent: `00-${traceId}-${agentSpan}-01` },
          },
        }),
      );
      const answer = client.callTool({ name: "demo_add_note", arguments: { text: "traced in the browser" } });

      const reviewerContext = await browser.newContext();
      const rita = await reviewerContext.newPage();
      await rita.goto(`${base}/login`);
      await rita.getByLabel("Name").fill(reviewer.name);
      await rita.getByLabel("Password").fill(reviewer.password);
      await rita.getByRole("button", { name: "Sign in" }).click();
      await expect(rita).toHaveURL(/\/approvals$/);
      const card = rita.locator('[data-testid^="call-"]').filter({ hasText: "traced in the browser" });
      await card.getByRole("button", { name: "Approve" }).click();
      expect(JSON.stringify(await answer)).toContain("traced in the browser");
      await client.close();
      await reviewerContext.close();

      // Spans are exported in batches (every few seconds): the last of this trace's comes with one.
      const named = (name: string) => receiver.spans.filter((s) => s.traceId === traceId && s.name === name);
      await expect.poll(() => named("tools/call add_note").length, { timeout: 30_000 }).toBe(1);
      const [call] = named("tools/call demo_add_note");
      expect(call).toBeDefined();
      const post = receiver.spans.find((s) => s.spanId === call?.parentSpanId);
      expect(post?.name).toBe("POST /mcp");
      expect(post?.parentSpanId).toBe(agentSpan);
      expect(named("decide")[0]?.parentSpanId).toBe(call?.spanId);
      expect(named("wait for review")[0]?.parentSpanId).toBe(call?.spanId);
      const [run] = named("run");
      expect(run?.parentSpanId).toBe(call?.spanId);
      expect(named("tools/call add_note")[0]?.parentSpanId).toBe(run?.spanId);
    });
  });
