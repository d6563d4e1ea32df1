import "server-only";
import { CLIENT_CAPABILITIES_META_KEY, type Server, type ServerContext } from "@modelcontextprotocol/server";
import { z } from "zod";
import type { CallView } from "@/lib/api-types";
import { approvalsNeededText, approvalsText, decidersText } from "@/lib/decision-text";
import { GatehouseError } from "@/lib/errors";
import type { CallBroker, Requester } from "../calls/broker";
import type { Logger } from "../log";
import { answersOnce, rpcFailure } from "./rpc";
import { CALL_META_KEY, finalResult, type LinkContext } from "./tools";

/**
 * Held calls as tasks (the MCP tasks extension, `io.modelcontextprotocol/tasks`), on the
 * 2026-07-28 leg only: a `tools/call` whose request declares the extension, and that the broker
 * holds for a reviewer, is answered at once with a task whose id is the call's id, instead of a
 * request held open. Everything a task says is read from the stored call, so any Gatehouse on
 * the same store answers for it, before or after a restart, and nothing is kept in memory:
 *
 * | call | task |
 * |---|---|
 * | `pending`, `running` | `working` (waiting for whom, "1 of 2 approvals", or running) |
 * | `succeeded`, `failed` | `completed` with the `tools/call` result the call would have had at once (a tool's `isError` result included, and a failure to reach the tool, which Gatehouse answers as an `isError` result on either leg) |
 * | `denied`, `expired`, `refused` | `failed`, `error.code` {@link CALL_NOT_RUN_CODE} |
 * | `interrupted` | `failed`, `error.code` -32603: Gatehouse, or the tool server, stopped while the tool ran, so its outcome is unknown; neither the tool's answer nor the agent's doing |
 * | `withdrawn` | `cancelled` (the agent's `tasks/cancel`, its cancelled held request, or its token's revocation) |
 *
 * A task is its requester's alone: any other token's `tasks/*` on its id answers as an unknown
 * id does.
 */

/** The extension's identifier: in `server/discover`'s capabilities, and in a request's. */
export const TASKS_EXTENSION = "io.modelcontextprotocol/tasks";

/** What `server/discover` says of the extension: supported, with no settings (the spec's `{}`). */
export const TASKS_CAPABILITY = { [TASKS_EXTENSION]: {} } as const;

/** How often a client is asked to poll `tasks/get`: a reviewer takes seconds at the least. */
export const TASK_POLL_INTERVAL_MS = 2000;

/**
 * The JSON-RPC error code of a failed task whose call was never run: a reviewer denied it, it
 * expired undecided, or its approval no longer applied (`error.data.status` says which). In the
 * range JSON-RPC 2.0 leaves to servers (-32000 to -32099), and none MCP or its SDK uses there
 * (-32000/-32001 generic and timeout, -32002 resource not found, -32020 to -32022 headers,
 * capabilities and versions, -32042 URL elicitation), so a client can tell "not run, by
 * decision" from any protocol failure.
 */
export const CALL_NOT_RUN_CODE = -32010;

/** A `tools/call` result, as tools.ts builds them. */
type ToolResult = ReturnType<typeof finalResult>;

const INVALID_PARAMS = -32602;
const INTERNAL_ERROR = -32603;
const MISSING_REQUIRED_CLIENT_CAPABILITY = -32021;

type TaskStatus = "working" | "completed" | "failed" | "cancelled";

/** The fields every task shape has (the extension's `Task`); a type, so it is a JSON-RPC `Result`. */
type TaskFields = {
  taskId: string;
  status: TaskStatus;
  statusMessage: string;
  createdAt: string;
  lastUpdatedAt: string;
  /** From `createdAt`; null: kept as long as the call is (Gatehouse deletes no call). */
  ttlMs: number | null;
  pollIntervalMs: number;
  _meta: Record<string, unknown>;
};

/** `tools/call`'s answer for a held call: the extension's `CreateTaskResult`. */
export type CreateTaskResult = TaskFields & { resultType: "task" };

/** `tasks/get`'s answer (the SDK stamps `resultType: "complete"`): the extension's `DetailedTask`. */
export type DetailedTask = TaskFields &
  (
    | { status: "working" | "cancelled" }
    | { status: "completed"; result: ToolResult & { resultType: "complete" } }
    | { status: "failed"; error: { code: number; message: string; data?: Record<string, unknown> } }
  );

/** Whether a 2026-07-28 request declares the tasks extension in its own `_meta` envelope. */
export function declaresTasks(ctx: ServerContext): boolean {
  const envelope = ctx.mcpReq.envelope as Record<string, unknown> | undefined;
  const capabilities = envelope?.[CLIENT_CAPABILITIES_META_KEY] as { extensions?: unknown } | undefined;
  const extensions = capabilities?.extensions;
  return typeof extensions === "object" && extensions !== null && TASKS_EXTENSION in extensions;
}

/**
 * The task's time to live, from its creation: while the call waits, until it expires (a call
 * nobody decided by then fails); once decided, null, as the call is kept, and a slow tool run
 * after a late approval must not look like a task gone stale.
 */
function ttlOf(call: CallView): number | null {
  if (call.status !== "pending" || call.expiresAt === null) return null;
  return Math.max(0, Date.parse(call.expiresAt) - Date.parse(call.createdAt));
}

/** The latest moment the call moved (an approval short of the last one has no time of its own). */
function lastUpdatedOf(call: CallView): string {
  const times = [call.createdAt, call.decidedAt, call.startedAt, call.finishedAt];
  // ISO 8601 strings of one format sort as the times they name.
  return (
    times
      .filter((t): t is string => t !== null)
      .sort()
      .at(-1) ?? call.createdAt
  );
}

function fieldsOf(call: CallView, status: TaskStatus, statusMessage: string): TaskFields {
  return {
    taskId: call.id,
    status,
    statusMessage,
    createdAt: call.createdAt,
    lastUpdatedAt: lastUpdatedOf(call),
    ttlMs: ttlOf(call),
    pollIntervalMs: TASK_POLL_INTERVAL_MS,
    // As on every tools/call answer that went through the broker: the call's id and status.
    _meta: { [CALL_META_KEY]: { id: call.id, status: call.status } },
  };
}

/** What a call that is still moving waits for, in words. */
function workingMessage(call: CallView): string {
  if (call.status === "running") return `approved by ${decidersText(call) ?? "a reviewer"}; running`;
  const needed = call.approvalsNeeded;
  const sofar = needed > 1 ? ` (${approvalsText(call.approvedBy.length, needed)})` : "";
  const expiry = call.expiresAt ? `; it expires at ${call.expiresAt}` : "";
  return `waiting for ${approvalsNeededText(needed)}${sofar}${expiry}`;
}

/** The words of an answer that is a single text (the 2025 leg's words for the same outcome). */
function wordsOf(result: ToolResult): string {
  return result.content.map((c) => (c.type === "text" ? c.text : "")).join("\n");
}

/** The task a pending call is, as `tools/call` answers it. */
export function createdTask(call: CallView): CreateTaskResult {
  return { resultType: "task", ...fieldsOf(call, "working", workingMessage(call)) };
}

/**
 * The task a call is now (see the table at the top). `checkUrl`: where the call can be read on
 * the REST API, named by a result too large to give whole; `links`: where a result's resource
 * links are recorded, as for any `tools/call` result ({@link finalResult}).
 */
export function taskOf(call: CallView, checkUrl: string, links: LinkContext): DetailedTask {
  switch (call.status) {
    case "pending":
    case "running":
      return { ...fieldsOf(call, "working", workingMessage(call)), status: "working" };
    case "succeeded":
    case "failed": {
      // As the tools/call would have answered on the wire, where a 2026-07-28 result says its type.
      const result = { ...finalResult(call, checkUrl, links), resultType: "complete" as const };
      const message = call.status === "succeeded" ? "succeeded" : "the tool answered with an error";
      return { ...fieldsOf(call, "completed", message), status: "completed", result };
    }
    case "withdrawn":
      return {
        ...fieldsOf(call, "cancelled", "withdrawn by its requester before anyone decided; it was not run"),
        status: "cancelled",
      };
    default: {
      // denied, expired, refused, interrupted: the same words as the 2025 leg's isError answer.
      const message = wordsOf(finalResult(call, checkUrl, links));
      const code = call.status === "interrupted" ? INTERNAL_ERROR : CALL_NOT_RUN_CODE;
      const data: Record<string, unknown> = { callId: call.id, status: call.status };
      if (call.status === "denied") {
        data.decidedBy = call.decidedBy;
        data.reason = call.reason;
      }
      return { ...fieldsOf(call, "failed", message), status: "failed", error: { code, message, data } };
    }
  }
}

export interface TaskDeps {
  broker: CallBroker;
  log: Logger;
  /** The token's agent: only its own calls are its tasks. */
  requester: Requester;
  /** Gatehouse's origin as the agent reaches it (`GATEHOUSE_PUBLIC_ORIGIN` or the request's). */
  baseUrl: string;
  links: LinkContext;
}

/** `tasks/*` parameters: a string `taskId` (the SDK answers -32602 otherwise), anything else as sent. */
const TaskParams = z.looseObject({ taskId: z.string() });

/** The one answer for an id that is not this token's task, whether it exists or not. */
function notFound(): Error {
  return rpcFailure(INVALID_PARAMS, "Failed to retrieve task: Task not found");
}

/** The spec's refusal of `tasks/*` from a request that does not declare the extension. */
function requireDeclared(ctx: ServerContext): void {
  if (declaresTasks(ctx)) return;
  throw rpcFailure(
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    `Missing required client capability: declare the ${TASKS_EXTENSION} extension in this request's client capabilities`,
    { requiredCapabilities: { extensions: TASKS_CAPABILITY } },
  );
}

/** The token's own call `id`, from the store. */
async function ownCall(deps: TaskDeps, id: string): Promise<CallView> {
  const call = await deps.broker.get(id);
  const { kind, name } = deps.requester;
  if (!call || call.requester.kind !== kind || call.requester.name !== name) throw notFound();
  return call;
}

/**
 * Registers `tasks/get`, `tasks/cancel` and `tasks/update` on one request's server, each with an
 * explicit parameter schema (without one, the SDK answers the 2026-07-28 registry's -32601).
 * `tasks/cancel` withdraws a pending call through the broker, as a cancelled held request does
 * (the same `withdrawn` status and audit row), and changes nothing once the call is decided.
 * `tasks/update` is refused: Gatehouse never asks a client for input, so a task has no input
 * request to answer.
 */
export function registerTaskHandlers(server: Server, deps: TaskDeps): void {
  server.setRequestHandler(
    "tasks/get",
    { params: TaskParams },
    answersOnce(async (params, ctx: ServerContext) => {
      requireDeclared(ctx);
      const call = await ownCall(deps, params.taskId);
      return taskOf(call, `${deps.baseUrl}/api/calls/${call.id}`, deps.links);
    }),
  );
  server.setRequestHandler(
    "tasks/cancel",
    { params: TaskParams },
    answersOnce(async (params, ctx: ServerContext) => {
      requireDeclared(ctx);
      const call = await ownCall(deps, params.taskId);
      if (call.status !== "pending") return {};
      try {
        await deps.broker.withdraw(deps.requester, call.id);
      } catch (err) {
        // A reviewer decided in the meantime: the decision stands, and the cancel is still acknowledged.
        if (!(err instanceof GatehouseError && err.code === "already_decided")) throw err;
        deps.log.info(`call ${call.id} was not withdrawn: ${err.message}`);
      }
      return {};
    }),
  );
  server.setRequestHandler(
    "tasks/update",
    { params: TaskParams },
    answersOnce(async (params, ctx: ServerContext) => {
      requireDeclared(ctx);
      const call = await ownCall(deps, params.taskId);
      throw rpcFailure(
        INVALID_PARAMS,
        `Task ${call.id} asks for no input: Gatehouse never asks a client for input, so there is nothing to update`,
      );
    }),
  );
}
