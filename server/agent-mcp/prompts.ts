import "server-only";
import {
  type ContentBlock,
  type GetPromptResult,
  type Prompt,
  type PromptArgument,
  type PromptMessage,
  ProtocolErrorCode,
} from "@modelcontextprotocol/server";
import { GatehouseError } from "@/lib/errors";
import { localNameProblem } from "../catalogue/definition";
import { SERVER_NAME_PATTERN } from "../config";
import { collectPages } from "../mcp/pages";
import { wrapUri } from "./links";
import { clean, type Listings, type ResourceDeps, resourceServers } from "./listings";
import { audit, TRUNCATED_META_KEY, utf8Prefix } from "./resources";
import { rpcFailure } from "./rpc";

/**
 * Prompts over `/mcp`, by the rules of resources (resources.ts): the prompts of every server
 * with an enabled tool are listed as `<server>_<prompt>`, named like tools; a `prompts/get`
 * reaches the server only for a prompt that server listed in the latest `prompts/list`
 * Gatehouse fetched of it (re-listed at most once a second per server, see {@link Listings}),
 * with bounded arguments, and what comes back is bounded too. Every get, passed or refused,
 * writes an audit row with the agent's token name; a refusal answers invalid params (-32602)
 * with the same words whatever the reason, so an agent cannot probe what a server would serve.
 */

/** Pages of `prompts/list` followed per server. */
const MAX_PAGES = 10;
/** Most prompts listed per server; a get of one past it is refused like any unlisted prompt. */
const MAX_PER_SERVER = 200;
/** Most arguments a get passes, and most arguments listed of one prompt. */
export const PROMPT_MAX_ARGUMENTS = 64;
/** Longest argument value a get passes, in UTF-8 bytes. */
export const PROMPT_ARGUMENT_MAX_BYTES = 16 * 1024;
/** Longest argument name listed or passed. */
const ARGUMENT_NAME_MAX_CHARS = 200;
/** Most bytes of a get's messages returned to the agent (texts as UTF-8, data as base64, URIs). */
export const PROMPT_GET_MAX_BYTES = 1024 * 1024;
/** What every refused get answers: the same words, whether the prompt exists or not. */
export const PROMPT_REFUSED_MESSAGE = "Prompt not found: only prompts listed by prompts/list can be used";

/** Who is asking, and what the servers listed last. */
export interface PromptContext {
  /** The agent token's name: the audit rows' actor. */
  agent: string;
  listed: Listings;
}

/** The server and prompt of `<server>_<prompt>`, or null when it is not such a name. */
export function unwrapPromptName(name: string): { server: string; prompt: string } | null {
  const i = name.indexOf("_");
  if (i <= 0) return null;
  const server = name.slice(0, i);
  const prompt = name.slice(i + 1);
  if (!SERVER_NAME_PATTERN.test(server) || localNameProblem(server, prompt) !== null) return null;
  return { server, prompt };
}

/** An argument as listed: a name an agent can send back as it is, and a cleaned description. */
function listedArgument(a: PromptArgument, maxChars: number): PromptArgument | null {
  if (typeof a.name !== "string" || a.name === "" || a.name.length > ARGUMENT_NAME_MAX_CHARS) return null;
  // A name with hidden characters cannot be shown as what it is; it is left out, not changed.
  if (clean(a.name, ARGUMENT_NAME_MAX_CHARS) !== a.name) return null;
  const arg: PromptArgument = { name: a.name };
  const description = clean(a.description, maxChars);
  if (description) arg.description = description;
  if (a.required === true) arg.required = true;
  return arg;
}

/**
 * One server's prompts as it lists them (bounded pages and count), those whose name cannot be a
 * local name `<server>_<prompt>` left out; recorded into `listed` when given. Null when the
 * server offers no prompts.
 */
async function listServer(deps: ResourceDeps, server: string, listed?: Listings): Promise<Prompt[] | null> {
  const prompts = await deps.manager.get(server).read(async (client, options) => {
    if (!client.getServerCapabilities()?.prompts) return null;
    return collectPages(
      async (params) => {
        // One request per page: the client's own listPrompts() walks every page itself, past these bounds.
        const res = await client.request({ method: "prompts/list", ...(params && { params }) }, options);
        return { items: res.prompts, nextCursor: res.nextCursor };
      },
      { maxPages: MAX_PAGES, maxItems: MAX_PER_SERVER },
    );
  });
  const kept =
    prompts?.filter((p) => typeof p.name === "string" && localNameProblem(server, p.name) === null) ?? null;
  listed?.record(server, kept?.map((p) => p.name) ?? []);
  return kept;
}

/**
 * `prompts/list`: the prompts of every server with an enabled tool, asked in parallel, each
 * within its server's deadline, named `<server>_<prompt>`, their texts cleaned and capped, and
 * recorded in `listed` as what the agent may get. A server that is down or fails is left out
 * (and logged) rather than failing the whole list.
 */
export async function listPrompts(deps: ResourceDeps, listed?: Listings): Promise<Prompt[]> {
  const max = deps.descriptionMaxChars;
  const lists = await Promise.all(
    (await resourceServers(deps)).map(async (server) => {
      try {
        return ((await listServer(deps, server, listed)) ?? []).map((p) => {
          const prompt: Prompt = { name: `${server}_${p.name}` };
          const title = clean(p.title, 200);
          const description = clean(p.description, max);
          const args = (p.arguments ?? [])
            .map((a) => listedArgument(a, max))
            .filter((a): a is PromptArgument => a !== null)
            .slice(0, PROMPT_MAX_ARGUMENTS);
          if (title) prompt.title = title;
          if (description) prompt.description = description;
          if (args.length > 0) prompt.arguments = args;
          return prompt;
        });
      } catch (err) {
        deps.log.warn(`prompts of ${server} left out of prompts/list: ${String(err)}`);
        return [];
      }
    }),
  );
  return lists.flat();
}

/** Why `args` cannot be passed, or null when they can (see the bounds above). */
export function argumentsProblem(args: unknown): string | null {
  if (args === undefined) return null;
  if (typeof args !== "object" || args === null || Array.isArray(args)) return "arguments is not an object";
  const entries = Object.entries(args);
  if (entries.length > PROMPT_MAX_ARGUMENTS) return `more than ${PROMPT_MAX_ARGUMENTS} arguments`;
  for (const [name, value] of entries) {
    if (name.length > ARGUMENT_NAME_MAX_CHARS)
      return `an argument name over ${ARGUMENT_NAME_MAX_CHARS} characters`;
    if (typeof value !== "string") return "an argument that is not a string";
    if (Buffer.byteLength(value, "utf8") > PROMPT_ARGUMENT_MAX_BYTES)
      return `an argument over ${PROMPT_ARGUMENT_MAX_BYTES} bytes`;
  }
  return null;
}

/** Refuses a get: its audit row, then the one answer every refusal of a name gets. */
async function refuse(deps: ResourceDeps, ctx: PromptContext, subject: string, why: string): Promise<never> {
  await audit(deps, { actor: ctx.agent, action: "prompt.refused", subject, detail: why }, "prompt request");
  throw rpcFailure(ProtocolErrorCode.InvalidParams, PROMPT_REFUSED_MESSAGE);
}

/**
 * `prompts/get` of `<server>_<prompt>`, passed to its server with the agent's arguments while
 * that server still has an enabled tool and listed the prompt in its latest list (re-listed
 * once, bounded, when it did not); refused with -32602 otherwise, and when the arguments are
 * over {@link PROMPT_MAX_ARGUMENTS} or {@link PROMPT_ARGUMENT_MAX_BYTES}. Messages come back
 * bounded by {@link PROMPT_GET_MAX_BYTES}, resource URIs in them wrapped. Every get writes one
 * audit row, `prompt.get` (the messages and bytes returned, any cut, or the server's error;
 * never the arguments' values) or `prompt.refused` (why), with the agent as actor and
 * `<server> <prompt>` as subject.
 */
export async function getPrompt(
  deps: ResourceDeps,
  ctx: PromptContext,
  params: { name: unknown; arguments?: unknown },
): Promise<GetPromptResult> {
  const name = typeof params.name === "string" ? params.name : (JSON.stringify(params.name) ?? "");
  const target = typeof params.name === "string" ? unwrapPromptName(name) : null;
  const subject = target ? `${target.server} ${target.prompt}` : name;
  // The name first: a refusal of a name that is not ours must say so whatever else is wrong, or
  // its subject ("files /etc/passwd") would read as a prompt of that server.
  if (!target) return refuse(deps, ctx, subject, "not a <server>_<prompt> name");
  const problem = argumentsProblem(params.arguments);
  if (problem) {
    await audit(
      deps,
      { actor: ctx.agent, action: "prompt.refused", subject, detail: problem },
      "prompt request",
    );
    throw rpcFailure(
      ProtocolErrorCode.InvalidParams,
      `Invalid arguments: at most ${PROMPT_MAX_ARGUMENTS} arguments, each a string of at most ${PROMPT_ARGUMENT_MAX_BYTES} bytes`,
    );
  }
  // Checked by argumentsProblem: absent, or an object of strings.
  const args = params.arguments as Record<string, string> | undefined;
  if (!(await resourceServers(deps)).includes(target.server))
    return refuse(deps, ctx, subject, "the server has no enabled tool");
  if (!ctx.listed.has(target.server, target.prompt)) {
    await ctx.listed.refresh(target.server, async () => {
      try {
        await listServer(deps, target.server, ctx.listed);
      } catch (err) {
        deps.log.warn(`prompts of ${target.server} could not be listed again for a get: ${String(err)}`);
      }
    });
    if (!ctx.listed.has(target.server, target.prompt))
      return refuse(deps, ctx, subject, "not listed by the server");
  }

  const started = Date.now();
  const count = Object.keys(args ?? {}).length;
  const got = (detail: string) =>
    audit(
      deps,
      {
        actor: ctx.agent,
        action: "prompt.get",
        subject,
        detail: `${count} argument${count === 1 ? "" : "s"}; ${detail}`,
        durationMs: Date.now() - started,
      },
      "prompt request",
    );
  let res: GetPromptResult | null;
  try {
    res = await deps.manager.get(target.server).read(async (client, options) => {
      if (!client.getServerCapabilities()?.prompts) return null;
      return client.getPrompt({ name: target.prompt, ...(args ? { arguments: args } : {}) }, options);
    });
  } catch (err) {
    if (!(err instanceof GatehouseError)) {
      await got("failed unexpectedly");
      throw err;
    }
    // Only the kind: the server's words may repeat an argument's value, which the audit never holds.
    const rpcCode = (err.cause as { code?: unknown } | undefined)?.code;
    await got(`failed: ${err.code}${typeof rpcCode === "number" ? ` (JSON-RPC code ${rpcCode})` : ""}`);
    // The server's own invalid params (a required argument missing, say) is the agent's to fix.
    const code = (err.cause as { code?: unknown } | undefined)?.code;
    throw rpcFailure(
      code === ProtocolErrorCode.InvalidParams
        ? ProtocolErrorCode.InvalidParams
        : ProtocolErrorCode.InternalError,
      err.message,
    );
  }
  if (!res) return refuse(deps, ctx, subject, "the server offers no prompts now");
  const bounded = boundMessages(target.server, res.messages, PROMPT_GET_MAX_BYTES);
  const n = bounded.messages.length;
  await got(
    `${n} message${n === 1 ? "" : "s"}, ` +
      (bounded.cut
        ? `${bounded.bytes} of ${bounded.given} bytes returned (cut to ${PROMPT_GET_MAX_BYTES})`
        : `${bounded.bytes} bytes`),
  );
  const result: GetPromptResult = { messages: bounded.messages };
  const description = clean(res.description, deps.descriptionMaxChars);
  if (description) result.description = description;
  if (bounded.cut) result._meta = { [TRUNCATED_META_KEY]: true };
  return result;
}

/** A content block with only the fields Gatehouse passes, URIs wrapped; its size; whether it is text. */
function passed(server: string, c: ContentBlock): { block: ContentBlock; size: number } | null {
  const mimeType = (v: unknown) => clean(v, 200) ?? "";
  switch (c.type) {
    case "text":
      return { block: { type: "text", text: c.text }, size: Buffer.byteLength(c.text, "utf8") };
    case "image":
    case "audio":
      return { block: { type: c.type, data: c.data, mimeType: mimeType(c.mimeType) }, size: c.data.length };
    case "resource_link": {
      const uri = wrapUri(server, c.uri);
      const block: ContentBlock = { type: "resource_link", uri, name: clean(c.name, 200) || uri };
      const description = clean(c.description, 1024);
      if (description) block.description = description;
      if (c.mimeType) block.mimeType = mimeType(c.mimeType);
      // Every field counts: a description is as many bytes to the agent as a text.
      return { block, size: Buffer.byteLength(JSON.stringify(block), "utf8") };
    }
    case "resource": {
      const r = c.resource;
      const base = { uri: wrapUri(server, r.uri), ...(r.mimeType ? { mimeType: mimeType(r.mimeType) } : {}) };
      if ("text" in r && typeof r.text === "string")
        return {
          block: { type: "resource", resource: { ...base, text: r.text } },
          size: base.uri.length + Buffer.byteLength(r.text, "utf8"),
        };
      if ("blob" in r && typeof r.blob === "string")
        return {
          block: { type: "resource", resource: { ...base, blob: r.blob } },
          size: base.uri.length + r.blob.length,
        };
      return null;
    }
    default:
      return null;
  }
}

/** `block` with its text (or embedded resource's text) cut to `room` bytes and marked; null for binary. */
function cutText(block: ContentBlock, room: number): { block: ContentBlock; size: number } | null {
  const mark = { [TRUNCATED_META_KEY]: true };
  if (block.type === "text") {
    const text = utf8Prefix(block.text, room);
    return { block: { type: "text", text, _meta: mark }, size: Buffer.byteLength(text, "utf8") };
  }
  if (block.type === "resource" && "text" in block.resource && typeof block.resource.text === "string") {
    const uri = block.resource.uri;
    if (room <= uri.length) return null;
    const text = utf8Prefix(block.resource.text, room - uri.length);
    return {
      block: { type: "resource", resource: { ...block.resource, text }, _meta: mark },
      size: uri.length + Buffer.byteLength(text, "utf8"),
    };
  }
  return null;
}

/** Most messages a get returns; each also costs {@link MESSAGE_OVERHEAD_BYTES} of the budget. */
export const PROMPT_MAX_MESSAGES = 1000;
/** What a message costs beyond its content (its role and framing), so empty ones are not free. */
const MESSAGE_OVERHEAD_BYTES = 64;

/**
 * A get's messages as the agent gets them: only known roles and content types, URIs wrapped,
 * at most {@link PROMPT_MAX_MESSAGES}, and at most `maxBytes` in all (each message costing its
 * content plus {@link MESSAGE_OVERHEAD_BYTES}): a text at the bound is cut there (and marked),
 * and the conversation ends at the first message that does not fit, so what is returned is a
 * whole beginning of it, never one with a turn missing. `bytes`: what is returned; `given`:
 * what the server sent; `cut`: whether anything was cut or left out.
 */
export function boundMessages(
  server: string,
  messages: PromptMessage[],
  maxBytes: number,
): { messages: PromptMessage[]; bytes: number; given: number; cut: boolean } {
  const out: PromptMessage[] = [];
  let budget = maxBytes;
  let given = 0;
  let cut = false;
  for (const m of messages) {
    if (m.role !== "user" && m.role !== "assistant") continue;
    const p = passed(server, m.content);
    if (!p) continue;
    const size = p.size + MESSAGE_OVERHEAD_BYTES;
    given += size;
    if (cut) continue;
    if (out.length < PROMPT_MAX_MESSAGES && size <= budget) {
      out.push({ role: m.role, content: p.block });
      budget -= size;
      continue;
    }
    cut = true;
    const room = budget - MESSAGE_OVERHEAD_BYTES;
    const part = out.length < PROMPT_MAX_MESSAGES && room > 0 ? cutText(p.block, room) : null;
    if (!part || part.size <= 0) continue;
    out.push({ role: m.role, content: part.block });
    budget -= part.size + MESSAGE_OVERHEAD_BYTES;
  }
  return { messages: out, bytes: maxBytes - budget, given, cut };
}
