"use client";

import { useQuery, useQueryClient } from "@tanstack/react-query";
import Link from "next/link";
import { useCallback, useMemo, useState } from "react";
import { Age } from "@/components/age";
import { CallStatusBadge } from "@/components/call-status-badge";
import { callErrorText, recentDecisionText, serverOf } from "@/components/call-text";
import { DecisionSourceText } from "@/components/decision-source";
import { decisionSourceOf } from "@/components/grant-text";
import { NotifyMe } from "@/components/notify-me";
import { type DecisionError, PendingCallCard } from "@/components/pending-call-card";
import { Button, EmptyState, ErrorAlert, Loading, PageHeader, Section } from "@/components/ui";
import type { CallView } from "@/lib/api-types";
import { endpoints } from "@/lib/endpoints";
import { errorWithCode, formatDateTime } from "@/lib/format";
import { queryKeys } from "@/lib/query-keys";
import { usePendingNotifications, usePendingTitle } from "@/lib/use-pending-alerts";
import { usePendingCalls } from "@/lib/use-pending-calls";
import type { Viewer } from "@/lib/viewer";

const RECENT_LIMIT = 20;

type CallsData = { calls: CallView[] };

/**
 * The queue. While it is open the tab's title carries the number of pending calls, and new ones
 * raise a system notification once the reviewer has allowed them ("Notify me").
 *
 * @param viewer the signed-in person, to mark the calls they requested themselves and say who may approve them.
 */
export function ApprovalsView({ viewer }: { viewer: Viewer }) {
  const client = useQueryClient();
  // Failed decisions live here, not in the cards, so they stay visible after a call leaves the list.
  const [errors, setErrors] = useState<Record<string, DecisionError>>({});

  const pending = usePendingCalls();
  usePendingTitle(pending.data?.length);
  usePendingNotifications(pending.data);
  const recent = useQuery({
    queryKey: queryKeys.calls.recent(RECENT_LIMIT),
    queryFn: ({ signal }) => endpoints.calls.list({ limit: RECENT_LIMIT }, { signal }),
    select: (data) => data.calls.filter((call) => call.status !== "pending"),
  });

  const onDecided = useCallback(
    (call: CallView) => {
      setErrors(({ [call.id]: _dropped, ...rest }) => rest);
      // A decided card leaves at once, and an approval that was not the last shows at once ("1 of
      // 2"); the refetch confirms either.
      client.setQueryData<CallsData>(queryKeys.calls.pending(), (old) =>
        old
          ? {
              calls:
                call.status === "pending"
                  ? old.calls.map((c) => (c.id === call.id ? call : c))
                  : old.calls.filter((c) => c.id !== call.id),
            }
          : old,
      );
      void client.invalidateQueries({ queryKey: queryKeys.calls.all });
    },
    [client],
  );
  const onDecisionError = useCallback(
    (call: CallView, error: DecisionError) => {
      setErrors((old) => ({ ...old, [call.id]: error }));
      // Someone else may have decided first (already_decided): show the list as it now is.
      void client.invalidateQueries({ queryKey: queryKeys.calls.all });
    },
    [client],
  );
  const clearError = useCallback((id: string) => setErrors(({ [id]: _dropped, ...rest }) => rest), []);

  const pendingIds = useMemo(() => new Set((pending.data ?? []).map((call) => call.id)), [pending.data]);
  const orphanErrors = Object.entries(errors).filter(([id]) => !pendingIds.has(id));

  return (
    <div className="space-y-10">
      <div>
        <PageHeader
          title="Approvals"
          subtitle="Calls waiting for a decision, oldest first (the newest is last). The list updates live."
          actions={<NotifyMe />}
        />
        {orphanErrors.length > 0 ? (
          <ErrorAlert className="mb-4 flex items-start justify-between gap-3">
            <ul className="space-y-1">
              {orphanErrors.map(([id, error]) => (
                <li key={id}>
                  Could not {error.action} <span className="font-mono">{error.tool}</span>: {error.message}
                </li>
              ))}
            </ul>
            <Button
              className="shrink-0 px-2 py-0.5 text-xs"
              onClick={() =>
                setErrors((old) =>
                  Object.fromEntries(Object.entries(old).filter(([id]) => pendingIds.has(id))),
                )
              }
            >
              Dismiss
            </Button>
          </ErrorAlert>
        ) : null}
        {pending.isPending ? (
          <Loading label="Loading pending calls…" />
        ) : pending.isError ? (
          <ErrorAlert>Could not load pending calls: {errorWithCode(pending.error)}</ErrorAlert>
        ) : pending.data.length === 0 ? (
          <EmptyState title="No calls are waiting for approval">
            Calls that wait for a decision, from agents or people, appear here as soon as they arrive.
          </EmptyState>
        ) : (
          <ol aria-label="Pending calls" className="space-y-4">
            {pending.data.map((call) => (
              <li key={call.id}>
                <PendingCallCard
                  call={call}
                  error={errors[call.id] ?? null}
                  viewer={viewer}
                  permalink
                  onDecided={onDecided}
                  onError={onDecisionError}
                  onClearError={clearError}
                />
              </li>
            ))}
          </ol>
        )}
      </div>

      <Section title="Recently decided" description={`The last ${RECENT_LIMIT} calls, newest first.`}>
        {recent.isPending ? (
          <Loading label="Loading recent calls…" />
        ) : recent.isError ? (
          <ErrorAlert>Could not load recent calls: {errorWithCode(recent.error)}</ErrorAlert>
        ) : recent.data.length === 0 ? (
          <EmptyState title="No calls decided yet" />
        ) : (
          <ul
            aria-label="Recently decided calls"
            className="divide-y divide-zinc-100 rounded-lg border border-zinc-200 bg-white"
          >
            {recent.data.map((call) => (
              <RecentCall key={call.id} call={call} />
            ))}
          </ul>
        )}
      </Section>
    </div>
  );
}

function RecentCall({ call }: { call: CallView }) {
  const when = call.decidedAt ?? call.finishedAt ?? call.createdAt;
  const source = decisionSourceOf(call);
  const by = recentDecisionText(call);
  const server = serverOf(call);
  const failure = callErrorText(call);
  return (
    <li className="flex flex-wrap items-baseline gap-x-3 gap-y-1 px-4 py-2.5 text-sm">
      <CallStatusBadge status={call.status} />
      <span className="min-w-0 break-all font-mono text-zinc-900">{call.tool}</span>
      {server ? (
        <span className="text-zinc-500">
          on <span className="font-mono">{server}</span>
        </span>
      ) : null}
      {by ? <span className="text-zinc-700">{by}</span> : null}
      {source ? <DecisionSourceText source={source} className="text-zinc-700" /> : null}
      <span className="text-zinc-500">
        requested by {call.requester.kind} {call.requester.name}
      </span>
      <span className="ml-auto text-zinc-500" title={formatDateTime(when)}>
        <Age at={when} />
      </span>
      <Link
        href={`/activity/${encodeURIComponent(call.id)}`}
        className="text-sm font-medium text-indigo-700 hover:underline"
        aria-label={`Story of ${call.tool} call ${call.id}`}
      >
        Story
      </Link>
      {call.reason ? (
        <p className="w-full whitespace-pre-wrap break-words text-zinc-600">Reason: {call.reason}</p>
      ) : null}
      {failure ? (
        <p className="w-full break-words text-rose-700" data-testid="call-error">
          {failure.message} <span className="font-mono text-xs">({failure.code})</span>
        </p>
      ) : null}
    </li>
  );
}
