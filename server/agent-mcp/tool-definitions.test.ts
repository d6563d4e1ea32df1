/**
 * Tool definitions pass through whole: a real stdio server (test/fixtures/servers/titled-tools.mjs)
 * through the real catalogue refresh to `/api/catalogue`, `/api/tools` and `/mcp` `tools/list`,
 * with its title, output schema and `data:` icons, and never a URL icon; a call's
 * `structuredContent` reaches the `/mcp` agent, whose SDK client checks it against the served
 * output schema.
 */
import path from "node:path";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { afterEach, describe, expect, it } from "vitest";
import type { AgentToolView, CatalogueToolView } from "@/lib/api-types";
import { connectMcp } from "@/test/support/mcp";
import {
  bodyOf,
  createAgentToken,
  createTestUser,
  enableTool,
  REPO_ROOT,
  request,
  startTestRuntime,
  type TestRuntime,
  waitForEvent,
} from "@/test/support/runtime";
import { getToolRow } from "../catalogue/catalogue";
import { definitionHash } from "../catalogue/definition";
import { toMcpTool, toolsSignature } from "./tools";

const FIXTURE = path.join(REPO_ROOT, "test", "fixtures", "servers", "titled-tools.mjs");
const FORECAST = "titled_forecast";
const PLAIN = "titled_plain";
const PNG =
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";
const GIF = "R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7";

/** The icons of `forecast` that may pass, of the seven it lists. */
const PASSED_ICONS = [
  { src: `data:image/png;base64,${PNG}`, mimeType: "image/png", sizes: ["1x1"], theme: "light" },
  { src: `data:image/gif;base64,${GIF}`, sizes: ["any"] },
];
const OUTPUT_SCHEMA = {
  type: "object",
  properties: { city: { type: "string" }, celsius: { type: "number" } },
  required: ["city", "celsius"],
};

let t: TestRuntime | undefined;
afterEach(async () => {
  await t?.stop();
  t = undefined;
});

async function start(): Promise<TestRuntime> {
  t = await startTestRuntime({
    servers: { titled: { command: process.execPath, args: [FIXTURE], enabled: true } },
  });
  const { runtime } = t;
  await waitForEvent(runtime.bus, (e) => e.type === "catalogue" && e.server === "titled", {
    already: async () =>
      (await getToolRow(runtime.db, FORECAST)) !== null && (await getToolRow(runtime.db, PLAIN)) !== null,
    what: () => "the titled-tools server's catalogue",
  });
  return t;
}

/** Every string in `value`, at any depth. */
function stringsOf(value: unknown): string[] {
  if (typeof value === "string") return [value];
  if (Array.isArray(value)) return value.flatMap(stringsOf);
  if (value !== null && typeof value === "object") return Object.values(value).flatMap(stringsOf);
  return [];
}
const urlsIn = (value: unknown) => stringsOf(value).filter((s) => /^(?:https?:)?\/\//i.test(s));

describe("a real server's titled tool", () => {
  it("reaches the owner, /api/tools and /mcp with its title, output schema and data: icons, never a URL icon", async () => {
    const { runtime } = await start();
    const owner = await createTestUser(runtime, "olga", ["owner"]);
    const catalogue = await bodyOf<{ tools: CatalogueToolView[] }>(
      await request("GET", "/api/catalogue", { cookie: owner.cookie }),
    );
    const shown = catalogue.tools.find((x) => x.localName === FORECAST);
    expect(shown).toMatchObject({
      title: "Weather forecast",
      outputSchema: OUTPUT_SCHEMA,
      icons: PASSED_ICONS,
    });
    expect(catalogue.tools.find((x) => x.localName === PLAIN)).toMatchObject({ title: null, icons: [] });
    expect(urlsIn(catalogue)).toEqual([]);

    await enableTool(runtime, FORECAST);
    await enableTool(runtime, PLAIN);
    const token = await createAgentToken(runtime, "bot");

    const rest = await bodyOf<{ tools: AgentToolView[] }>(
      await request("GET", "/api/tools", { bearer: token }),
    );
    expect(rest.tools.find((x) => x.name === FORECAST)).toMatchObject({
      title: "Weather forecast",
      outputSchema: OUTPUT_SCHEMA,
      icons: PASSED_ICONS,
    });
    const plainRest = rest.tools.find((x) => x.name === PLAIN);
    expect(plainRest).not.toHaveProperty("title");
    expect(plainRest).not.toHaveProperty("outputSchema");
    expect(plainRest).not.toHaveProperty("icons");
    expect(urlsIn(rest)).toEqual([]);

    const { client, close } = await connectMcp({ token });
    try {
      const listed = (await client.listTools()).tools;
      expect(listed.find((x) => x.name === FORECAST)).toMatchObject({
        title: "Weather forecast",
        outputSchema: OUTPUT_SCHEMA,
        icons: PASSED_ICONS,
        annotations: { readOnlyHint: true },
      });
      const plain = listed.find((x) => x.name === PLAIN);
      expect(plain).toBeDefined();
      expect(plain).not.toHaveProperty("title");
      expect(plain).not.toHaveProperty("outputSchema");
      expect(plain).not.toHaveProperty("icons");
      expect(urlsIn(listed)).toEqual([]);
    } finally {
      await close();
    }
  }, 30_000);

  it("a tool whose only icon is a URL hashes as a tool without icons", async () => {
    const { runtime } = await start();
    const row = await getToolRow(runtime.db, PLAIN);
    const def = JSON.parse(row?.definition ?? "{}");
    expect(def).not.toHaveProperty("icons");
    expect(def).not.toHaveProperty("title");
    expect(row?.definitionHash).toBe(
      definitionHash({
        name: "plain",
        description: "Says hello.",
        inputSchema: { type: "object", properties: {} },
        outputSchema: null,
        annotations: { readOnlyHint: true },
      }),
    );
  }, 30_000);

  it("a call's structuredContent reaches a /mcp agent, valid against the output schema it was served", async () => {
    const { runtime } = await start();
    await enableTool(runtime, FORECAST);
    const { client, close } = await connectMcp({ token: await createAgentToken(runtime, "bot") });
    try {
      // listTools first: the SDK client then checks every result of the tool against its schema.
      await client.listTools();
      const result = (await client.callTool({
        name: FORECAST,
        arguments: { city: "Oslo" },
      })) as CallToolResult;
      expect(result.isError).toBeFalsy();
      expect(result.structuredContent).toEqual({ city: "Oslo", celsius: 21 });
      expect(result.content).toEqual([{ type: "text", text: JSON.stringify({ city: "Oslo", celsius: 21 }) }]);
    } finally {
      await close();
    }
  }, 30_000);
});

describe("toMcpTool", () => {
  const base: AgentToolView = {
    name: "srv_a",
    description: "the a tool",
    inputSchema: { type: "object" },
    annotations: null,
    destructive: true,
  };

  it("serves an output schema only when it is an object schema, as the spec requires", () => {
    expect(toMcpTool({ ...base, outputSchema: { type: "object" } }).outputSchema).toEqual({ type: "object" });
    for (const outputSchema of [{ type: "string" }, { type: ["object", "null"] }, [], "object", null, 7]) {
      expect(toMcpTool({ ...base, outputSchema })).not.toHaveProperty("outputSchema");
    }
  });

  it("serves the title and icons when the tool has them, and no empty ones", () => {
    const icons = [{ src: `data:image/png;base64,${PNG}` }];
    expect(toMcpTool({ ...base, title: "A", icons })).toMatchObject({ title: "A", icons });
    const bare = toMcpTool({ ...base, title: "", icons: [] });
    expect(bare).not.toHaveProperty("title");
    expect(bare).not.toHaveProperty("icons");
  });

  it("serves an input schema without x-mcp-header declarations, which Gatehouse would have to check", () => {
    const inputSchema = {
      type: "object",
      properties: {
        region: { type: "string", "x-mcp-header": "Region", description: "where" },
        nested: { type: "object", properties: { zone: { type: "string", "x-mcp-header": "Zone" } } },
        plain: { type: "string" },
      },
      required: ["region"],
    };
    expect(toMcpTool({ ...base, inputSchema }).inputSchema).toEqual({
      type: "object",
      properties: {
        region: { type: "string", description: "where" },
        nested: { type: "object", properties: { zone: { type: "string" } } },
        plain: { type: "string" },
      },
      required: ["region"],
    });
    // Untouched: the catalogue's definition, and what calls are checked against.
    expect(inputSchema.properties.region).toHaveProperty("x-mcp-header", "Region");
  });

  it("the tools signature changes when a title, an output schema or the icons change", () => {
    const before = toolsSignature([base]);
    expect(toolsSignature([{ ...base, title: "A" }])).not.toBe(before);
    expect(toolsSignature([{ ...base, outputSchema: { type: "object" } }])).not.toBe(before);
    expect(toolsSignature([{ ...base, icons: [{ src: `data:image/png;base64,${PNG}` }] }])).not.toBe(before);
  });
});
