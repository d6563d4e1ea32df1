import { useQuery } from "@tanstack/react-query";
import type { CallView } from "@/lib/api-types";
import { endpoints } from "@/lib/endpoints";
import { queryKeys } from "@/lib/query-keys";

/** The API's largest page; far more calls than anyone can review waiting at once. */
export const PENDING_LIMIT = 500;

function oldestFirst(a: CallView, b: CallView): number {
  return a.createdAt.localeCompare(b.createdAt) || a.id.localeCompare(b.id);
}

/** Module-level, so react-query keeps the selected list between renders. */
function selectPending(data: { calls: CallView[] }): CallView[] {
  return data.calls.filter((call) => call.status === "pending").sort(oldestFirst);
}

/**
 * The calls waiting for a decision, oldest first: the queue, the tab title's count and the
 * system notifications all read this one query (`queryKeys.calls.pending()`), which live "call"
 * events refresh. Its cached form is the API's page (`{calls}`), so a caller may drop a call from
 * it at once when deciding it. The header's count on "Approvals" reads it too, so on the queue
 * both are one request. `enabled` (default true): false asks for nothing (someone who may not
 * approve).
 */
export function usePendingCalls(enabled = true) {
  return useQuery({
    queryKey: queryKeys.calls.pending(),
    queryFn: ({ signal }) => endpoints.calls.list({ status: "pending", limit: PENDING_LIMIT }, { signal }),
    select: selectPending,
    enabled,
  });
}
