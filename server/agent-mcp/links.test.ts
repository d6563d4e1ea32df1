/**
 * Resource links in tool results over `/mcp`: rewritten to `gatehouse://<server>/…`, readable
 * as offered by their server, audited as linked, against @modelcontextprotocol/server-everything
 * over stdio through the real endpoint.
 */
import path from "node:path";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { McpError } from "@modelcontextprotocol/sdk/types.js";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { connectMcp } from "@/test/support/mcp";
import {
  createAgentToken,
  enableTool,
  REPO_ROOT,
  startTestRuntime,
  type TestRuntime,
  waitForServersReady,
} from "@/test/support/runtime";
import { listAuditByActions } from "../store/audit";
import { LinkedUris, linkResult, MAX_URI_CHARS, unwrapUri, wrapUri } from "./links";
import { RESOURCE_NOT_FOUND } from "./resources";

const EVERYTHING = path.join(REPO_ROOT, "node_modules/@modelcontextprotocol/server-everything/dist/index.js");
const LINKS = "everything_get-resource-links";
const REFERENCE = "everything_get-resource-reference";
const STRUCTURED = "everything_get-structured-content";

let rt: TestRuntime;
let token: string;
const cleanups: (() => Promise<void>)[] = [];

async function connect() {
  const c = await connectMcp({ token });
  cleanups.push(() => c.close());
  return c.client;
}

async function call(name: string, args: Record<string, unknown>): Promise<CallToolResult> {
  const client = await connect();
  return (await client.callTool({ name, arguments: args })) as CallToolResult;
}

const reads = async () =>
  (await listAuditByActions(rt.runtime.db, { actions: ["resource.read", "resource.refused"], limit: 50 }))
    .reverse()
    .map((r) => [r.actor, r.action, r.subject, r.detail]);

type Block = CallToolResult["content"][number];
const linksOf = (res: CallToolResult) =>
  res.content.filter((b): b is Extract<Block, { type: "resource_link" }> => b.type === "resource_link");

describe("resource links in tool results over /mcp", () => {
  beforeEach(async () => {
    rt = await startTestRuntime({
      servers: { everything: { command: "node", args: [EVERYTHING, "stdio"], enabled: true } },
    });
    await waitForServersReady(rt.runtime, ["everything"]);
    token = await createAgentToken(rt.runtime, "bot");
  }, 30_000);

  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
    await rt.stop();
  });

  it("a tool result's resource links are gatehouse:// URIs, and a linked URI is read and audited as linked", async () => {
    await enableTool(rt.runtime, LINKS);
    const client = await connect();
    // The linked resources are dynamic ones, served from a template and never listed.
    const listed = (await client.listResources()).resources.map((r) => r.uri);
    const text2 = "demo://resource/dynamic/text/2";
    expect(listed).not.toContain(wrapUri("everything", text2));

    const res = (await client.callTool({ name: LINKS, arguments: { count: 4 } })) as CallToolResult;
    const links = linksOf(res);
    expect(links.map((l) => l.uri)).toEqual([
      wrapUri("everything", "demo://resource/dynamic/blob/1"),
      wrapUri("everything", text2),
      wrapUri("everything", "demo://resource/dynamic/blob/3"),
      wrapUri("everything", "demo://resource/dynamic/text/4"),
    ]);
    expect(links[1]).toMatchObject({ name: "Text Resource 2", mimeType: "text/plain" });
    expect(res.content[0]).toMatchObject({ type: "text" });

    const read = await client.readResource({ uri: links[1]?.uri ?? "" });
    expect(read.contents).toEqual([
      expect.objectContaining({ uri: wrapUri("everything", text2), mimeType: "text/plain" }),
    ]);
    expect(unwrapUri(read.contents[0]?.uri ?? "")).toEqual({ server: "everything", uri: text2 });
    const [row] = await reads();
    expect(row?.slice(0, 3)).toEqual(["bot", "resource.read", `everything ${text2}`]);
    expect(row?.[3]).toMatch(/^linked by a tool result; \d+ bytes$/);
  }, 30_000);

  // (That such a URI is refused even when its server would serve it is resource-reads.test.ts's.)
  it("a URI its server never linked nor listed, matching none of its templates, is refused", async () => {
    await enableTool(rt.runtime, LINKS);
    const unlinked = "demo://resource/dynamic/other/8";
    const client = await connect();
    await client.callTool({ name: LINKS, arguments: { count: 4 } });
    const err = await client.readResource({ uri: wrapUri("everything", unlinked) }).then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(McpError);
    expect((err as McpError).code).toBe(RESOURCE_NOT_FOUND);
    expect(await reads()).toEqual([
      ["bot", "resource.refused", `everything ${unlinked}`, "not listed by the server"],
    ]);
  }, 30_000);

  it("an embedded resource's URI is a gatehouse:// URI, readable as linked by another session", async () => {
    await enableTool(rt.runtime, REFERENCE);
    const res = await call(REFERENCE, { resourceType: "Text", resourceId: 5 });
    const embedded = res.content.find((b) => b.type === "resource");
    const uri = wrapUri("everything", "demo://resource/dynamic/text/5");
    expect(embedded).toMatchObject({ type: "resource", resource: { uri, mimeType: "text/plain" } });
    // What a server offers is offered to Gatehouse, one client to it: the listings are shared.
    const other = await connect();
    const read = await other.readResource({ uri });
    expect(read.contents[0]?.uri).toBe(uri);
    expect((await reads())[0]?.[3]).toMatch(/^linked by a tool result; /);
  }, 30_000);

  it("structuredContent of a tool result passes through unchanged", async () => {
    await enableTool(rt.runtime, STRUCTURED);
    const res = await call(STRUCTURED, { location: "Chicago" });
    expect(res.structuredContent).toEqual({
      temperature: 36,
      conditions: "Light rain / drizzle",
      humidity: 82,
    });
  }, 30_000);
});

describe("a tool result's links as the agent gets them", () => {
  it("names, titles and descriptions are cleaned of hidden characters; other blocks and fields pass as they are", () => {
    const linked = new LinkedUris();
    const result: CallToolResult = {
      content: [
        { type: "text", text: "see x://a" },
        {
          type: "resource_link",
          uri: "x://a",
          name: "re\u200Bport\u202E",
          title: "T\u2066itle",
          description: "line\u2028two\u200D",
          mimeType: "text/plain",
          annotations: { priority: 1 },
        },
        { type: "resource_link", uri: "x://b", name: "\u200B\u200B" },
        { type: "resource", resource: { uri: "x://c", text: "inline\u200B" } },
      ],
      structuredContent: { uri: "x://a" },
      isError: false,
    };
    const out = linkResult("s", result, linked, 100);
    expect(out).toEqual({
      content: [
        { type: "text", text: "see x://a" },
        {
          type: "resource_link",
          uri: wrapUri("s", "x://a"),
          name: "report",
          title: "Title",
          description: "line\ntwo",
          mimeType: "text/plain",
          annotations: { priority: 1 },
        },
        { type: "resource_link", uri: wrapUri("s", "x://b"), name: "x://b" },
        // An embedded resource's text is content, like a text block: it is not rewritten.
        { type: "resource", resource: { uri: wrapUri("s", "x://c"), text: "inline\u200B" } },
      ],
      structuredContent: { uri: "x://a" },
      isError: false,
    });
    for (const uri of ["x://a", "x://b", "x://c"]) expect(linked.has("s", uri)).toBe(true);
    expect(linked.has("other", "x://a")).toBe(false);
  });

  it("a link without a string URI is dropped, and a URI over the bound is wrapped but not readable", () => {
    const linked = new LinkedUris();
    const long = `x://${"a".repeat(MAX_URI_CHARS)}`;
    const out = linkResult(
      "s",
      {
        content: [
          { type: "resource_link", uri: 7, name: "n" } as unknown as CallToolResult["content"][number],
          { type: "resource_link", uri: long, name: "n" },
        ],
      },
      linked,
      100,
    );
    expect(out.content).toEqual([{ type: "resource_link", uri: wrapUri("s", long), name: "n" }]);
    expect(linked.has("s", long)).toBe(false);
  });

  it("linked URIs are bounded per server: the oldest goes, and linking one again makes it the newest", () => {
    const linked = new LinkedUris(3);
    for (const uri of ["x://1", "x://2", "x://3"]) linked.add("s", uri);
    linked.add("s", "x://1");
    linked.add("s", "x://4");
    expect(["x://1", "x://2", "x://3", "x://4"].map((u) => linked.has("s", u))).toEqual([
      true,
      false,
      true,
      true,
    ]);
    linked.add("t", "x://5");
    expect(linked.has("s", "x://3")).toBe(true);
  });
});
