import "server-only";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import {
  CallToolRequestSchema,
  ListPromptsRequestSchema,
  ListResourcesRequestSchema,
  ListResourceTemplatesRequestSchema,
  ListToolsRequestSchema,
} from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";
import { listEnabledTools } from "../catalogue/catalogue";
import { getPrompt, listPrompts } from "./prompts";
import {
  type ListedResources,
  listResources,
  listResourceTemplates,
  type ResourceDeps,
  readResource,
} from "./resources";
import { answersOnce } from "./rpc";
import { type CallContext, callTool, holdSeconds, toMcpTool } from "./tools";

export const SERVER_INFO = { name: "gatehouse", version: "0.1.0" } as const;

/** The words agents of both eras are given: what Gatehouse offers and how held calls behave. */
export function instructions(waitSeconds: number): string {
  return [
    "Gatehouse offers the tools an owner enabled, named <server>_<tool>.",
    "Tools marked readOnlyHint: true run at once.",
    `Any other tool waits for a person to approve the call: the request is held for up to ${waitSeconds} s (progress notifications are sent when you give a progressToken).`,
    "A denial comes back as an error result with the reviewer's reason.",
    "If nobody has decided in time, the error result names the call id; the call stays pending and can be checked with GET /api/calls/<id>?wait=60 using the same bearer token.",
    "Cancelling the request withdraws a pending call.",
    "A 2026-07-28 client that declares the tasks extension (io.modelcontextprotocol/tasks) gets a task for such a call at once instead: tasks/get says working until someone decides, then completed with the result, or failed with the reason; tasks/cancel withdraws it.",
    "Resources of the servers behind the enabled tools are listed by resources/list under gatehouse://<server>/<uri>, and their templates by resources/templates/list under gatehouse://<server>/-/<template>; only those resources, expansions of those templates, those a tool result links to, and any an owner allowed can be read, and every read is recorded.",
    "Prompts of the same servers are listed by prompts/list, named <server>_<prompt>; only those can be got with prompts/get (arguments are strings), and every get is recorded.",
  ].join(" ");
}

/**
 * `prompts/get` and `resources/read` as they arrive, their parameters unchecked: the SDK's own
 * schemas would refuse a non-string argument or URI before Gatehouse sees it (as -32603 with the
 * validator's issue list, and unaudited); Gatehouse checks them itself, refuses with -32602 and
 * writes the refusal's audit row like any other.
 */
const LooseGetPromptRequest = z.object({
  method: z.literal("prompts/get"),
  params: z.object({ name: z.unknown(), arguments: z.unknown().optional() }),
});
const LooseReadResourceRequest = z.object({
  method: z.literal("resources/read"),
  params: z.object({ uri: z.unknown() }),
});

/**
 * One session's MCP server: `tools/list` is the enabled catalogue, `tools/call` goes through
 * the call broker (refusals as `isError` results, destructive calls held for a decision), and
 * resources and prompts of servers with an enabled tool pass through read-only: only those their
 * server listed in its latest list, or (resources) an owner allowed (resources.ts, prompts.ts),
 * each read or get audited under the agent's token name. Every handler answers its errors with
 * their message as it is ({@link answersOnce}), so a client shows one `MCP error <code>:`.
 */
export function createAgentServer(
  deps: ResourceDeps & { call: CallContext; listed: ListedResources },
): Server {
  const server = new Server(SERVER_INFO, {
    capabilities: {
      tools: { listChanged: true },
      resources: { listChanged: true },
      // Prompts change with the servers behind enabled tools, as resources do: both are told then.
      prompts: { listChanged: true },
    },
    instructions: instructions(holdSeconds(deps.call.waitSeconds)),
  });
  server.setRequestHandler(
    ListToolsRequestSchema,
    answersOnce(() => ({ tools: listEnabledTools(deps.db).map(toMcpTool) })),
  );
  server.setRequestHandler(
    CallToolRequestSchema,
    answersOnce((req, extra) => callTool(deps.call, req.params, extra, deps)),
  );
  // What the servers listed (shared by every session): the URIs an agent may read without an owner's glob.
  const reader = { agent: deps.call.requester.name, listed: deps.listed };
  server.setRequestHandler(
    ListResourcesRequestSchema,
    answersOnce(async () => ({ resources: await listResources(deps, reader.listed) })),
  );
  // Templates as gatehouse://<server>/-/<template>: a read of an expansion is allowed (templates.ts).
  server.setRequestHandler(
    ListResourceTemplatesRequestSchema,
    answersOnce(async () => ({
      resourceTemplates: await listResourceTemplates(deps, reader.listed.templates),
    })),
  );
  server.setRequestHandler(
    LooseReadResourceRequest,
    answersOnce((req) =>
      readResource(
        deps,
        reader,
        typeof req.params.uri === "string" ? req.params.uri : (JSON.stringify(req.params.uri) ?? ""),
      ),
    ),
  );
  const prompter = { agent: deps.call.requester.name, listed: deps.listed.prompts };
  server.setRequestHandler(
    ListPromptsRequestSchema,
    answersOnce(async () => ({ prompts: await listPrompts(deps, prompter.listed) })),
  );
  server.setRequestHandler(
    LooseGetPromptRequest,
    answersOnce((req) => getPrompt(deps, prompter, req.params)),
  );
  return server;
}
