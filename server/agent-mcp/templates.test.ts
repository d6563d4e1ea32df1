/**
 * Resource templates over `/mcp`: listed as `gatehouse://<server>/-/<template>` for servers with
 * an enabled tool, and a read of an expansion of one passed to its server as exactly the
 * server's own expansion, audited naming the template. Against the careless template server
 * (test/fixtures/servers/templates.mjs), which would serve any URI at all.
 */
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { UriTemplate as SdkUriTemplate } from "@modelcontextprotocol/sdk/shared/uriTemplate.js";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { connectMcp } from "@/test/support/mcp";
import {
  createAgentToken,
  enableTool,
  startTestRuntime,
  type TestRuntime,
  waitForServersReady,
} from "@/test/support/runtime";
import { logger } from "../log";
import { type AuditRow, listAuditByActions } from "../store/audit";
import { rpcRefusal } from "./files-fixtures";
import { unwrapUri, wrapUri } from "./links";
import type { ResourceDeps } from "./listings";
import { listResourceReads } from "./reads";
import { ListedResources, RESOURCE_NOT_FOUND, readResource } from "./resources";
import { expandTemplate, TEMPLATES_SERVER } from "./template-fixtures";
import {
  holdsDotSegment,
  ListedTemplates,
  MAX_TEMPLATES_PER_SERVER,
  mediaTypeOf,
  unwrapVerbatimUri,
  wrapTemplate,
} from "./templates";
import { parseUriTemplate } from "./uri-template";

let rt: TestRuntime;
let token: string;
const cleanups: (() => Promise<void>)[] = [];

/** A runtime with these template servers (name → fixture arguments), each ready with its `served` tool enabled. */
async function start(servers: Record<string, string[]>): Promise<void> {
  rt = await startTestRuntime({
    servers: Object.fromEntries(
      Object.entries(servers).map(([name, args]) => [
        name,
        { command: "node", args: [TEMPLATES_SERVER, ...args], enabled: true },
      ]),
    ),
  });
  await waitForServersReady(rt.runtime, Object.keys(servers));
  for (const name of Object.keys(servers)) await enableTool(rt.runtime, `${name}_served`);
  token = await createAgentToken(rt.runtime, "bot");
}

async function connect(): Promise<Client> {
  const c = await connectMcp({ token });
  cleanups.push(() => c.close());
  return c.client;
}

/** What the fixture `server` was asked: the URIs it read, and how many template lists it answered. */
async function served(server: string): Promise<{ reads: string[]; templateLists: number }> {
  const res = await rt.runtime.manager
    .get(server)
    .read((client, options) => client.callTool({ name: "served", arguments: {} }, options));
  const first = (res.content as { type: string; text?: string }[])[0];
  return JSON.parse(first?.text ?? "{}");
}

function readRows(): Promise<AuditRow[]> {
  return listAuditByActions(rt.runtime.db, { actions: ["resource.read", "resource.refused"], limit: 100 });
}

function deps(): ResourceDeps {
  return {
    db: rt.runtime.db,
    manager: rt.runtime.manager,
    log: logger("test-templates"),
    descriptionMaxChars: 1024,
  };
}

afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
  await rt?.stop();
});

describe("resource templates through /mcp", () => {
  beforeEach(() => start({ tpl: [] }), 30_000);

  it("resources/templates/list gives each template as gatehouse://<server>/-/<template>, cleaned, and leaves out what is no level 1–3 template", async () => {
    const client = await connect();
    const { resourceTemplates } = await client.listResourceTemplates();
    expect(resourceTemplates).toEqual([
      {
        uriTemplate: "gatehouse://tpl/-/note://notes/{name}",
        name: "Note",
        title: "A note",
        description: "A note by its name.",
        mimeType: "text/markdown",
      },
      {
        uriTemplate: "gatehouse://tpl/-/file:///srv/{+path}",
        name: "File",
        mimeType: "text/plain; charset=utf-8",
      },
      // A made-up media type is dropped.
      { uriTemplate: "gatehouse://tpl/-/search://docs{?q,lang}", name: "Search" },
      { uriTemplate: "gatehouse://tpl/-/tile://map{/z,x,y}.png", name: "Tile", mimeType: "image/png" },
      // A name with nothing left after cleaning is the server's template.
      { uriTemplate: "gatehouse://tpl/-/matrix://m{;a,b}", name: "matrix://m{;a,b}" },
      {
        uriTemplate: "gatehouse://tpl/-/doc://book/{+chapter}{#section}",
        name: "Chapter",
        description: `${"x".repeat(1023)}…`,
      },
    ]);
  }, 30_000);

  it("a URI expanded from a listed template reaches the server as exactly its own expansion, audited naming the template", async () => {
    const client = await connect();
    const { resourceTemplates } = await client.listResourceTemplates();
    const cases: [string, Record<string, string | undefined>][] = [
      ["note://notes/{name}", { name: "a b/ü?#%" }],
      ["file:///srv/{+path}", { path: "docs/a b/x?y#z%41" }],
      ["search://docs{?q,lang}", { q: "a&b=c", lang: "en" }],
      ["search://docs{?q,lang}", { lang: "de" }],
      ["tile://map{/z,x,y}.png", { z: "1", x: "2/3", y: "" }],
      ["matrix://m{;a,b}", { a: "", b: "x;y" }],
      ["doc://book/{+chapter}{#section}", { chapter: "1/intro", section: "a b" }],
    ];
    const expected: string[] = [];
    for (const [template, vars] of cases) {
      const listed = resourceTemplates.find((t) => t.uriTemplate === wrapTemplate("tpl", template));
      expect(listed, template).toBeDefined();
      const uri = expandTemplate(listed?.uriTemplate ?? "", vars);
      const own = expandTemplate(template, vars);
      expect(uri).toBe(`gatehouse://tpl/-/${own}`);
      const read = await client.readResource({ uri });
      // The server received its own expansion, and the content names the URI the agent asked for.
      expect(read.contents).toEqual([{ uri, mimeType: "text/plain", text: own }]);
      expected.push(own);
    }
    expect((await served("tpl")).reads).toEqual(expected);
    const rows = (await readRows()).reverse();
    expect(rows.map((r) => [r.actor, r.action, r.subject])).toEqual(
      expected.map((own) => ["bot", "resource.read", `tpl ${own}`]),
    );
    rows.forEach((row, i) => {
      expect(row.detail).toMatch(
        new RegExp(`^through template ${literally(cases[i]?.[0] ?? "")}; \\d+ bytes$`),
      );
    });
    // The Activity page's list shows the read as one of the server's own URI.
    expect((await listResourceReads(rt.runtime.db)).reads[0]).toMatchObject({
      server: "tpl",
      uri: expected.at(-1),
      allowed: true,
      detail: expect.stringMatching(/^through template doc:\/\/book\/\{\+chapter\}\{#section\}; /),
    });
  }, 30_000);

  it("a URI that matches no template, or only through a dot segment, is refused with -32002, audited, and never reaches the server", async () => {
    const client = await connect();
    await client.listResourceTemplates();
    const noTemplate = [
      "note://notes/a/b",
      "note://notes/a b",
      "search://docs?lang=en&q=x",
      "tile://map/1/2/3/4.png",
      "matrix://m;a=",
      // The templates that were left out admit nothing.
      "wild://a/b",
      "bad://x",
      "file:///etc/passwd",
    ];
    const dotted = [
      "file:///srv/../etc/passwd",
      "file:///srv/%2e%2e/etc/passwd",
      "file:///srv/docs/..%2F..%2Fetc",
      "note://notes/..",
      "note://notes/..%2Fsecret",
      "note://notes/a%00.md",
    ];
    const messages = new Set<string>();
    for (const own of [...noTemplate, ...dotted]) {
      const err = await rpcRefusal(client.readResource({ uri: `gatehouse://tpl/-/${own}` }));
      expect(err.code, own).toBe(RESOURCE_NOT_FOUND);
      messages.add(err.message);
    }
    // One answer whatever the reason, so an agent cannot probe the templates.
    expect(messages.size).toBe(1);
    expect((await served("tpl")).reads).toEqual([]);
    const rows = (await readRows()).reverse();
    expect(rows.map((r) => [r.action, r.subject])).toEqual(
      [...noTemplate, ...dotted].map((own) => ["resource.refused", `tpl ${own}`]),
    );
    expect(rows.slice(0, noTemplate.length).map((r) => r.detail)).toEqual(
      noTemplate.map(() => "not listed by the server"),
    );
    expect(rows.slice(noTemplate.length).map((r) => r.detail)).toEqual([
      "matches template file:///srv/{+path} but holds a dot segment or an encoded NUL",
      "matches template file:///srv/{+path} but holds a dot segment or an encoded NUL",
      "matches template file:///srv/{+path} but holds a dot segment or an encoded NUL",
      "matches template note://notes/{name} but holds a dot segment or an encoded NUL",
      "matches template note://notes/{name} but holds a dot segment or an encoded NUL",
      "matches template note://notes/{name} but holds a dot segment or an encoded NUL",
    ]);
  }, 30_000);

  it("a dot segment percent-encoded twice or more is refused like a plain one, and never reaches the server", async () => {
    const client = await connect();
    await client.listResourceTemplates();
    const dotted = [
      "file:///srv/%252e%252e%252fetc/passwd",
      "file:///srv/docs/%252E%252E/etc",
      "file:///srv/%25252e%25252e/etc/passwd",
      "note://notes/%252e%252e%252fsecret",
      "note://notes/%252e%252e",
      "note://notes/a%2500.md",
    ];
    for (const own of dotted) {
      const err = await rpcRefusal(client.readResource({ uri: `gatehouse://tpl/-/${own}` }));
      expect(err.code, own).toBe(RESOURCE_NOT_FOUND);
    }
    expect((await served("tpl")).reads).toEqual([]);
    expect(
      (await readRows())
        .reverse()
        .map((r) => [r.action, r.subject, r.detail?.endsWith("but holds a dot segment or an encoded NUL")]),
    ).toEqual(dotted.map((own) => ["resource.refused", `tpl ${own}`, true]));
  }, 30_000);

  it("the percent-encoded form of an expansion reads the same resource, its contents in that form", async () => {
    const client = await connect();
    const uri = wrapUri("tpl", "note://notes/a%20b");
    const read = await client.readResource({ uri });
    expect(read.contents).toEqual([{ uri, mimeType: "text/plain", text: "note://notes/a%20b" }]);
    expect((await readRows())[0]?.detail).toMatch(/^through template note:\/\/notes\/\{name\}; /);
  }, 30_000);

  it("a read before any list lists the server's templates first; probes cost the server at most one template list per interval", async () => {
    const before = (await served("tpl")).templateLists;
    const first = await readResource(
      deps(),
      { agent: "bot", listed: new ListedResources(0) },
      "gatehouse://tpl/-/note://notes/x",
    );
    expect(first.contents).toMatchObject([{ text: "note://notes/x" }]);
    expect((await served("tpl")).templateLists).toBe(before + 1);

    const ctx = { agent: "bot", listed: new ListedResources(60_000) };
    const probes = Array.from({ length: 20 }, (_, i) =>
      rpcRefusal(readResource(deps(), ctx, `gatehouse://tpl/-/guess://${i}`)),
    );
    for (const err of await Promise.all(probes)) expect(err.code).toBe(RESOURCE_NOT_FOUND);
    await rpcRefusal(readResource(deps(), ctx, "gatehouse://tpl/-/note://notes/a/b"));
    expect((await served("tpl")).templateLists).toBe(before + 2);
  }, 30_000);
});

describe("resource templates are bounded", () => {
  beforeEach(
    () =>
      start({
        many: ["--many", "300", "--page", "50"],
        paged: ["--many", "300", "--page", "5"],
        all: ["--match-all"],
      }),
    30_000,
  );

  it(`at most ${MAX_TEMPLATES_PER_SERVER} templates per server and 10 pages are taken; a URI matching only one past them is refused`, async () => {
    const client = await connect();
    const { resourceTemplates } = await client.listResourceTemplates();
    const of = (server: string) =>
      resourceTemplates.filter((t) => t.uriTemplate.startsWith(`gatehouse://${server}/`));
    expect(of("many").map((t) => t.uriTemplate)).toEqual(
      Array.from({ length: MAX_TEMPLATES_PER_SERVER }, (_, i) => `gatehouse://many/-/many://t${i}/{id}`),
    );
    expect(of("paged")).toHaveLength(50);
    await client.readResource({ uri: "gatehouse://many/-/many://t99/1" });
    await client.readResource({ uri: "gatehouse://paged/-/many://t49/1" });
    for (const uri of ["gatehouse://many/-/many://t100/1", "gatehouse://paged/-/many://t50/1"])
      expect((await rpcRefusal(client.readResource({ uri }))).code, uri).toBe(RESOURCE_NOT_FOUND);
    expect((await served("many")).reads).toEqual(["many://t99/1"]);
    expect((await served("paged")).reads).toEqual(["many://t49/1"]);
  }, 30_000);

  it("a template that admits everything lets an agent read what that server serves, never through a dot segment", async () => {
    const client = await connect();
    const { resourceTemplates } = await client.listResourceTemplates();
    expect(resourceTemplates.filter((t) => t.uriTemplate.startsWith("gatehouse://all/"))).toEqual([
      { uriTemplate: "gatehouse://all/-/{+uri}", name: "Anything" },
    ]);
    const read = await client.readResource({ uri: "gatehouse://all/-/file:///etc/hostname" });
    expect(read.contents).toMatchObject([{ text: "file:///etc/hostname" }]);
    const err = await rpcRefusal(client.readResource({ uri: "gatehouse://all/-/file:///srv/../etc/passwd" }));
    expect(err.code).toBe(RESOURCE_NOT_FOUND);
    expect((await served("all")).reads).toEqual(["file:///etc/hostname"]);
    expect((await readRows())[0]?.detail).toBe(
      "matches template {+uri} but holds a dot segment or an encoded NUL",
    );
  }, 30_000);
});

describe("the gatehouse form of a template", () => {
  const templates = [
    "note://notes/{name}",
    "file:///{path}",
    "file:///srv/{+path}",
    "{+anything}",
    "{scheme}://{+rest}",
    "search://docs{?q,lang}",
    "x:{a}{&b}",
    "doc://{+chapter}{#section}",
    "tile://{/z,x}{.ext}{;m}",
  ];
  const values = ["", "a b", "a/b", "%", "%41", "ü", "?x=1#y", "gatehouse://other/x", "-/", "a,b;c=d"];
  const names = [
    "name",
    "path",
    "anything",
    "scheme",
    "rest",
    "q",
    "lang",
    "a",
    "b",
    "chapter",
    "section",
    "z",
    "x",
    "ext",
    "m",
  ];

  it("an agent's expansion of a listed template is, after the mark, exactly the server's own expansion, for any values", () => {
    for (const template of templates)
      for (const v of values) {
        const vars = Object.fromEntries(names.map((n, i) => [n, i % 3 === 2 ? undefined : v]));
        const own = expandTemplate(template, vars);
        const wrapped = expandTemplate(wrapTemplate("files", template), vars);
        expect(wrapped).toBe(`gatehouse://files/-/${own}`);
        if (own !== "")
          expect(unwrapVerbatimUri(wrapped), `${template} ${v}`).toEqual({ server: "files", uri: own });
      }
  });

  it("the SDK's own expander, as an agent would use it, gives the same URIs", () => {
    const sdk = (template: string, vars: Record<string, string>) => new SdkUriTemplate(template).expand(vars);
    for (const [template, vars] of [
      ["demo://resource/dynamic/text/{resourceId}", { resourceId: "7" }],
      ["search://docs{?q}", { q: "a b" }],
      ["note://notes/{name}", { name: "a/b" }],
    ] as const) {
      const wrapped = sdk(wrapTemplate("everything", template), vars);
      expect(wrapped).toBe(`gatehouse://everything/-/${sdk(template, vars)}`);
      expect(unwrapVerbatimUri(wrapped)?.uri).toBe(expandTemplate(template, vars));
    }
  });

  it("the verbatim and percent-encoded forms never take one for the other", () => {
    for (const uri of ["-/x", "note://notes/a", "file:///srv/a%20b", "-", "x"]) {
      expect(unwrapVerbatimUri(wrapUri("files", uri))).toBeNull();
      expect(unwrapUri(wrapUri("files", uri))).toEqual({ server: "files", uri });
    }
    expect(unwrapVerbatimUri("gatehouse://files/-/")).toBeNull();
    expect(unwrapVerbatimUri("gatehouse://Bad_Name/-/x")).toBeNull();
    // Decoding a verbatim URI as the encoded form would not give the server's expansion.
    expect(unwrapUri("gatehouse://files/-/note://notes/a%20b")?.uri).not.toBe("note://notes/a%20b");
  });
});

describe("what a template read admits", () => {
  it.each([
    ["file:///srv/a.md", false],
    ["file:///srv/..", true],
    ["file:///srv/../x", true],
    ["file:///srv/./x", true],
    ["file:///srv/%2e%2E/x", true],
    ["file:///srv/..%2fx", true],
    ["file:///srv/..%5Cx", true],
    ["file:///srv/a\\..\\x", true],
    ["search://docs?q=..", true],
    ["search://docs?q=...", false],
    ["note://notes/a..b", false],
    ["note://notes/a%00", true],
    ["notes:..", true],
    // Encoded twice or more: a server that decodes as often finds the dot segment.
    ["file:///srv/%252e%252e%252fx", true],
    ["file:///srv/%252E%252E/x", true],
    ["file:///srv/..%252fx", true],
    ["file:///srv/%25252e%25252e/x", true],
    ["note://notes/a%2500", true],
    ["note://notes/100%25", false],
    ["note://notes/a%2520b", false],
  ])("%s holds a dot segment: %s", (uri, holds) => {
    expect(holdsDotSegment(uri)).toBe(holds);
  });

  it.each([
    ["text/plain", true],
    ["text/plain; charset=utf-8", true],
    ['text/plain;charset="utf-8"', true],
    ["application/vnd.api+json", true],
    ["image/svg+xml", true],
    ["text", false],
    ["text/", false],
    ["<script>alert(1)</script>", false],
    ["text/plain\u202E", false],
    ["text/plain\nX-Header: 1", false],
    [`text/${"a".repeat(200)}`, false],
  ])("%s is a plausible media type: %s", (type, plausible) => {
    expect(mediaTypeOf(type) !== undefined).toBe(plausible);
  });

  it("the first matching template in the server's order is named, and a costly list gives up instead of matching", () => {
    const listed = new ListedTemplates();
    const parse = (t: string) => {
      const parsed = parseUriTemplate(t);
      if (!parsed) throw new Error(t);
      return parsed;
    };
    listed.recordTemplates("s", [parse("x://a/{id}"), parse("x://{+any}")]);
    expect(listed.matching("s", "x://a/1")).toEqual({ template: "x://a/{id}", exhausted: false });
    expect(listed.matching("s", "x://b/1")).toEqual({ template: "x://{+any}", exhausted: false });
    expect(listed.matching("s", "y://b")).toEqual({ template: null, exhausted: false });
    expect(listed.matching("other", "x://a/1")).toEqual({ template: null, exhausted: false });
    const hostile = Array.from({ length: 100 }, (_, i) => parse(`x://${"{a}".repeat(300)}${i}!`));
    listed.recordTemplates("s", hostile);
    expect(listed.matching("s", `x://${"a".repeat(2000)}`)).toEqual({ template: null, exhausted: true });
  });
});

/** `text` as a regular expression matching it literally. */
function literally(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}
