import { approversIn, auditStepWords } from "@/components/call-text";
import type { AuditEventView } from "@/lib/api-types";
import { formatDateTime } from "@/lib/format";

/**
 * A call's audit rows, oldest first: when, what happened and by whom (see `auditStepWords`), and
 * the detail under a label that says what it is (why it waited, a denial's reason, an error).
 * `approvalsNeeded`, when given, lets a waiting row say how many approvals it waits for;
 * without it the row says "waiting for approval".
 */
export function AuditTrail({
  events,
  label = "Audit trail",
  approvalsNeeded,
}: {
  events: AuditEventView[];
  label?: string;
  approvalsNeeded?: number;
}) {
  const approvers = approversIn(events);
  return (
    <ol aria-label={label} className="divide-y divide-zinc-100 rounded-lg border border-zinc-200 bg-white">
      {events.map((event) => {
        const step = auditStepWords(event, { approvers, approvalsNeeded });
        return (
          <li
            key={event.id}
            className="grid gap-x-4 gap-y-0.5 px-4 py-2.5 text-sm sm:grid-cols-[10.5rem_1fr]"
          >
            <time dateTime={event.at} className="tabular-nums text-zinc-500">
              {formatDateTime(event.at)}
            </time>
            <div className="min-w-0">
              <span className="break-words font-medium text-zinc-900">{step.what}</span>
              {step.more ? <span className="break-words text-zinc-600"> · {step.more}</span> : null}
              {step.detail ? (
                <p className="break-words text-zinc-600">
                  <span className="text-zinc-500">{step.detailLabel}:</span> {step.detail}
                </p>
              ) : null}
            </div>
          </li>
        );
      })}
    </ol>
  );
}
