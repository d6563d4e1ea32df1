/**
 * Hidden text from a real tool server (test/fixtures/servers/hidden-text.mjs, a child process):
 * through the real catalogue refresh, the owner's catalogue, the agent's `/api/tools` and
 * `/mcp` `tools/list`, every name, description, title and schema text comes out without a
 * hidden character and capped, while property names and `enum` values stay as listed and the
 * broker accepts and refuses the same arguments.
 */
import path from "node:path";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { eq } from "drizzle-orm";
import { afterEach, expect, it } from "vitest";
import type { AgentToolView, CatalogueToolView } from "@/lib/api-types";
import { memoryDb, OPTS, serverConfig, tool } from "@/test/support/catalogue";
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
import { tools } from "../store/schema";
import { getToolRow, listCatalogue, listEnabledTools, setToolStatus, syncServerTools } from "./catalogue";

const FIXTURE = path.join(REPO_ROOT, "test", "fixtures", "servers", "hidden-text.mjs");
const LOOKUP = "hidden_lookup";

/**
 * Every character the fixture hides, written out here on its own (not the product's list): C0
 * but tab and newline, DEL and C1, soft hyphen, U+061C, U+180E, zero-width and bidi marks,
 * separators, embeddings and overrides, U+2060–206F, variation selectors, U+FEFF, tags.
 */
const HIDDEN_RANGES: readonly (readonly [number, number])[] = [
  [0x00, 0x08],
  [0x0b, 0x1f],
  [0x7f, 0x9f],
  [0xad, 0xad],
  [0x61c, 0x61c],
  [0x180e, 0x180e],
  [0x200b, 0x200f],
  [0x2028, 0x202e],
  [0x2060, 0x206f],
  [0xfe00, 0xfe0f],
  [0xfeff, 0xfeff],
  [0xe0000, 0xe007f],
  [0xe0100, 0xe01ef],
];

/** Every string in `value`, object keys included. */
function stringsOf(value: unknown): string[] {
  if (typeof value === "string") return [value];
  if (Array.isArray(value)) return value.flatMap(stringsOf);
  if (value !== null && typeof value === "object") {
    return Object.entries(value).flatMap(([k, v]) => [k, ...stringsOf(v)]);
  }
  return [];
}

/** The hidden characters left anywhere in `value` (keys included), as code points. */
function hiddenIn(value: unknown): string[] {
  return stringsOf(value)
    .flatMap((s) => [...s].map((ch) => ch.codePointAt(0) ?? 0))
    .filter((cp) => HIDDEN_RANGES.some(([from, to]) => cp >= from && cp <= to))
    .map((cp) => `U+${cp.toString(16).toUpperCase()}`);
}

/** What the fixture's input schema must look like after cleaning, the enum untouched. */
const CLEAN_INPUT = {
  type: "object",
  title: "Lookup",
  description: "What to look up",
  properties: {
    word: { type: "string", title: "Word", description: "The word", "x-hint": "Any word" },
    type: { type: "string", description: "Noun or verb", enum: ["noun", "verb\u200B"] },
    notes: { $ref: "#/$defs/notes" },
    long: { type: "string", description: `${"x".repeat(1023)}…` },
  },
  $defs: { notes: { type: "array", description: "Notes", items: { type: "string", title: "Note" } } },
  required: ["word"],
  additionalProperties: false,
};
const CLEAN_DESCRIPTION = "Looks up a word.\nAnswers with its meaning.\n";

let t: TestRuntime | undefined;
afterEach(async () => {
  await t?.stop();
  t = undefined;
});

async function start(): Promise<TestRuntime> {
  t = await startTestRuntime({
    servers: { hidden: { command: process.execPath, args: [FIXTURE], enabled: true } },
  });
  const { runtime } = t;
  await waitForEvent(runtime.bus, (e) => e.type === "catalogue" && e.server === "hidden", {
    already: async () => (await getToolRow(runtime.db, LOOKUP)) !== null,
    what: () => "the hidden-text server's catalogue",
  });
  return t;
}

it("hidden characters in a server's names, descriptions and schema texts never reach the catalogue, /api/tools or /mcp", async () => {
  const { runtime } = await start();

  // What the refresh stored (and hashed, and will pin): the definition, both schemas included.
  const row = await getToolRow(runtime.db, LOOKUP);
  const stored = JSON.parse(row?.definition ?? "{}");
  expect(stored.description).toBe(CLEAN_DESCRIPTION);
  expect(row?.description).toBe(CLEAN_DESCRIPTION);
  expect(stored.annotations).toEqual({ readOnlyHint: true, title: "Look up" });
  expect(stored.inputSchema).toEqual(CLEAN_INPUT);
  expect(stored.outputSchema).toEqual({
    type: "object",
    description: "The answer",
    properties: { meaning: { type: "string", description: "The meaning" } },
    required: ["meaning"],
  });
  // The one hidden character left is the enum value the server expects to receive.
  expect(hiddenIn(stored)).toEqual(["U+200B"]);

  // The tool with hidden characters in its name: shown clean, unusable, saying why.
  const owner = await createTestUser(runtime, "olga", ["owner"]);
  const catalogue = await bodyOf<{ tools: CatalogueToolView[] }>(
    await request("GET", "/api/catalogue", { cookie: owner.cookie }),
  );
  const bad = catalogue.tools.find((x) => x.server === "hidden" && x.remoteName === "delete");
  expect(bad).toMatchObject({
    availability: "unusable",
    unusableReason: "the tool name has hidden characters (U+200B, U+E0041)",
  });
  expect(JSON.parse((await getToolRow(runtime.db, bad?.localName ?? ""))?.definition ?? "{}").name).toBe(
    "delete",
  );
  const shown = catalogue.tools.find((x) => x.localName === LOOKUP);
  expect(shown).toMatchObject({ description: CLEAN_DESCRIPTION, inputSchema: CLEAN_INPUT });
  expect(hiddenIn(shown)).toEqual(["U+200B"]);

  await enableTool(runtime, LOOKUP);
  const token = await createAgentToken(runtime, "bot");

  const rest = await bodyOf<{ tools: AgentToolView[] }>(
    await request("GET", "/api/tools", { bearer: token }),
  );
  const viaRest = rest.tools.find((x) => x.name === LOOKUP);
  expect(viaRest).toMatchObject({ description: CLEAN_DESCRIPTION, inputSchema: CLEAN_INPUT });
  expect(hiddenIn(viaRest)).toEqual(["U+200B"]);

  const { client, close } = await connectMcp({ token });
  try {
    const listed = (await client.listTools()).tools.find((x) => x.name === LOOKUP);
    expect(listed).toMatchObject({
      description: CLEAN_DESCRIPTION,
      inputSchema: CLEAN_INPUT,
      annotations: { title: "Look up", readOnlyHint: true },
    });
    expect(hiddenIn(listed)).toEqual(["U+200B"]);

    // The schema still means what the server said: its enum value, hidden character and all, is
    // accepted and reaches the server as sent; the same word without it is refused.
    const ok = (await client.callTool({
      name: LOOKUP,
      arguments: { word: "run", type: "verb\u200B" },
    })) as CallToolResult;
    expect(ok.isError).toBeFalsy();
    expect(ok.content).toEqual([{ type: "text", text: JSON.stringify({ word: "run", type: "verb\u200B" }) }]);
    const refused = (await client.callTool({
      name: LOOKUP,
      arguments: { word: "run", type: "verb" },
    })) as CallToolResult;
    expect(refused.isError).toBe(true);
    expect(JSON.stringify(refused.content)).toContain("invalid_arguments");
  } finally {
    await close();
  }
}, 30_000);

it("a row stored before hidden characters were cleaned from schemas is served clean all the same", async () => {
  const d = await memoryDb();
  await syncServerTools(d, serverConfig("srv"), [tool("a", { annotations: { readOnlyHint: true } })], OPTS);
  await setToolStatus(d, { localName: "srv_a", status: "enabled", actor: "olive" });
  // What an older Gatehouse stored: the definition as listed, the description column cleaned of
  // fewer characters than now. (Its hash and pin are left as they were: it is still callable.)
  const tags = "\u{E0049}\u{E0067}\u{E006E}";
  const raw = {
    name: "a",
    description: `the a tool${tags}`,
    inputSchema: {
      type: "object",
      properties: { q: { type: "string", description: `the query\u2062${tags}` } },
    },
    outputSchema: null,
    annotations: { readOnlyHint: true, title: `A\uFE0F` },
  };
  await d
    .update(tools)
    .set({ definition: JSON.stringify(raw), description: `the a tool${tags}` })
    .where(eq(tools.localName, "srv_a"));
  const agent = await listEnabledTools(d);
  expect(agent).toMatchObject([
    {
      name: "srv_a",
      description: "the a tool",
      inputSchema: { type: "object", properties: { q: { type: "string", description: "the query" } } },
      annotations: { readOnlyHint: true, title: "A" },
    },
  ]);
  expect(hiddenIn(agent)).toEqual([]);
  const owner = await listCatalogue(d);
  expect(owner[0]).toMatchObject({ description: "the a tool", annotations: { title: "A" } });
  expect(hiddenIn(owner)).toEqual([]);
});
