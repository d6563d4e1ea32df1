/**
 * Prompts obey the catalogue, as resources do: through the real `/mcp` endpoint, against a
 * careless prompt server (test/fixtures/servers/prompts.mjs) that serves a prompt it never
 * lists, and against @modelcontextprotocol/server-everything, an agent lists the prompts of
 * servers with an enabled tool as `<server>_<prompt>`, gets only those, with bounded arguments,
 * and every get, passed or refused, is an audit row under the agent's token name.
 */
import path from "node:path";
import { ErrorCode, GetPromptResultSchema } from "@modelcontextprotocol/sdk/types.js";
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
import { logger } from "../log";
import { serverViews } from "../servers/status";
import { type AuditRow, listAuditByActions } from "../store/audit";
import { rpcRefusal } from "./files-fixtures";
import { wrapUri } from "./links";
import { Listings, type ResourceDeps } from "./listings";
import {
  boundMessages,
  getPrompt,
  PROMPT_ARGUMENT_MAX_BYTES,
  PROMPT_GET_MAX_BYTES,
  PROMPT_MAX_ARGUMENTS,
  PROMPT_MAX_MESSAGES,
  PROMPT_REFUSED_MESSAGE,
  unwrapPromptName,
} from "./prompts";
import { listResourceReads } from "./reads";
import { TRUNCATED_META_KEY } from "./resources";

const PROMPTS = path.join(REPO_ROOT, "test/fixtures/servers/prompts.mjs");
const EVERYTHING = path.join(REPO_ROOT, "node_modules/@modelcontextprotocol/server-everything/dist/index.js");

let rt: TestRuntime;
let token: string;
const cleanups: (() => Promise<void>)[] = [];

async function connect() {
  const c = await connectMcp({ token });
  cleanups.push(() => c.close());
  return c.client;
}

/** The JSON-RPC error `p` fails with: a client's `McpError`, or a handler's `ProtocolError`. */
const refusal = rpcRefusal;

const prefixes = (message: string) => message.match(/MCP error -?\d+:/g)?.length ?? 0;

function gets(): Promise<AuditRow[]> {
  return listAuditByActions(rt.runtime.db, { actions: ["prompt.get", "prompt.refused"], limit: 100 });
}

async function startWith(name: string, args: string[], tool: string) {
  rt = await startTestRuntime({ servers: { [name]: { command: "node", args, enabled: true } } });
  // "ready" is set after the first tool list is stored, so its catalogue rows exist by then.
  const ready = async () =>
    (await serverViews(rt.runtime.manager, rt.runtime.db)).find((s) => s.name === name)?.state === "ready";
  await waitForEvent(rt.runtime.bus, async (e) => e.type === "server" && (await ready()), {
    already: ready,
    timeoutMs: 20_000,
    what: () => `${name} to be ready`,
  });
  await enableTool(rt.runtime, tool);
  token = await createAgentToken(rt.runtime, "bot");
}

async function stop() {
  for (const c of cleanups.splice(0).reverse()) await c();
  await rt.stop();
}

describe("prompts through /mcp, against a careless prompt server", () => {
  beforeEach(() => startWith("prompter", [PROMPTS], "prompter_list_count"), 30_000);
  afterEach(stop);

  /** How many `prompts/list` requests the fixture has answered (its `list_count` tool). */
  async function listsServed(): Promise<number> {
    const res = await rt.runtime.manager
      .get("prompter")
      .read((client, options) => client.callTool({ name: "list_count", arguments: {} }, options));
    return Number((res.content as { text?: string }[])[0]?.text);
  }

  function deps(): ResourceDeps {
    return {
      db: rt.runtime.db,
      manager: rt.runtime.manager,
      log: logger("test-prompts"),
      descriptionMaxChars: 1024,
    };
  }

  it("listed prompts appear as <server>_<prompt> with their texts cleaned; a name no local name can hold is left out", async () => {
    const client = await connect();
    expect(client.getServerCapabilities()?.prompts).toBeDefined();
    const { prompts } = await client.listPrompts();
    expect(prompts.map((p) => p.name)).toEqual(["prompter_greet", "prompter_huge", "prompter_linked"]);
    expect(prompts[0]).toEqual({
      name: "prompter_greet",
      title: "Greeting",
      description: "Greets someone.\nSecond line",
      arguments: [{ name: "who", description: "Whom to greet", required: true }],
    });
  }, 30_000);

  it("a get of a listed prompt passes its arguments and returns the server's messages, audited with the agent's name", async () => {
    const client = await connect();
    await client.listPrompts();
    const res = await client.getPrompt({ name: "prompter_greet", arguments: { who: "Ada", tone: "warm" } });
    expect(res.description).toBe("A greeting");
    expect(res.messages).toEqual([
      { role: "user", content: { type: "text", text: "Hello, Ada!" } },
      { role: "user", content: { type: "text", text: "arguments: 2" } },
    ]);
    const [row] = await gets();
    expect(row).toMatchObject({ actor: "bot", action: "prompt.get", subject: "prompter greet" });
    expect(row?.detail).toMatch(/^2 arguments; 2 messages, \d+ bytes$/);
    expect(row?.detail).not.toContain("Ada");
  }, 30_000);

  it("a prompt the server never listed is refused with -32602 and audited, though the server would serve it", async () => {
    const direct = await rt.runtime.manager
      .get("prompter")
      .read((c, options) => c.getPrompt({ name: "secret" }, options));
    expect(direct.messages).toHaveLength(1);
    const client = await connect();
    await client.listPrompts();
    const secret = await refusal(client.getPrompt({ name: "prompter_secret" }));
    const badName = await refusal(client.getPrompt({ name: "prompter_bad name!" }));
    const noServer = await refusal(client.getPrompt({ name: "nosuch_greet" }));
    for (const err of [secret, badName, noServer]) {
      expect(err.code).toBe(ErrorCode.InvalidParams);
      expect(err.message).toBe(`MCP error -32602: ${PROMPT_REFUSED_MESSAGE}`);
    }
    expect((await gets()).reverse().map((r) => [r.actor, r.action, r.subject, r.detail])).toEqual([
      ["bot", "prompt.refused", "prompter secret", "not listed by the server"],
      ["bot", "prompt.refused", "prompter_bad name!", "not a <server>_<prompt> name"],
      ["bot", "prompt.refused", "nosuch greet", "the server has no enabled tool"],
    ]);
  }, 30_000);

  it("oversized arguments are refused with -32602 and audited; arguments at the bound pass", async () => {
    const client = await connect();
    await client.listPrompts();
    const many = Object.fromEntries(
      Array.from({ length: PROMPT_MAX_ARGUMENTS + 1 }, (_, i) => [`a${i}`, "x"]),
    );
    const long = "é".repeat(PROMPT_ARGUMENT_MAX_BYTES / 2 + 1);
    for (const args of [{ who: "Ada", ...many }, { who: long }]) {
      const err = await refusal(client.getPrompt({ name: "prompter_greet", arguments: args }));
      expect(err.code).toBe(ErrorCode.InvalidParams);
      expect(err.message).toMatch(/^MCP error -32602: Invalid arguments: at most 64 arguments/);
    }
    expect((await gets()).map((r) => [r.action, r.detail])).toEqual([
      ["prompt.refused", `an argument over ${PROMPT_ARGUMENT_MAX_BYTES} bytes`],
      ["prompt.refused", `more than ${PROMPT_MAX_ARGUMENTS} arguments`],
    ]);
    const atBound = "é".repeat(PROMPT_ARGUMENT_MAX_BYTES / 2);
    const res = await client.getPrompt({ name: "prompter_greet", arguments: { who: atBound } });
    expect(res.messages[0]?.content).toEqual({ type: "text", text: `Hello, ${atBound}!` });
  }, 30_000);

  it("the server's own invalid params reach the agent as -32602, said once, and the get is audited as failed", async () => {
    const client = await connect();
    await client.listPrompts();
    const err = await refusal(client.getPrompt({ name: "prompter_greet" }));
    expect(err.code).toBe(ErrorCode.InvalidParams);
    expect(prefixes(err.message)).toBe(1);
    expect(err.message).toMatch(/Missing required argument: who/);
    expect((await gets())[0]).toMatchObject({ action: "prompt.get", subject: "prompter greet" });
    expect((await gets())[0]?.detail).toMatch(/^0 arguments; failed: /);
  }, 30_000);

  it("a non-string argument is refused with -32602 by Gatehouse, and audited", async () => {
    const client = await connect();
    await client.listPrompts();
    const err = await refusal(
      client.request(
        { method: "prompts/get", params: { name: "prompter_greet", arguments: { who: 1 } } },
        GetPromptResultSchema,
      ),
    );
    expect(err.code).toBe(ErrorCode.InvalidParams);
    expect(err.message).toContain("Invalid arguments");
    expect((await gets())[0]).toMatchObject({
      action: "prompt.refused",
      detail: "an argument that is not a string",
    });
  }, 30_000);

  it("a refusal of a name that is not ours is shown whole, whatever else is wrong with it", async () => {
    const client = await connect();
    const many = Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`a${i}`, "x"]));
    await refusal(client.getPrompt({ name: "prompter /etc/passwd", arguments: many }));
    expect((await gets())[0]).toMatchObject({
      subject: "prompter /etc/passwd",
      detail: "not a <server>_<prompt> name",
    });
  }, 30_000);

  it("a failed get's audit row holds no argument value, even when the server's error repeats it", async () => {
    const client = await connect();
    await client.listPrompts();
    await refusal(client.getPrompt({ name: "prompter_greet", arguments: { who: "refuse-sk-live-XYZ" } }));
    const [row] = await gets();
    expect(row?.action).toBe("prompt.get");
    expect(row?.detail).not.toContain("XYZ");
    expect(row?.detail).toMatch(/failed: .*JSON-RPC code -32602/);
  }, 30_000);

  it("messages over the bound come back cut and marked; resource URIs in them come back wrapped", async () => {
    const client = await connect();
    await client.listPrompts();
    const huge = await client.getPrompt({ name: "prompter_huge" });
    expect(huge._meta?.[TRUNCATED_META_KEY]).toBe(true);
    // The text is cut between characters; the image after it no longer fits and is left out.
    expect(huge.messages).toHaveLength(1);
    const content = huge.messages[0]?.content;
    const text = content?.type === "text" ? content.text : "";
    expect(Buffer.byteLength(text, "utf8")).toBeLessThanOrEqual(PROMPT_GET_MAX_BYTES);
    expect(text).toBe("é".repeat(text.length));
    // The budget is the message's text plus its framing (64 bytes a message).
    expect(text.length).toBe((PROMPT_GET_MAX_BYTES - 64) / 2);
    expect(content?._meta?.[TRUNCATED_META_KEY]).toBe(true);
    expect((await gets())[0]?.detail).toMatch(/cut to 1048576/);

    const linked = await client.getPrompt({ name: "prompter_linked" });
    expect(linked.messages.map((m) => m.content)).toEqual([
      { type: "resource_link", uri: wrapUri("prompter", "file:///srv/notes.md"), name: "notes" },
      {
        type: "resource",
        resource: {
          uri: wrapUri("prompter", "file:///srv/plan.md"),
          mimeType: "text/markdown",
          text: "# Plan",
        },
      },
    ]);
  }, 30_000);

  it("gets and refusals are listed with the resource reads on the Activity page, as prompts", async () => {
    const client = await connect();
    await client.getPrompt({ name: "prompter_greet", arguments: { who: "Ada" } });
    await refusal(client.getPrompt({ name: "prompter_secret" }));
    await refusal(client.getPrompt({ name: "prompter_bad name!" }));
    expect(
      (await listResourceReads(rt.runtime.db)).reads.map((r) => [r.kind, r.server, r.uri, r.allowed]),
    ).toEqual([
      ["prompt", null, "prompter_bad name!", false],
      ["prompt", "prompter", "secret", false],
      ["prompt", "prompter", "greet", true],
    ]);
  }, 30_000);

  it("a get before any list lists the server first, once", async () => {
    const before = await listsServed();
    const client = await connect();
    const res = await client.getPrompt({ name: "prompter_greet", arguments: { who: "Grace" } });
    expect(res.messages[0]?.content).toEqual({ type: "text", text: "Hello, Grace!" });
    expect(await listsServed()).toBe(before + 1);
  }, 30_000);

  it("probing unlisted prompts costs the server at most one list per interval, however many probes", async () => {
    const ctx = { agent: "bot", listed: new Listings(60_000) };
    const before = await listsServed();
    const probes = Array.from({ length: 20 }, (_, i) =>
      refusal(getPrompt(deps(), ctx, { name: `prompter_guess-${i}` })),
    );
    for (const err of await Promise.all(probes)) expect(err.code).toBe(ErrorCode.InvalidParams);
    expect(await listsServed()).toBe(before + 1);
  }, 30_000);
});

describe("prompts through /mcp, against server-everything", () => {
  afterEach(stop);

  it("a server without an enabled tool contributes no prompts, and its prompts cannot be got", async () => {
    await startWith("everything", [EVERYTHING, "stdio"], LIST_NOTES);
    const client = await connect();
    expect((await client.listPrompts()).prompts).toEqual([]);
    const err = await refusal(client.getPrompt({ name: "everything_simple-prompt" }));
    expect(err.code).toBe(ErrorCode.InvalidParams);
    expect((await gets())[0]).toMatchObject({
      action: "prompt.refused",
      subject: "everything simple-prompt",
      detail: "the server has no enabled tool",
    });
  }, 30_000);

  it("once a tool of the server is enabled its prompts are listed wrapped, and a get passes the arguments", async () => {
    await startWith("everything", [EVERYTHING, "stdio"], "everything_echo");
    const client = await connect();
    const { prompts } = await client.listPrompts();
    expect(prompts.map((p) => p.name)).toEqual(expect.arrayContaining(["everything_args-prompt"]));
    for (const p of prompts) expect(p.name.startsWith("everything_")).toBe(true);
    expect(prompts.find((p) => p.name === "everything_args-prompt")?.arguments).toEqual([
      { name: "city", description: "Name of the city", required: true },
      // The server's own list has no description for it (zod's `.describe()` before `.optional()`).
      { name: "state" },
    ]);
    const res = await client.getPrompt({
      name: "everything_args-prompt",
      arguments: { city: "Paris", state: "Texas" },
    });
    expect(res.messages).toEqual([
      { role: "user", content: { type: "text", text: "What's weather in Paris, Texas?" } },
    ]);
  }, 30_000);
});

describe("prompt names and messages", () => {
  it("<server>_<prompt> splits at the first underscore; names no local name can hold are not ours", () => {
    expect(unwrapPromptName("files_a_b")).toEqual({ server: "files", prompt: "a_b" });
    for (const name of ["greet", "_greet", "Files_greet", "files_", "files_a b", `files_${"x".repeat(60)}`])
      expect(unwrapPromptName(name)).toBeNull();
  });

  it("the conversation ends at the first message that does not fit: no turn is left out in the middle", () => {
    const bounded = boundMessages(
      "s",
      [
        { role: "user", content: { type: "text", text: "hi" } },
        { role: "user", content: { type: "image", data: "A".repeat(800), mimeType: "image/png" } },
        { role: "assistant", content: { type: "text", text: "0123456789" } },
      ],
      200,
    );
    expect(bounded.cut).toBe(true);
    expect(bounded.messages).toEqual([{ role: "user", content: { type: "text", text: "hi" } }]);
  });

  it("empty messages are not free: a flood of them is cut at the message bound", () => {
    const empty = { role: "user" as const, content: { type: "text" as const, text: "" } };
    const bounded = boundMessages(
      "s",
      Array.from({ length: 80_000 }, () => empty),
      PROMPT_GET_MAX_BYTES,
    );
    expect(bounded.cut).toBe(true);
    expect(bounded.messages.length).toBeLessThanOrEqual(PROMPT_MAX_MESSAGES);
  });

  it("a resource link's description counts against the bound", () => {
    const link = {
      role: "user" as const,
      content: { type: "resource_link" as const, uri: "file:///x", name: "x", description: "d".repeat(1000) },
    };
    const bounded = boundMessages(
      "s",
      Array.from({ length: 10 }, () => link),
      3000,
    );
    expect(bounded.cut).toBe(true);
    expect(bounded.messages.length).toBeLessThan(3);
  });
});
