import type { AuditEventView } from "@/lib/api-types";
import { formatDateTime, formatDuration } from "@/lib/format";

/** What each step of a call reads as, on a call's page and in its story in Activity. */
const ACTIONS: Record<string, string> = {
  "call.pending": "Requested; waiting for approval",
  // The detail says why: read-only, an allow rule, or a grant.
  "call.started": "Requested; ran at once",
  "call.approval": "Approved; more approvals needed",
  "call.approved": "Approved",
  "grant.created": "Granted with the approval",
  "grant.revoked": "Grant revoked",
  "grant.ended": "Grant ended",
  "call.denied": "Denied",
  "call.expired": "Expired without a decision",
  "call.refused": "Refused",
  "call.succeeded": "Succeeded",
  "call.failed": "Failed",
  "call.interrupted": "Interrupted: outcome unknown",
  "call.withdrawn": "Withdrawn by the requester",
};

function durationText(event: AuditEventView): string | null {
  if (event.durationMs === null) return null;
  const d = formatDuration(event.durationMs);
  if (event.action === "call.succeeded" || event.action === "call.failed") return `ran ${d}`;
  return `after ${d}`;
}

/** A call's audit rows, oldest first: when, what, by whom, and the detail (a denial's reason). */
export function AuditTrail({ events, label = "Audit trail" }: { events: AuditEventView[]; label?: string }) {
  return (
    <ol aria-label={label} className="divide-y divide-zinc-100 rounded-lg border border-zinc-200 bg-white">
      {events.map((event) => {
        const duration = durationText(event);
        return (
          <li
            key={event.id}
            className="grid gap-x-4 gap-y-0.5 px-4 py-2.5 text-sm sm:grid-cols-[10.5rem_1fr]"
          >
            <time dateTime={event.at} className="tabular-nums text-zinc-500">
              {formatDateTime(event.at)}
            </time>
            <div className="min-w-0">
              <span className="font-medium text-zinc-900">{ACTIONS[event.action] ?? event.action}</span>
              <span className="break-words text-zinc-600">
                {" "}
                by {event.actor}
                {duration ? ` · ${duration}` : ""}
              </span>
              {event.detail ? <p className="break-words text-zinc-600">{event.detail}</p> : null}
            </div>
          </li>
        );
      })}
    </ol>
  );
}
