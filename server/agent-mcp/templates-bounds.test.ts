/**
 * What a server's resource templates may cost Gatehouse: each template's automaton and all of a
 * server's together are bounded in states, a template is parsed once however often it is
 * listed, and a read's matching stops within its budget. Against a real stdio server (a child
 * process) that lists what each test gives it.
 */
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { afterEach, describe, expect, it } from "vitest";
import { connectMcp } from "@/test/support/mcp";
import {
  createAgentToken,
  enableTool,
  startTestRuntime,
  type TestRuntime,
  waitForServersReady,
} from "@/test/support/runtime";
import type { Logger } from "../log";
import { logger } from "../log";
import { rpcRefusal } from "./files-fixtures";
import { ListedResources, RESOURCE_NOT_FOUND, readResource } from "./resources";
import { expandTemplate } from "./template-fixtures";
import {
  ListedTemplates,
  MAX_TEMPLATE_STATES_PER_SERVER,
  ParsedTemplates,
  parsedTemplates,
  TEMPLATE_MATCH_BUDGET,
  wrapTemplate,
} from "./templates";
import {
  MAX_TEMPLATE_CHARS,
  MAX_TEMPLATE_STATES,
  matchesUriTemplate,
  parseUriTemplate,
  type UriTemplate,
} from "./uri-template";

/** Sixteen variables, the most one expression may have. */
const SIXTEEN = "abcdefghijklmnop".split("");

/** `prefix` then as many `{;a,…,p}` as `count` says (or as fit in MAX_TEMPLATE_CHARS). */
function matrices(prefix: string, count = Number.POSITIVE_INFINITY): string {
  let t = prefix;
  for (let i = 0; i < count && t.length + 35 <= MAX_TEMPLATE_CHARS; i++) t += `{;${SIXTEEN.join(",")}}`;
  return t;
}

/**
 * A template of the worst kind within MAX_TEMPLATE_STATES: unnamed expressions of 16 variables,
 * all alive at once (their names, which differ by `i`, take no states).
 */
function widest(i: number): string {
  const expression = `{${SIXTEEN.map((v) => `${v}${i}`).join(",")}}`;
  let t = "";
  while (parseUriTemplate(t + expression)) t += expression;
  return t;
}

function parse(template: string): UriTemplate {
  const parsed = parseUriTemplate(template);
  if (!parsed) throw new Error(`not a template: ${template}`);
  return parsed;
}

const states = (template: string): number => parse(template).nfa.kind.length;

/** A logger keeping its debug lines. */
function recording(): Logger & { lines: string[] } {
  const lines: string[] = [];
  const ignore = () => {};
  return { lines, debug: (m) => lines.push(m), info: ignore, warn: ignore, error: ignore };
}

/**
 * A stdio server (run as `node -e`) listing `templates` in one page, serving any URI as its
 * text, and saying through tool `served` what it was asked: `{reads, templateLists}`.
 */
function listingServer(templates: readonly string[]) {
  const source = `
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import {
  CallToolRequestSchema, ListResourcesRequestSchema, ListResourceTemplatesRequestSchema,
  ListToolsRequestSchema, ReadResourceRequestSchema,
} from "@modelcontextprotocol/sdk/types.js";
const templates = ${JSON.stringify(templates)};
const reads = [];
let templateLists = 0;
const server = new Server({ name: "fixture-listed-templates", version: "1.0.0" }, { capabilities: { tools: {}, resources: {} } });
server.setRequestHandler(ListToolsRequestSchema, async () => ({
  tools: [{ name: "served", description: "What was asked.", inputSchema: { type: "object", properties: {} }, annotations: { readOnlyHint: true } }],
}));
server.setRequestHandler(CallToolRequestSchema, async () => ({ content: [{ type: "text", text: JSON.stringify({ reads, templateLists }) }] }));
server.setRequestHandler(ListResourcesRequestSchema, async () => ({ resources: [] }));
server.setRequestHandler(ListResourceTemplatesRequestSchema, async () => {
  templateLists++;
  return { resourceTemplates: templates.map((uriTemplate, i) => ({ uriTemplate, name: "T" + i })) };
});
server.setRequestHandler(ReadResourceRequestSchema, async (req) => {
  reads.push(req.params.uri);
  return { contents: [{ uri: req.params.uri, mimeType: "text/plain", text: req.params.uri }] };
});
await server.connect(new StdioServerTransport());
`;
  return { command: "node", args: ["--input-type=module", "-e", source], enabled: true };
}

let rt: TestRuntime | undefined;
const cleanups: (() => Promise<void>)[] = [];

/** A runtime with server `big` listing `templates`, ready, its `served` tool enabled; an agent connected. */
async function start(templates: readonly string[]): Promise<Client> {
  const runtime = await startTestRuntime({ servers: { big: listingServer(templates) } });
  rt = runtime;
  await waitForServersReady(runtime.runtime, ["big"]);
  await enableTool(runtime.runtime, "big_served");
  const c = await connectMcp({ token: await createAgentToken(runtime.runtime, "bot") });
  cleanups.push(() => c.close());
  return c.client;
}

function runtime(): TestRuntime {
  if (!rt) throw new Error("no runtime");
  return rt;
}

async function served(): Promise<{ reads: string[]; templateLists: number }> {
  const res = await runtime()
    .runtime.manager.get("big")
    .read((client, options) => client.callTool({ name: "served", arguments: {} }, options));
  const first = (res.content as { type: string; text?: string }[])[0];
  return JSON.parse(first?.text ?? "{}");
}

afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
  await rt?.stop();
  rt = undefined;
});

describe("a server's templates are bounded in states", () => {
  it("a template past the state bound is left out of the list, and the rest are served", async () => {
    const hostile = matrices("hostile://x");
    // Well-formed and within the length bound: what leaves it out is its states alone (uri-template.test.ts).
    expect(hostile.length).toBeLessThanOrEqual(MAX_TEMPLATE_CHARS);
    const client = await start(["note://a/{id}", hostile, "note://b/{id}"]);
    const { resourceTemplates } = await client.listResourceTemplates();
    expect(resourceTemplates.map((t) => t.uriTemplate)).toEqual([
      wrapTemplate("big", "note://a/{id}"),
      wrapTemplate("big", "note://b/{id}"),
    ]);
    const read = await client.readResource({ uri: "gatehouse://big/-/note://b/1" });
    expect(read.contents).toMatchObject([{ text: "note://b/1" }]);
    const expansion = expandTemplate(hostile, { a: "1" });
    const err = await rpcRefusal(client.readResource({ uri: `gatehouse://big/-/${expansion}` }));
    expect(err.code).toBe(RESOURCE_NOT_FOUND);
    expect((await served()).reads).toEqual(["note://b/1"]);
  }, 30_000);

  it(`templates past ${MAX_TEMPLATE_STATES_PER_SERVER} states of one server are left out, those before them served`, async () => {
    const templates = Array.from({ length: 16 }, (_, i) => matrices(`m${i}://x`, 12));
    let kept = 0;
    for (let total = 0; kept < templates.length; kept++) {
      total += states(templates[kept] ?? "");
      if (total > MAX_TEMPLATE_STATES_PER_SERVER) break;
    }
    // Each within the template's bound; together past the server's, so the bound is what cuts.
    for (const t of templates) expect(states(t)).toBeLessThanOrEqual(MAX_TEMPLATE_STATES);
    expect(kept).toBeGreaterThan(1);
    expect(kept).toBeLessThan(templates.length);
    const client = await start([...templates, "note://after/{id}"]);
    const { resourceTemplates } = await client.listResourceTemplates();
    expect(resourceTemplates.map((t) => t.uriTemplate)).toEqual(
      templates.slice(0, kept).map((t) => wrapTemplate("big", t)),
    );
    const last = expandTemplate(templates[kept - 1] ?? "", { a: "1" });
    await client.readResource({ uri: `gatehouse://big/-/${last}` });
    for (const own of [expandTemplate(templates[kept] ?? "", { a: "1" }), "note://after/1"]) {
      const err = await rpcRefusal(client.readResource({ uri: `gatehouse://big/-/${own}` }));
      expect(err.code, own).toBe(RESOURCE_NOT_FOUND);
    }
    expect((await served()).reads).toEqual([last]);
  }, 30_000);

  it("re-listing the same templates parses none of them again", async () => {
    // Texts no other test lists, so the first list parses each of them.
    const templates = [
      "relist://a/{id}",
      "relist://{+path}",
      matrices("relist://hostile"),
      "bad://{unclosed",
    ];
    const client = await start(templates);
    const before = parsedTemplates.parsed;
    await client.listResourceTemplates();
    expect(parsedTemplates.parsed - before).toBe(templates.length);
    const { templateLists } = await served();
    await client.listResourceTemplates();
    // A read that matches nothing lists the server's templates again (interval 0 here).
    const deps = {
      db: runtime().runtime.db,
      manager: runtime().runtime.manager,
      log: logger("test-templates"),
      descriptionMaxChars: 1024,
    };
    const ctx = { agent: "bot", listed: new ListedResources(0) };
    const err = await rpcRefusal(readResource(deps, ctx, "gatehouse://big/-/nothing://x"));
    expect(err.code).toBe(RESOURCE_NOT_FOUND);
    expect((await served()).templateLists).toBe(templateLists + 2);
    expect(parsedTemplates.parsed - before).toBe(templates.length);
    // And what the second list gave is still served.
    const read = await client.readResource({ uri: "gatehouse://big/-/relist://a/1" });
    expect(read.contents).toMatchObject([{ text: "relist://a/1" }]);
  }, 30_000);
});

describe("what hostile templates may cost", () => {
  /** The worst a server may list: 100 templates each as wide as the bound allows. */
  const hostile = Array.from({ length: 100 }, (_, i) => widest(i));

  it("a read against hostile templates stops within its budget", () => {
    const kept = new ParsedTemplates().select("s", hostile, (t) => t, recording());
    expect(kept.length).toBeGreaterThan(1);
    const listed = new ListedTemplates();
    listed.recordTemplates(
      "s",
      kept.map((k) => k.parsed),
    );
    // Every template's every value stays alive on these characters; the space at the end kills them.
    const uri = `${"a".repeat(2040)} `;
    const budget = { steps: TEMPLATE_MATCH_BUDGET };
    expect(listed.matching("s", uri, budget)).toEqual({ template: null, exhausted: true });
    // It stopped at the budget, overshooting by at most one character's work on one template
    // (each of its states visited and each empty move followed once).
    const spent = TEMPLATE_MATCH_BUDGET - budget.steps;
    const oneCharacter = Math.max(...kept.map(({ parsed: { nfa } }) => nfa.kind.length + nfa.epsTo.length));
    expect(spent).toBeGreaterThan(TEMPLATE_MATCH_BUDGET);
    expect(spent).toBeLessThanOrEqual(TEMPLATE_MATCH_BUDGET + oneCharacter);
    // Unbounded, the first template alone would have cost several times as much.
    const unbounded = { steps: Number.MAX_SAFE_INTEGER };
    matchesUriTemplate(kept[0]?.parsed ?? parse("x"), uri, unbounded);
    expect(Number.MAX_SAFE_INTEGER - unbounded.steps).toBeGreaterThan(5 * TEMPLATE_MATCH_BUDGET);
  });

  it("the automata one server's templates keep take at most 16 bytes a state, 20,000 states in all", () => {
    for (const list of [hostile, Array.from({ length: 100 }, (_, i) => matrices(`m${i}://x`, 12))]) {
      const kept = new ParsedTemplates().select("s", list, (t) => t, recording());
      let total = 0;
      let bytes = 0;
      for (const { parsed } of kept) {
        const { kind, code, next, epsStart, epsTo } = parsed.nfa;
        total += kind.length;
        bytes += kind.byteLength + code.byteLength + next.byteLength + epsStart.byteLength + epsTo.byteLength;
      }
      expect(total).toBeLessThanOrEqual(MAX_TEMPLATE_STATES_PER_SERVER);
      expect(total).toBeGreaterThan(MAX_TEMPLATE_STATES_PER_SERVER - MAX_TEMPLATE_STATES);
      expect(bytes).toBeLessThanOrEqual(16 * total);
    }
  });

  it("a template that is none, or past the server's bound, is logged at debug once however often it is listed", () => {
    const parsed = new ParsedTemplates();
    const log = recording();
    const list = ["ok://{id}", matrices("too-big://x"), "bad://{unclosed", ...hostile];
    for (let i = 0; i < 3; i++) parsed.select("s", list, (t) => t, log);
    expect(log.lines).toHaveLength(3);
    expect(log.lines[0]).toMatch(/^template "too-big:\/\/x\{;a,b.*…" of s left out: more than 2000 states$/);
    expect(log.lines[1]).toBe('template "bad://{unclosed" of s left out: an unclosed brace');
    expect(log.lines[2]).toMatch(
      /^templates of s from "\{a\d+,.*" on left out: more than 20000 states in all$/,
    );
  });

  it("parsed templates are kept within their bounds, the least recently listed forgotten first", () => {
    const log = recording();
    const byCount = new ParsedTemplates(2, Number.POSITIVE_INFINITY);
    byCount.select("s", ["a://{x}", "b://{x}"], (t) => t, log);
    byCount.select("s", ["c://{x}"], (t) => t, log);
    expect(byCount.parsed).toBe(3);
    byCount.select("s", ["b://{x}"], (t) => t, log);
    expect(byCount.parsed).toBe(3);
    byCount.select("s", ["a://{x}"], (t) => t, log);
    expect(byCount.parsed).toBe(4);

    const big = matrices("big://x", 12);
    const byStates = new ParsedTemplates(1000, states(big) + states("a://{x}"));
    byStates.select("s", [big, "a://{x}", "b://{x}"], (t) => t, log);
    byStates.select("s", [big], (t) => t, log);
    expect(byStates.parsed).toBe(4);
  });
});
