/**
 * Resources over `/mcp`: read-only passthrough of the resources of servers that have
 * an enabled tool, under `gatehouse://<server>/<uri>`, against
 * @modelcontextprotocol/server-everything over stdio.
 */
import path from "node:path";
import { McpError, ResourceListChangedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { connectMcp } from "@/test/support/mcp";
import {
  createAgentToken,
  enableTool,
  LIST_NOTES,
  REPO_ROOT,
  startTestRuntime,
  type TestRuntime,
  waitForEvent,
} from "@/test/support/runtime";
import { serverViews } from "../servers/status";
import { RESOURCE_NOT_FOUND, unwrapUri, wrapUri } from "./resources";

const EVERYTHING = path.join(REPO_ROOT, "node_modules/@modelcontextprotocol/server-everything/dist/index.js");
const ECHO = "everything_echo";

let rt: TestRuntime;
let token: string;
const cleanups: (() => Promise<void>)[] = [];

async function connect() {
  const c = await connectMcp({ token });
  cleanups.push(() => c.close());
  return c.client;
}

async function rpcCode(p: Promise<unknown>): Promise<number> {
  try {
    await p;
  } catch (err) {
    if (err instanceof McpError) return err.code;
    throw err;
  }
  throw new Error("expected a JSON-RPC error");
}

describe("resources", () => {
  beforeEach(async () => {
    rt = await startTestRuntime({
      servers: { everything: { command: "node", args: [EVERYTHING, "stdio"], enabled: true } },
    });
    // "ready" is set after the first tool list is stored, so its catalogue rows exist by then.
    const ready = () =>
      serverViews(rt.runtime.manager, rt.runtime.db).find((s) => s.name === "everything")?.state === "ready";
    await waitForEvent(rt.runtime.bus, (e) => e.type === "server" && ready(), {
      already: ready,
      timeoutMs: 20_000,
      what: () => "server-everything to be ready",
    });
    token = createAgentToken(rt.runtime, "bot");
  }, 30_000);

  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
    await rt.stop();
  });

  it("a server with no enabled tool shows no resources, and its URIs cannot be read", async () => {
    enableTool(rt.runtime, LIST_NOTES);
    const client = await connect();
    expect(client.getServerCapabilities()?.resources).toBeDefined();
    expect((await client.listResources()).resources).toEqual([]);
    const uri = wrapUri("everything", "demo://resource/static/document/architecture.md");
    expect(await rpcCode(client.readResource({ uri }))).toBe(RESOURCE_NOT_FOUND);
  });

  it("once a tool of the server is enabled its resources are listed under gatehouse://<server>/ and read through", async () => {
    enableTool(rt.runtime, ECHO);
    const client = await connect();
    const { resources } = await client.listResources();
    expect(resources.length).toBeGreaterThan(0);
    for (const r of resources) {
      expect(r.uri.startsWith("gatehouse://everything/")).toBe(true);
      expect(r.name.length).toBeGreaterThan(0);
    }
    const text = resources.find((r) => r.mimeType?.startsWith("text/")) ?? resources[0];
    const original = unwrapUri(text?.uri ?? "");
    expect(original?.server).toBe("everything");
    const read = await client.readResource({ uri: text?.uri ?? "" });
    expect(read.contents.length).toBeGreaterThan(0);
    for (const c of read.contents) expect(c.uri).toBe(text?.uri);
    expect(
      read.contents.some((c) => ("text" in c && c.text.length > 0) || ("blob" in c && c.blob.length > 0)),
    ).toBe(true);
  }, 30_000);

  it("a URI outside the prefix, or naming an unknown server, is not found", async () => {
    enableTool(rt.runtime, ECHO);
    const client = await connect();
    expect(await rpcCode(client.readResource({ uri: "file:///etc/passwd" }))).toBe(RESOURCE_NOT_FOUND);
    expect(await rpcCode(client.readResource({ uri: wrapUri("nosuch", "file:///etc/passwd") }))).toBe(
      RESOURCE_NOT_FOUND,
    );
    expect(await rpcCode(client.readResource({ uri: "gatehouse://everything/%E0%A4%A" }))).toBe(
      RESOURCE_NOT_FOUND,
    );
  });

  it("resource templates are not passed through: the list is empty", async () => {
    enableTool(rt.runtime, ECHO);
    const client = await connect();
    expect((await client.listResourceTemplates()).resourceTemplates).toEqual([]);
  });

  it("notifications/resources/list_changed when the set of servers with an enabled tool changes", async () => {
    const client = await connect();
    const notified = new Promise<void>((resolve) => {
      client.setNotificationHandler(ResourceListChangedNotificationSchema, () => resolve());
    });
    enableTool(rt.runtime, ECHO);
    rt.runtime.bus.publish({ type: "catalogue", server: "everything" });
    await notified;
    expect((await client.listResources()).resources.length).toBeGreaterThan(0);
  }, 30_000);
});

describe("resource URIs", () => {
  it("wrap and unwrap round-trip any URI, and the server is the URI's host", () => {
    for (const uri of ["file:///srv/a b.txt", "test://static?x=1#y", "demo://ü/ß", "a/b%2Fc"]) {
      const wrapped = wrapUri("files", uri);
      expect(wrapped.startsWith("gatehouse://files/")).toBe(true);
      expect(new URL(wrapped).hostname).toBe("files");
      expect(unwrapUri(wrapped)).toEqual({ server: "files", uri });
    }
    expect(unwrapUri("gatehouse://Bad_Name/x")).toBeNull();
    expect(unwrapUri("gatehouse://files/")).toBeNull();
    expect(unwrapUri("https://files/x")).toBeNull();
  });
});
