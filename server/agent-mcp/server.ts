import "server-only";
import { type CallToolResult, Server, type ServerCapabilities } from "@modelcontextprotocol/server";
import { z } from "zod";
import { enabledToolsFor } from "../agents";
import type { ResourceDeps } from "./listings";
import { getPrompt, listPrompts } from "./prompts";
import { type ListedResources, listResources, readResource } from "./resources";
import { answersOnce } from "./rpc";
import { createdTask, declaresTasks, registerTaskHandlers, TASKS_CAPABILITY } from "./tasks";
import { listResourceTemplates } from "./templates";
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
 * `prompts/get` and `resources/read` parameters as they arrive, unchecked: the SDK's own schemas
 * would refuse a non-string name, argument or URI before Gatehouse sees it (unaudited);
 * Gatehouse checks them itself, refuses with -32602 and writes the refusal's audit row like any
 * other.
 */
const LoosePromptParams = z.looseObject({ name: z.unknown(), arguments: z.unknown().optional() });
const LooseReadParams = z.looseObject({ uri: z.unknown() });

/** Which protocol era a server serves: a 2025 session's, or one 2026-07-28 request's. */
export type AgentServerEra = "2025" | "2026-07-28";

export type AgentServerDeps = ResourceDeps & { call: CallContext; listed: ListedResources };

/**
 * One agent's MCP server, for either era: a 2025 session's (endpoint.ts keeps it for the
 * session's life) or one 2026-07-28 request's (modern.ts builds it for the request and drops it
 * after, so it holds nothing another request, or another Gatehouse on the same store, would
 * need). The same capabilities, instructions and handlers on both: `tools/list` is the enabled
 * catalogue, `tools/call` goes through the call broker (refusals as `isError` results,
 * destructive calls held for a decision, {@link callTool}), and resources and prompts of servers
 * with an enabled tool pass through read-only: only those their server listed in its latest
 * list, or (resources) an owner allowed (resources.ts, prompts.ts), each read or get audited
 * under the agent's token name. Every handler answers its errors with their message as it is
 * ({@link answersOnce}), so a client shows one `MCP error <code>:`.
 *
 * What 2026-07-28 adds is the tasks extension (tasks.ts): offered in `server/discover`, a
 * `tools/call` whose request declares it gets a task for a call held for a reviewer instead of a
 * held request, and `tasks/get` / `tasks/cancel` / `tasks/update` answer for the token's own
 * calls. (Its per-request `release`, which ends a hold at shutdown, comes in `deps.call`.)
 */
export function createAgentServer(given: AgentServerDeps, era: AgentServerEra): Server {
  // What the agent is shown is bounded by its tool set: the requester object is the session's
  // own, which the endpoint updates on every request, so a moved token's next list follows.
  const deps: AgentServerDeps = { ...given, requester: given.call.requester };
  const modern = era === "2026-07-28";
  const capabilities: ServerCapabilities = {
    tools: { listChanged: true },
    resources: { listChanged: true },
    // Prompts change with the servers behind enabled tools, as resources do: both are told then.
    prompts: { listChanged: true },
    ...(modern ? { extensions: TASKS_CAPABILITY } : {}),
  };
  const server = new Server(SERVER_INFO, {
    capabilities,
    instructions: instructions(holdSeconds(deps.call.waitSeconds)),
  });
  server.setRequestHandler(
    "tools/list",
    answersOnce(async () => ({
      tools: (await enabledToolsFor(deps.db, deps.toolSets, deps.requester)).map(toMcpTool),
    })),
  );
  server.setRequestHandler(
    "tools/call",
    answersOnce(async (req, ctx) => {
      // Only a 2026-07-28 request can declare the extension (its envelope is per request).
      const asTask = modern && declaresTasks(ctx) ? createdTask : undefined;
      const answer = await callTool(deps.call, req.params, ctx, deps, asTask);
      // The extension's `CreateTaskResult` is no CallToolResult, and the SDK passes it as it is.
      if ("resultType" in answer && answer.resultType === "task") return answer as CallToolResult;
      // As the agent's era can carry it: a 2026-07-28 tool server may answer a non-object
      // `structuredContent`, which a 2025 client's schema refuses (the whole result, after the
      // call ran); the SDK's projection wraps it as `{result: …}` there and adds its text.
      return server.projectCallToolResult(answer as CallToolResult, undefined);
    }),
  );
  if (modern) {
    registerTaskHandlers(server, {
      broker: deps.call.broker,
      log: deps.call.log,
      requester: deps.call.requester,
      baseUrl: deps.call.baseUrl,
      links: deps,
    });
  }
  // What the servers listed (shared by every session and request): the URIs an agent may read
  // without an owner's glob.
  const reader = { agent: deps.call.requester.name, listed: deps.listed };
  server.setRequestHandler(
    "resources/list",
    answersOnce(async () => ({ resources: await listResources(deps, reader.listed) })),
  );
  // Templates as gatehouse://<server>/-/<template>: a read of an expansion is allowed (templates.ts).
  server.setRequestHandler(
    "resources/templates/list",
    answersOnce(async () => ({
      resourceTemplates: await listResourceTemplates(deps, reader.listed.templates),
    })),
  );
  server.setRequestHandler(
    "resources/read",
    { params: LooseReadParams },
    answersOnce((params) =>
      readResource(
        deps,
        reader,
        typeof params.uri === "string" ? params.uri : (JSON.stringify(params.uri) ?? ""),
      ),
    ),
  );
  const prompter = { agent: deps.call.requester.name, listed: deps.listed.prompts };
  server.setRequestHandler(
    "prompts/list",
    answersOnce(async () => ({ prompts: await listPrompts(deps, prompter.listed) })),
  );
  server.setRequestHandler(
    "prompts/get",
    { params: LoosePromptParams },
    answersOnce((params) => getPrompt(deps, prompter, params)),
  );
  return server;
}
