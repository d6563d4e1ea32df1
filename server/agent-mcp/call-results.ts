import "server-only";
import type { CallToolResult } from "@modelcontextprotocol/server";
import type { CallView } from "@/lib/api-types";
import { approvalsNeededText } from "@/lib/decision-text";
import { linkResult } from "./links";
import type { ResourceDeps } from "./listings";
import type { ListedResources } from "./resources";

/**
 * What an agent's `tools/call` is answered with, from the call as the broker tells it: the tool's
 * own result once final, or words saying how the call stands (refused, denied, still waiting),
 * each with the call's id and status in `_meta` ({@link CALL_META_KEY}).
 */

/**
 * A tool result's `_meta` without the keys the protocol reserves (`io.modelcontextprotocol/…`,
 * `modelcontextprotocol.io/…`): those speak of the hop between Gatehouse and the tool server (its
 * `serverInfo`, say) and are not the tool server's to say to an agent, who talks to Gatehouse.
 */
export function ownMeta(meta: unknown): Record<string, unknown> {
  if (meta === null || typeof meta !== "object" || Array.isArray(meta)) return {};
  return Object.fromEntries(Object.entries(meta).filter(([key]) => !RESERVED_META.test(key)));
}

const RESERVED_META = /^(io\.modelcontextprotocol|modelcontextprotocol\.io)\//;

/** `_meta` key on every `tools/call` result that went through the broker: the call's id and status. */
export const CALL_META_KEY = "gatehouse/call";

export function text(message: string, call: CallView | null, isError = true): CallToolResult {
  return {
    content: [{ type: "text", text: message }],
    isError,
    ...(call ? { _meta: { [CALL_META_KEY]: { id: call.id, status: call.status } } } : {}),
  };
}

function isToolResult(value: unknown): value is CallToolResult {
  return (
    value !== null &&
    typeof value === "object" &&
    Array.isArray((value as { content?: unknown }).content) &&
    !(value as { truncated?: unknown }).truncated
  );
}

/**
 * Where the resource links of tool results are recorded, and how long their descriptions may be:
 * the endpoint's shared listings (so a linked URI can be read, resources.ts) and the catalogue's
 * description bound.
 */
export type LinkContext = Pick<ResourceDeps, "descriptionMaxChars"> & { listed: ListedResources };

/**
 * The answer for a call in a final status. The tool's own result comes with its resource links
 * rewritten to `gatehouse://` URIs and recorded in `links` ({@link linkResult}); REST answers
 * keep the server's URIs (see there why).
 */
export function finalResult(call: CallView, checkUrl: string, links: LinkContext): CallToolResult {
  const meta = { [CALL_META_KEY]: { id: call.id, status: call.status } };
  switch (call.status) {
    case "succeeded":
    case "failed":
      // The tool's own answer, including a result it marked isError.
      if (isToolResult(call.result)) {
        const linked = linkResult(call.server, call.result, links.listed.linked, links.descriptionMaxChars);
        return { ...linked, _meta: { ...ownMeta(call.result._meta), ...meta } };
      }
      if (call.status === "succeeded") {
        return text(
          `Call ${call.id} succeeded, but its result is too large to return in full; see ${checkUrl}.`,
          call,
        );
      }
      return text(
        `Call ${call.id} failed: ${call.error?.message ?? "unknown error"} (${call.error?.code ?? "failed"}).`,
        call,
      );
    case "denied":
      return text(
        `Denied by ${call.decidedBy ?? "a reviewer"}: ${call.reason ?? "no reason given"}. Call ${call.id} was not run.`,
        call,
      );
    case "expired":
      return text(`Call ${call.id} expired without a decision; it was not run.`, call);
    case "refused":
      return text(
        `Refused: ${call.error?.message ?? "the call was refused"}. Call ${call.id} was not run.`,
        call,
      );
    case "interrupted":
      return text(
        call.error?.message.startsWith("Gatehouse stopped") === false
          ? `Call ${call.id} was interrupted while it ran: ${call.error.message}.`
          : `Call ${call.id} was interrupted by a Gatehouse restart while it ran; its outcome is unknown.`,
        call,
      );
    case "withdrawn":
      return text(`Call ${call.id} was withdrawn before anyone decided; it was not run.`, call);
    default:
      return text(`Call ${call.id} is ${call.status}.`, call);
  }
}

/**
 * The answer when the wait is over and nobody has decided yet (or the approved tool still runs).
 * `waitedSeconds`: how long the request was actually held — a hold cut short by a shutdown says
 * so, not the wait it was allowed.
 */
export function stillWaitingResult(call: CallView, waitedSeconds: number, checkUrl: string): CallToolResult {
  const later = `Check it later with GET ${checkUrl}?wait=60 and the same bearer token.`;
  if (call.status === "running") {
    return text(
      `Call ${call.id} was approved by ${call.decidedBy ?? "a reviewer"} and is still running. ${later}`,
      call,
    );
  }
  const expiry = call.expiresAt ? ` (it expires at ${call.expiresAt})` : "";
  const needed = `${approvalsNeededText(call.approvalsNeeded)}${call.approvalsNeeded > 1 ? ` (${call.approvedBy.length} so far)` : ""}`;
  return text(
    `Call ${call.id} is still waiting for ${needed} after ${waitedSeconds} s. It stays pending until someone decides${expiry}; nothing more is needed to keep it. ${later}`,
    call,
  );
}
