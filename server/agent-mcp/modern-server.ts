import "server-only";
import { type CallToolResult, Server, type ServerContext, type Tool } from "@modelcontextprotocol/server";
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
import { instructions, SERVER_INFO } from "./server";
import { createdTask, declaresTasks, registerTaskHandlers, TASKS_CAPABILITY } from "./tasks";
import { type CallContext, callTool, holdSeconds, toMcpTool } from "./tools";

/**
 * `prompts/get` and `resources/read` parameters as they arrive, unchecked, for the reason
 * server.ts gives for its own loose schemas: Gatehouse refuses a non-string name, argument or
 * URI itself, with -32602 and the refusal's audit row, instead of the SDK refusing it unaudited.
 */
const LoosePromptParams = z.looseObject({ name: z.unknown(), arguments: z.unknown().optional() });
const LooseReadParams = z.looseObject({ uri: z.unknown() });

/** What `callTool` (tools.ts) is handed for its request: the 2025 handler's `extra`. */
type CallExtra = Parameters<typeof callTool>[2];

/**
 * The 2025 handler context `callTool` expects, made of a 2026-07-28 request's context: its
 * abort signal (the client closing the request's stream, or Gatehouse ending the exchange) or
 * `release` (Gatehouse stops holding the call, and the handler answers with the call as it
 * stands), its id, its `_meta` (the progress token) and its `notify`, which puts progress on the
 * request's own event stream. There is no server→client request on a modern exchange:
 * `sendRequest` refuses, and tools.ts never sends one.
 */
export function callExtraOf(ctx: ServerContext, release: AbortSignal): CallExtra {
  return {
    signal: AbortSignal.any([ctx.mcpReq.signal, release]),
    requestId: ctx.mcpReq.id,
    ...(ctx.mcpReq._meta ? { _meta: ctx.mcpReq._meta as CallExtra["_meta"] } : {}),
    ...(ctx.http?.authInfo ? { authInfo: ctx.http.authInfo } : {}),
    sendNotification: (notification) => ctx.mcpReq.notify(notification),
    sendRequest: () =>
      Promise.reject(new Error("a 2026-07-28 request cannot send the client a request of its own")),
  };
}

/**
 * One 2026-07-28 request's MCP server for one agent: the same capabilities, instructions and
 * handlers as a 2025 session's (`createAgentServer` in server.ts) — `tools/list` the enabled
 * catalogue, `tools/call` through the broker with destructive calls held ({@link callTool}),
 * resources and prompts passed through read-only and audited — built for the request and
 * dropped after it (`release`: see {@link callExtraOf}), so it holds nothing another request (or another Gatehouse process on the
 * same store) would need. Beyond the 2025 leg, the tasks extension (tasks.ts): a `tools/call`
 * whose request declares it gets a task for a call held for a reviewer instead of a held
 * request, and `tasks/get` / `tasks/cancel` / `tasks/update` answer for the token's own calls.
 */
export function createModernAgentServer(
  release: AbortSignal,
  deps: ResourceDeps & { call: CallContext; listed: ListedResources },
): Server {
  const server = new Server(SERVER_INFO, {
    capabilities: {
      tools: { listChanged: true },
      resources: { listChanged: true },
      prompts: { listChanged: true },
      extensions: TASKS_CAPABILITY,
    },
    instructions: instructions(holdSeconds(deps.call.waitSeconds)),
  });
  server.setRequestHandler(
    "tools/list",
    // tools.ts speaks the 2025 SDK's types; the JSON they describe is the same on both legs.
    answersOnce(() => ({ tools: listEnabledTools(deps.db).map(toMcpTool) as Tool[] })),
  );
  server.setRequestHandler(
    "tools/call",
    answersOnce(async (req, ctx: ServerContext) => {
      // The extension's `CreateTaskResult` is no CallToolResult, and the SDK passes it as it is.
      const asTask = declaresTasks(ctx) ? createdTask : undefined;
      return (await callTool(
        deps.call,
        req.params,
        callExtraOf(ctx, release),
        deps,
        asTask,
      )) as CallToolResult;
    }),
  );
  registerTaskHandlers(server, {
    broker: deps.call.broker,
    log: deps.call.log,
    requester: deps.call.requester,
    baseUrl: deps.call.baseUrl,
    links: deps,
  });
  const reader = { agent: deps.call.requester.name, listed: deps.listed };
  server.setRequestHandler(
    "resources/list",
    answersOnce(async () => ({ resources: await listResources(deps, reader.listed) })),
  );
  // As the 2025 leg lists them (server.ts): a read of an expansion is allowed (templates.ts).
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
