/**
 * What MCP 2025-06-18 and later add to a tool definition, as the catalogue keeps it: the
 * top-level `title` (cleaned, capped, pinned, diffed) and `icons` (only `data:` URIs of raster
 * images pass), both absent when a tool has none, so that such a tool keeps the hash it had.
 */
import type { Tool } from "@modelcontextprotocol/client";
import { describe, expect, it } from "vitest";
import { memoryDb, OPTS, serverConfig, tool } from "@/test/support/catalogue";
import { callProblem } from "./callable";
import { getToolRow, listCatalogue, listEnabledTools, setToolStatus, syncServerTools } from "./catalogue";
import { cleanDefinition, definitionHash, definitionOf, ICON_MAX_CHARS, iconsOf } from "./definition";

const PNG =
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";
const GIF = "R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7";
const WEBP = "UklGRhoAAABXRUJQVlA4TA0AAAAvAAAAEAcQERGIiP4HAA==";
const JPEG = Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0, 0x10, 0x4a, 0x46, 0x49, 0x46, 0, 1]).toString("base64");
const SVG = Buffer.from('<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>').toString(
  "base64",
);
const png = `data:image/png;base64,${PNG}`;

/**
 * Hashes of title-less, icon-less definitions as the code before titles and icons were kept
 * computed them (literal, not recomputed): pins made then must still match.
 */
const HASH_BEFORE = {
  lookup: "ab85009b06fd7ab169e96a26fb018f20fe83ad9b891fc52192ee76b7e510c9a3",
  withOutput: "e3a1d937c4d6970d4660a0e7e8755219b5abd783f493ff32578bd8469ea83c11",
};
const lookup = {
  name: "lookup",
  description: "Looks up a word.",
  inputSchema: {
    type: "object",
    properties: { word: { type: "string", description: "The word" } },
    required: ["word"],
  },
  annotations: { title: "Look up", readOnlyHint: true },
} as Tool;
const withOutput = {
  name: "lookup",
  description: "Looks up a word.",
  inputSchema: { type: "object", properties: { word: { type: "string" } } },
  outputSchema: { type: "object", properties: { meaning: { type: "string" } } },
} as Tool;

describe("a definition without a title or icons", () => {
  it("hashes exactly as before titles and icons were kept", () => {
    expect(definitionHash(definitionOf(lookup))).toBe(HASH_BEFORE.lookup);
    expect(definitionHash(definitionOf(withOutput))).toBe(HASH_BEFORE.withOutput);
  });

  it("keeps that hash when its title is empty or its icons are URLs, which never pass", () => {
    const urls = [{ src: "https://icons.example.com/a.png" }, { src: "http://icons.example.com/a.png" }];
    const def = definitionOf({ ...lookup, title: "\u200B", icons: urls } as Tool);
    expect(def).not.toHaveProperty("title");
    expect(def).not.toHaveProperty("icons");
    expect(definitionHash(def)).toBe(HASH_BEFORE.lookup);
  });

  it("a row stored by a refresh keeps the hash its pin was made with", async () => {
    const d = await memoryDb();
    await syncServerTools(d, serverConfig("srv"), [lookup], OPTS);
    const row = await getToolRow(d, "srv_lookup");
    expect(row?.definitionHash).toBe(HASH_BEFORE.lookup);
    expect(Object.keys(JSON.parse(row?.definition ?? "{}")).sort()).toEqual([
      "annotations",
      "description",
      "inputSchema",
      "name",
      "outputSchema",
    ]);
  });
});

describe("the title", () => {
  it("joins the definition and its hash, cleaned of hidden characters", () => {
    const def = definitionOf({ ...lookup, title: "Word\u2060 lookup\u{E0041}" } as Tool);
    expect(def.title).toBe("Word lookup");
    expect(definitionHash(def)).not.toBe(HASH_BEFORE.lookup);
  });

  it("is capped at 200 characters, or descriptionMaxChars when that is shorter", () => {
    expect(definitionOf({ ...lookup, title: "t".repeat(500) } as Tool).title).toBe(`${"t".repeat(199)}…`);
    expect(definitionOf({ ...lookup, title: "t".repeat(500) } as Tool, 64).title).toBe(`${"t".repeat(63)}…`);
  });

  it("a title that is not a string is no title", () => {
    expect(definitionOf({ ...lookup, title: 42 } as unknown as Tool)).not.toHaveProperty("title");
  });
});

describe("icons", () => {
  const passes = (src: string) => iconsOf([{ src }]).length === 1;

  const ROWS: [string, string, boolean][] = [
    ["a PNG data: URI", png, true],
    ["a JPEG data: URI", `data:image/jpeg;base64,${JPEG}`, true],
    ["a JPEG data: URI typed image/jpg", `data:image/jpg;base64,${JPEG}`, true],
    ["a GIF data: URI", `data:image/gif;base64,${GIF}`, true],
    ["a WebP data: URI", `data:image/webp;base64,${WEBP}`, true],
    ["a data: URI whose type is in capitals", `data:IMAGE/PNG;base64,${PNG}`, true],
    ["an https URL", "https://icons.example.com/a.png", false],
    ["an http URL", "http://icons.example.com/a.png", false],
    ["a protocol-relative URL", "//icons.example.com/a.png", false],
    ["a relative path", "/a.png", false],
    ["a file: URL", "file:///etc/passwd", false],
    ["a javascript: URL", "javascript:alert(1)", false],
    ["an SVG data: URI", `data:image/svg+xml;base64,${SVG}`, false],
    ["a data: URI typed image/png holding an SVG", `data:image/png;base64,${SVG}`, false],
    ["a data: URI typed image/gif holding a PNG", `data:image/gif;base64,${PNG}`, false],
    ["an HTML data: URI", `data:text/html;base64,${SVG}`, false],
    ["a data: URI that is not base64", "data:image/png,%89PNG%0D%0A%1A%0A", false],
    ["a data: URI with a parameter", `data:image/png;charset=utf-8;base64,${PNG}`, false],
    ["a data: URI of broken base64", `data:image/png;base64,${PNG.slice(0, -1)}`, false],
    ["a data: URI with trailing text", `data:image/png;base64,${PNG}#https://x.example`, false],
    ["a data: URI of nothing", "data:image/png;base64,", false],
  ];
  for (const [what, src, ok] of ROWS) {
    it(`${what} ${ok ? "passes" : "never passes"}`, () => {
      expect(passes(src)).toBe(ok);
    });
  }

  it(`an icon longer than ${ICON_MAX_CHARS} characters never passes; one just under does`, () => {
    // "data:image/png;base64," is 22 characters, and base64 comes in fours: 16,382 is the longest
    // such URI within the limit, 16,386 the shortest beyond it.
    const prefix = "data:image/png;base64,";
    const fill = (n: number) => `${prefix}${PNG.slice(0, 12)}${"A".repeat(n - prefix.length - 12)}`;
    expect(passes(fill(ICON_MAX_CHARS - 2))).toBe(true);
    expect(passes(fill(ICON_MAX_CHARS + 2))).toBe(false);
  });

  it("at most 4 pass, in the server's order, after those that do not", () => {
    const listed = [
      { src: "https://icons.example.com/1.png" },
      ...["16x16", "32x32", "48x48", "64x64", "96x96"].map((size) => ({ src: png, sizes: [size] })),
    ];
    expect(iconsOf(listed).map((i) => i.sizes)).toEqual([["16x16"], ["32x32"], ["48x48"], ["64x64"]]);
  });

  it("keeps mimeType only when it names the URI's type, sizes only WxH or any, theme only light or dark", () => {
    const listed = [
      { src: png, mimeType: "image/png", sizes: ["16x16", "any", "huge", 32, "1x1<script>"], theme: "dark" },
      { src: png, mimeType: "image/svg+xml", sizes: "16x16", theme: "neon", extra: "https://x.example" },
      { src: `data:image/jpeg;base64,${JPEG}`, mimeType: "image/jpg", sizes: [] },
      { src: png, mimeType: 7, sizes: [7] },
      "not an icon",
      null,
      { src: 42 },
    ];
    expect(iconsOf(listed)).toEqual([
      { src: png, mimeType: "image/png", sizes: ["16x16", "any"], theme: "dark" },
      { src: png },
      { src: `data:image/jpeg;base64,${JPEG}`, mimeType: "image/jpg" },
      { src: png },
    ]);
    expect(iconsOf("https://x.example/a.png")).toEqual([]);
  });

  it("join the definition; cleaning a clean definition again changes nothing", () => {
    const def = definitionOf({
      ...lookup,
      title: "Lookup",
      icons: [{ src: "https://icons.example.com/a.png" }, { src: png, sizes: ["1x1"] }],
    } as Tool);
    expect(def.icons).toEqual([{ src: png, sizes: ["1x1"] }]);
    expect(definitionHash(def)).not.toBe(
      definitionHash(definitionOf({ ...lookup, title: "Lookup" } as Tool)),
    );
    expect(cleanDefinition(def)).toEqual(def);
    expect(iconsOf(def.icons)).toEqual(def.icons);
  });
});

describe("a refresh", () => {
  const CHANGES: [string, Partial<Tool>, Partial<Tool>, string][] = [
    ["a new title", {}, { title: "Search" }, 'title: (not set) → "Search"'],
    [
      "a changed title",
      { title: "Search" },
      { title: "Search everything" },
      'title: "Search" → "Search everything"',
    ],
    ["a new icon", {}, { icons: [{ src: png }] }, "icons"],
    [
      "a changed icon",
      { icons: [{ src: png }] },
      { icons: [{ src: `data:image/gif;base64,${GIF}` }] },
      "icons",
    ],
  ];
  for (const [what, before, after, summary] of CHANGES) {
    it(`${what} makes an enabled tool "changed" until the owner accepts it`, async () => {
      const d = await memoryDb();
      const srv = serverConfig("srv");
      await syncServerTools(d, srv, [tool("a", before)], OPTS);
      await setToolStatus(d, { localName: "srv_a", status: "enabled", actor: "olive" });
      const refresh = await syncServerTools(d, srv, [tool("a", after)], OPTS);
      expect(refresh.changed).toEqual(["srv_a"]);
      expect(refresh.changes.find((c) => c.kind === "changed")?.detail?.summary).toEqual([summary]);
      expect(callProblem(await getToolRow(d, "srv_a"), "srv_a")?.code).toBe("tool_changed");
      const shown = (await listCatalogue(d))[0];
      expect(shown?.availability).toBe("changed");
      expect(shown?.change?.diff?.summary).toEqual([summary]);
      await setToolStatus(d, { localName: "srv_a", status: "enabled", actor: "olive" });
      expect((await listEnabledTools(d)).map((t) => t.name)).toEqual(["srv_a"]);
    });
  }

  it("an icon that never passes changes nothing, added or changed", async () => {
    const d = await memoryDb();
    const srv = serverConfig("srv");
    await syncServerTools(d, srv, [tool("a")], OPTS);
    await setToolStatus(d, { localName: "srv_a", status: "enabled", actor: "olive" });
    const refresh = await syncServerTools(
      d,
      srv,
      [
        tool("a", {
          icons: [{ src: "https://icons.example.com/a.png" }, { src: `data:image/svg+xml;base64,${SVG}` }],
        }),
      ],
      OPTS,
    );
    expect(refresh.changed).toEqual([]);
    expect(callProblem(await getToolRow(d, "srv_a"), "srv_a")).toBeNull();
  });
});

describe("the views", () => {
  it("the owner sees the title, output schema and icons; null and empty when the tool has none", async () => {
    const d = await memoryDb();
    const output = { type: "object", properties: { n: { type: "number" } } };
    await syncServerTools(
      d,
      serverConfig("srv"),
      [
        tool("a", { title: "Tool A", outputSchema: output, icons: [{ src: png }] } as Partial<Tool>),
        tool("b"),
      ],
      OPTS,
    );
    const [a, b] = await listCatalogue(d);
    expect(a).toMatchObject({ title: "Tool A", outputSchema: output, icons: [{ src: png }] });
    expect(b).toMatchObject({ title: null, outputSchema: null, icons: [] });
  });

  it("an agent's /api/tools view has them only when the tool has them", async () => {
    const d = await memoryDb();
    const output = { type: "object", properties: { n: { type: "number" } } };
    await syncServerTools(
      d,
      serverConfig("srv"),
      [
        tool("a", {
          title: "Tool A",
          outputSchema: output,
          icons: [{ src: png }],
          annotations: { readOnlyHint: true },
        } as Partial<Tool>),
        tool("b", { annotations: { readOnlyHint: true } }),
      ],
      OPTS,
    );
    await setToolStatus(d, { localName: "srv_a", status: "enabled", actor: "olive" });
    await setToolStatus(d, { localName: "srv_b", status: "enabled", actor: "olive" });
    const [a, b] = await listEnabledTools(d);
    expect(a).toEqual({
      name: "srv_a",
      title: "Tool A",
      description: "the a tool",
      inputSchema: { type: "object", properties: { q: { type: "string" } } },
      outputSchema: output,
      annotations: { readOnlyHint: true },
      icons: [{ src: png }],
      destructive: false,
    });
    expect(Object.keys(b ?? {}).sort()).toEqual([
      "annotations",
      "description",
      "destructive",
      "inputSchema",
      "name",
    ]);
  });
});
