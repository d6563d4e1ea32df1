/**
 * Resources over `/mcp`: read-only passthrough of the resources of servers that have
 * an enabled tool, under `gatehouse://<server>/<uri>`, against
 * @modelcontextprotocol/server-everything over stdio.
 */
import path from "node:path";
import { UriTemplate } from "@modelcontextprotocol/sdk/shared/uriTemplate.js";
import {
  McpError,
  PromptListChangedNotificationSchema,
  ResourceListChangedNotificationSchema,
} from "@modelcontextprotocol/sdk/types.js";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { connectMcp } from "@/test/support/mcp";
import {
  createAgentToken,
  enableTool,
  LIST_NOTES,
  REPO_ROOT,
  startTestRuntime,
  type TestRuntime,
  waitForServersReady,
} from "@/test/support/runtime";
import { listAuditByActions } from "../store/audit";
import { unwrapUri, wrapUri } from "./links";
import {
  allowedByOwner,
  boundContents,
  ListedResources,
  RESOURCE_NOT_FOUND,
  TRUNCATED_META_KEY,
} from "./resources";

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
    await waitForServersReady(rt.runtime, ["everything"]);
    token = await createAgentToken(rt.runtime, "bot");
  }, 30_000);

  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
    await rt.stop();
  });

  it("a server with no enabled tool shows no resources, and its URIs cannot be read", async () => {
    await enableTool(rt.runtime, LIST_NOTES);
    const client = await connect();
    expect(client.getServerCapabilities()?.resources).toBeDefined();
    expect((await client.listResources()).resources).toEqual([]);
    expect((await client.listResourceTemplates()).resourceTemplates).toEqual([]);
    const uri = wrapUri("everything", "demo://resource/static/document/architecture.md");
    expect(await rpcCode(client.readResource({ uri }))).toBe(RESOURCE_NOT_FOUND);
    const templated = "gatehouse://everything/-/demo://resource/dynamic/text/7";
    expect(await rpcCode(client.readResource({ uri: templated }))).toBe(RESOURCE_NOT_FOUND);
  });

  it("once a tool of the server is enabled its resources are listed under gatehouse://<server>/ and read through", async () => {
    await enableTool(rt.runtime, ECHO);
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
    await enableTool(rt.runtime, ECHO);
    const client = await connect();
    expect(await rpcCode(client.readResource({ uri: "file:///etc/passwd" }))).toBe(RESOURCE_NOT_FOUND);
    expect(await rpcCode(client.readResource({ uri: wrapUri("nosuch", "file:///etc/passwd") }))).toBe(
      RESOURCE_NOT_FOUND,
    );
    expect(await rpcCode(client.readResource({ uri: "gatehouse://everything/%E0%A4%A" }))).toBe(
      RESOURCE_NOT_FOUND,
    );
  });

  it("its resource templates are listed under gatehouse://<server>/-/, and a URI an agent expands from one is read through and audited", async () => {
    await enableTool(rt.runtime, ECHO);
    const client = await connect();
    const { resourceTemplates } = await client.listResourceTemplates();
    const text = resourceTemplates.find(
      (t) => t.uriTemplate === "gatehouse://everything/-/demo://resource/dynamic/text/{resourceId}",
    );
    expect(text).toMatchObject({ name: "Dynamic Text Resource", mimeType: "text/plain" });
    for (const t of resourceTemplates)
      expect(t.uriTemplate.startsWith("gatehouse://everything/-/")).toBe(true);
    // Expanded as an agent's client would, with the SDK's own expander.
    const uri = new UriTemplate(text?.uriTemplate ?? "").expand({ resourceId: "7" });
    expect(uri).toBe("gatehouse://everything/-/demo://resource/dynamic/text/7");
    const read = await client.readResource({ uri });
    expect(read.contents).toMatchObject([{ uri, mimeType: "text/plain" }]);
    expect(read.contents[0] && "text" in read.contents[0] ? read.contents[0].text : "").toMatch(
      /^Resource 7: /,
    );
    const [row] = await listAuditByActions(rt.runtime.db, { actions: ["resource.read"], limit: 1 });
    expect(row).toMatchObject({ actor: "bot", subject: "everything demo://resource/dynamic/text/7" });
    expect(row?.detail).toMatch(
      /^through template demo:\/\/resource\/dynamic\/text\/\{resourceId\}; \d+ bytes$/,
    );
    // A URI beside the template is not read through it.
    const beside = "gatehouse://everything/-/demo://resource/dynamic/text/7/../../static/document/x";
    expect(await rpcCode(client.readResource({ uri: beside }))).toBe(RESOURCE_NOT_FOUND);
  }, 30_000);

  it("notifications/resources/list_changed and prompts/list_changed when the set of servers with an enabled tool changes", async () => {
    const client = await connect();
    const notified = new Promise<void>((resolve) => {
      client.setNotificationHandler(ResourceListChangedNotificationSchema, () => resolve());
    });
    const prompts = new Promise<void>((resolve) => {
      client.setNotificationHandler(PromptListChangedNotificationSchema, () => resolve());
    });
    await enableTool(rt.runtime, ECHO);
    rt.runtime.bus.publish({ type: "catalogue", server: "everything" });
    await Promise.all([notified, prompts]);
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

describe("what an owner's resources.allow admits", () => {
  const globs = ["file:///srv/docs/*", "demo://resource/static/?.md"];
  it.each([
    ["file:///srv/docs/a.md", true],
    ["file:///srv/docs/sub/b.md", true],
    ["demo://resource/static/a.md", true],
    ["demo://resource/static/ab.md", false],
    ["file:///srv/other/a.md", false],
    ["file:///srv/docs/../../etc/passwd", false],
    ["file:///srv/docs/./a.md", false],
    ["file:///srv/docs/%2e%2e/secret", false],
    ["file:///srv/docs/%2E%2E/secret", false],
    ["file:///srv/docs/..%2fsecret", false],
    ["file:///srv/docs/..%5csecret", false],
    ["file:///srv/docs/a%00.md", false],
    ["file:///srv/docs/a\\..\\..\\x", false],
    ["file://localhost/srv/docs/a.md", false],
    ["FILE:///srv/docs/a.md", false],
    ["file:///srv/docs/a b.md", false],
    ["file:///srv/docs/a%20b.md", true],
    // What the URL parser leaves alone but a server may resolve: query, fragment, backslash, opaque dot segments.
    ["file:///srv/docs/?/../../../etc/passwd", false],
    ["file:///srv/docs/#/../../../etc/passwd", false],
    ["demo://resource/static/..\\x.md", false],
    ["notes:docs/../secret", false],
    ["not a uri", false],
    // Encoded twice or more: a server that decodes as often walks out of the folder.
    ["file:///srv/docs/%252e%252e%252fsecret", false],
    ["file:///srv/docs/%252E%252E/secret", false],
    ["file:///srv/docs/%25252e%25252e/secret", false],
    ["file:///srv/docs/..%252fsecret", false],
    ["file:///srv/docs/a%2500.md", false],
    ["file:///srv/docs/a%2520b.md", true],
  ])("%s → %s", (uri, admitted) => {
    expect(allowedByOwner(globs, uri)).toBe(admitted);
  });

  it("no globs admit nothing", () => {
    expect(allowedByOwner([], "file:///srv/docs/a.md")).toBe(false);
  });
});

describe("a session's listed resources", () => {
  it("a read of an unknown URI re-lists a server at most once per interval, and concurrent reads share one list", async () => {
    let now = 0;
    const listed = new ListedResources(1000, () => now);
    let lists = 0;
    let finish: () => void = () => {};
    const list = () => {
      lists++;
      return new Promise<void>((resolve) => {
        finish = () => {
          listed.record("files", ["file:///a"]);
          resolve();
        };
      });
    };
    const first = listed.refresh("files", list);
    const second = listed.refresh("files", list);
    finish();
    await Promise.all([first, second]);
    expect(lists).toBe(1);
    expect(listed.has("files", "file:///a")).toBe(true);
    now = 999;
    await listed.refresh("files", list);
    expect(lists).toBe(1);
    now = 1000;
    const third = listed.refresh("files", list);
    finish();
    await third;
    expect(lists).toBe(2);
  });

  it("a failed list counts as a try: probes against a server whose list fails re-list it once per interval", async () => {
    let now = 0;
    const listed = new ListedResources(1000, () => now);
    let lists = 0;
    const failing = () => {
      lists++;
      return Promise.reject(new Error("list failed"));
    };
    await expect(listed.refresh("files", failing)).rejects.toThrow("list failed");
    now = 500;
    await listed.refresh("files", failing);
    expect(lists).toBe(1);
    now = 1000;
    await expect(listed.refresh("files", failing)).rejects.toThrow("list failed");
    expect(lists).toBe(2);
  });

  it("a new list replaces the old one, and servers are kept apart", () => {
    const listed = new ListedResources();
    listed.record("a", ["x://1", "x://2"]);
    listed.record("b", ["x://3"]);
    listed.record("a", ["x://2"]);
    expect(listed.has("a", "x://1")).toBe(false);
    expect(listed.has("a", "x://2")).toBe(true);
    expect(listed.has("a", "x://3")).toBe(false);
    expect(listed.has("b", "x://3")).toBe(true);
  });
});

describe("a read's contents are bounded", () => {
  it("texts are cut between characters, a blob that does not fit is left out, and the cut is marked", () => {
    const uri = "x://r";
    const uriBytes = wrapUri("s", uri).length;
    const out = boundContents(
      "s",
      [
        { uri, text: "ab" },
        { uri, blob: "QUJD".repeat(10) },
        { uri, text: "ééé" },
      ],
      uriBytes * 2 + 2 + 3,
    );
    expect(out.cut).toBe(true);
    expect(out.contents).toEqual([
      { uri: wrapUri("s", uri), text: "ab" },
      { uri: wrapUri("s", uri), text: "é", _meta: { [TRUNCATED_META_KEY]: true } },
    ]);
    expect(out.bytes).toBe(uriBytes * 2 + 2 + 2);
  });

  it("contents within the bound pass whole", () => {
    const out = boundContents("s", [{ uri: "x://r", text: "hello", mimeType: "text/plain" }], 1024);
    expect(out).toMatchObject({ cut: false, contents: [{ uri: wrapUri("s", "x://r"), text: "hello" }] });
  });
});
