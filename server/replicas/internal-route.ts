import "server-only";
import type { Progress, RequestOptions } from "@modelcontextprotocol/client";
import { GatehouseError } from "@/lib/errors";
import type { Logger } from "../log";
import { outcomeUnknown } from "../mcp/failures";
import type { McpManager } from "../mcp/manager";
import { FORWARDED_METHODS, type ForwardedMethod, type ReadClient, RemoteSupervisor } from "../mcp/remote";
import { MAX_REQUEST_BODY_BYTES } from "../request";
import type { ForwardAnswer } from "./forward";
import type { InternalVerifier } from "./internal-auth";

/** A forwarded request's body: its arguments (up to the API's bound) and a little more. */
const MAX_FORWARD_BYTES = MAX_REQUEST_BODY_BYTES + 64 * 1024;

/**
 * A request on the internal route as the front door read it: plain values, no web `Request`
 * (whose streams cost more than the forwarded call); `signal` aborts when the asking replica
 * goes away before the answer.
 */
export interface InternalRequest {
  method: string;
  path: string;
  headers: { get(name: string): string | null };
  body: string;
  signal: AbortSignal;
  /**
   * Sends the tool server's progress notification ahead of the answer (the front door then
   * answers as `PROGRESS_STREAM`, forward.ts). Used for a `tools/call` that asked for progress.
   */
  progress(progress: Progress): void;
}

/** What the internal route answers: a status and a JSON body. */
export interface InternalAnswer {
  status: number;
  body: string;
}

const answer = (body: ForwardAnswer, status = 200): InternalAnswer => ({
  status,
  body: JSON.stringify(body),
});

const refused = (status: number, code: string, message: string) =>
  answer({ error: { code, message } }, status);

/**
 * How long a forwarded request waits for a server this replica is (re)starting (ms): a takeover
 * takes a few seconds. The forwarding replica's deadline allows for it (`FORWARD_MARGIN_MS`).
 */
export const HOLDER_START_WAIT_MS = 10_000;

/**
 * The holder's side of the internal route (`POST /internal/forward`): another replica asks this
 * one to send a request to a stdio server it holds. Only a request signed by a replica (the
 * shared key; `InternalVerifier`, which also refuses a replay) and addressed to this replica
 * (the body names the replica it is for: a replay to another is refused too) is read; only the
 * methods of {@link FORWARDED_METHODS} pass; a server this replica does not hold (any more) is refused
 * rather than forwarded again, so a request never travels in circles. Answers carry the tool
 * server's result, or the error as Gatehouse would have raised it here, with whether the outcome
 * is unknown (a call cut off mid-way), so the asking replica records the call as it would have.
 */
export async function answerForwarded(
  req: InternalRequest,
  deps: {
    verifier: InternalVerifier;
    manager: McpManager;
    log: Logger;
    /** This replica's id: a request addressed to another replica is refused. */
    replica: string;
  },
): Promise<InternalAnswer> {
  if (req.method !== "POST") return refused(405, "bad_request", "the internal route takes POST");
  const text = req.body;
  if (text.length > MAX_FORWARD_BYTES)
    return refused(413, "payload_too_large", "forwarded request too large");
  const why = deps.verifier.refusal("POST", req.path, req.headers, text);
  if (why !== null) {
    deps.log.warn(`internal route refused a request: ${why}`);
    return refused(401, "unauthenticated", "not signed by a Gatehouse replica");
  }
  let parsed: unknown = null;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = null;
  }
  const body = (typeof parsed === "object" ? parsed : null) as {
    server?: unknown;
    method?: unknown;
    params?: unknown;
    replica?: unknown;
    progress?: unknown;
  } | null;
  if (
    !body ||
    typeof body.server !== "string" ||
    typeof body.replica !== "string" ||
    !(FORWARDED_METHODS as readonly unknown[]).includes(body.method) ||
    typeof body.params !== "object" ||
    body.params === null
  ) {
    return refused(
      400,
      "bad_request",
      "a forwarded request names a server, a method, its params and the replica it is for",
    );
  }
  if (body.replica !== deps.replica) {
    // A nonce is remembered by the replica that saw it: a request caught on its way to one
    // replica, sent to another that holds the server by then, would run the tool twice.
    return refused(409, "upstream_elsewhere", "this forwarded request is addressed to another replica");
  }
  const method = body.method as ForwardedMethod;
  const params = body.params as Record<string, unknown>;
  try {
    // A holder that took the server a moment ago is still starting it: the request waits for it,
    // as a call made here would, rather than fail as "connecting".
    const supervisor = await deps.manager.reachable(body.server, {
      notAfter: Date.now() + HOLDER_START_WAIT_MS,
    });
    if (supervisor instanceof RemoteSupervisor) {
      return refused(
        409,
        "upstream_elsewhere",
        `server ${body.server} is not held by this replica (any more)`,
      );
    }
    let result: unknown;
    if (method === "tools/call") {
      const args = (params.arguments ?? {}) as Record<string, unknown>;
      result = await supervisor.callTool(String(params.name), args, {
        signal: req.signal,
        ...(body.progress === true ? { onProgress: (p: Progress) => req.progress(p) } : {}),
      });
    } else if (method === "reconnect") {
      supervisor.reconnectNow();
      result = null;
    } else if (method === "capabilities") {
      result = await supervisor.read(async (client) => client.getServerCapabilities() ?? null);
    } else {
      // Any of the forwarded reads: the holder's client checks the result against the method's schema.
      const request = (client: ReadClient) =>
        client.request as unknown as (
          r: { method: string; params: unknown },
          o: RequestOptions,
        ) => Promise<unknown>;
      result = await supervisor.read((client, options) =>
        request(client).call(client, { method, params }, options),
      );
    }
    return answer({ result });
  } catch (err) {
    const code = err instanceof GatehouseError ? err.code : "upstream_error";
    const message = err instanceof GatehouseError ? err.message : `request to ${body.server} failed`;
    return answer({ error: { code, message, outcomeUnknown: outcomeUnknown(err) } });
  }
}
