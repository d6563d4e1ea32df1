"use client";

import { useQuery, useQueryClient } from "@tanstack/react-query";
import Link from "next/link";
import { type ReactNode, useCallback, useEffect, useState } from "react";
import { Age } from "@/components/age";
import { AuditTrail } from "@/components/audit-trail";
import { CallStatusBadge } from "@/components/call-status-badge";
import { callErrorText, interruptedWhy } from "@/components/call-text";
import { DecisionSourceText } from "@/components/decision-source";
import { decisionSourceOf } from "@/components/grant-text";
import { isCallNotFound, NoSuchCall } from "@/components/no-such-call";
import { NotifyMe } from "@/components/notify-me";
import { type DecisionError, PendingCallCard } from "@/components/pending-call-card";
import { ErrorAlert, Loading, PageHeader, Section } from "@/components/ui";
import type { CallStoryView, CallView } from "@/lib/api-types";
import { decidersText } from "@/lib/decision-text";
import { endpoints } from "@/lib/endpoints";
import { capitalized, errorWithCode, formatDateTime } from "@/lib/format";
import { queryKeys } from "@/lib/query-keys";
import { afterLiveStreamOpened } from "@/lib/use-live-events";
import { usePendingNotifications, usePendingTitle } from "@/lib/use-pending-alerts";
import { usePendingCalls } from "@/lib/use-pending-calls";
import type { Viewer } from "@/lib/viewer";

/** setTimeout's longest delay; a deadline further away is simply never reached while the page is open. */
const MAX_TIMEOUT_MS = 2 ** 31 - 1;

/** True once `at` has passed, flipping by itself at that moment (no ticking re-render). */
function usePassed(at: string | null): boolean {
  const [passed, setPassed] = useState(() => at !== null && Date.parse(at) <= Date.now());
  useEffect(() => {
    const left = at === null ? Number.POSITIVE_INFINITY : Date.parse(at) - Date.now();
    setPassed(left <= 0);
    if (left <= 0 || left > MAX_TIMEOUT_MS) return;
    const timer = setTimeout(() => setPassed(true), left);
    return () => clearTimeout(timer);
  }, [at]);
  return passed;
}

/**
 * `/approvals/<id>`: one call for decision, where a notification's link lands. A pending call
 * gets the queue's card (tool, server, requester, why it waits, exact arguments, Approve / Deny
 * with the same rules) and its story so far; a call no longer waiting says plainly what became
 * of it, by whom and when, without buttons; an unknown id says there is no such call. Live
 * "call" events refresh the story (`queryKeys.calls.story`), so a decision taken elsewhere shows
 * here without a reload. The tab title counts the pending calls, and new ones notify, as on the
 * queue.
 */
export function ApprovalDecision({ id, viewer }: { id: string; viewer: Viewer }) {
  const client = useQueryClient();
  const story = useQuery({
    queryKey: queryKeys.calls.story(id),
    // Once the live stream is open: its first opening would otherwise fetch the call again.
    queryFn: ({ signal }) => afterLiveStreamOpened(signal).then(() => endpoints.calls.story(id, { signal })),
  });
  const pending = usePendingCalls();
  usePendingTitle(pending.data?.length);
  usePendingNotifications(pending.data);
  const [error, setError] = useState<DecisionError | null>(null);

  const onDecided = useCallback(
    (call: CallView) => {
      setError(null);
      // The decision shows at once; the refetch brings the audit rows and the outcome.
      client.setQueryData<CallStoryView>(queryKeys.calls.story(id), (old) => (old ? { ...old, call } : old));
      void client.invalidateQueries({ queryKey: queryKeys.calls.all });
    },
    [client, id],
  );
  const onError = useCallback(
    (_call: CallView, failure: DecisionError) => {
      setError(failure);
      // Someone else may have decided first (already_decided): show the call as it now is.
      void client.invalidateQueries({ queryKey: queryKeys.calls.all });
    },
    [client],
  );
  const clearError = useCallback(() => setError(null), []);

  const call = story.data?.call;
  const timeUp = usePassed(call?.status === "pending" ? call.expiresAt : null);
  const open = call?.status === "pending" && !timeUp;

  return (
    <div>
      <Link href="/approvals" className="text-sm font-medium text-indigo-700 hover:underline">
        ← Approvals
      </Link>
      <div className="mt-3">
        <PageHeader
          title="Approval"
          subtitle={
            !call
              ? undefined
              : open
                ? "This call waits for a decision. The page updates live."
                : "This call no longer waits for a decision."
          }
          actions={<NotifyMe />}
        />
      </div>
      {story.data ? (
        <div className="space-y-8">
          {open ? (
            <PendingCallCard
              call={story.data.call}
              error={error}
              viewer={viewer}
              onDecided={onDecided}
              onError={onError}
              onClearError={clearError}
            />
          ) : (
            <div className="space-y-4">
              {error ? (
                <ErrorAlert>
                  Could not {error.action} <span className="font-mono">{error.tool}</span>: {error.message}
                </ErrorAlert>
              ) : null}
              <Outcome call={story.data.call} timeUp={timeUp} />
              <PendingCallCard
                call={story.data.call}
                error={null}
                viewer={viewer}
                decidable={false}
                onDecided={onDecided}
                onError={onError}
                onClearError={clearError}
              />
            </div>
          )}
          <Section
            title={open ? "Story so far" : "Story"}
            description={
              <>
                Every step of this call, oldest first.{" "}
                <Link
                  href={`/activity/${encodeURIComponent(id)}`}
                  className="font-medium text-indigo-700 hover:underline"
                >
                  {open ? "Its page in Activity" : "The whole story, with the result"}
                </Link>
              </>
            }
          >
            <AuditTrail events={story.data.audit} approvalsNeeded={story.data.call.approvalsNeeded} />
          </Section>
        </div>
      ) : story.isPending ? (
        <Loading label="Loading the call…" />
      ) : isCallNotFound(story.error) ? (
        <NoSuchCall id={id} back={{ href: "/approvals", label: "See the calls waiting for approval" }} />
      ) : (
        <ErrorAlert>Could not load this call: {errorWithCode(story.error)}</ErrorAlert>
      )}
    </div>
  );
}

/** "when (3 min ago)" with the exact time in the datetime attribute. */
function When({ at }: { at: string | null }) {
  if (!at) return <>at an unknown time</>;
  return (
    <>
      at {formatDateTime(at)} (<Age at={at} />)
    </>
  );
}

function Who({ name }: { name: string | null }) {
  return <span className="font-medium text-zinc-900">{name ?? "a reviewer"}</span>;
}

/** Whoever decided the call (see `decidersText`). */
const approvers = decidersText;

/** What became of a call that no longer waits, in one heading and a sentence or two. */
function outcomeOf(
  call: CallView,
  timeUp: boolean,
): { heading: string; tone: "done" | "stopped"; text: ReactNode } {
  const approved = (
    <>
      <Who name={approvers(call)} /> approved it <When at={call.decidedAt} />.
    </>
  );
  const source = decisionSourceOf(call);
  const ranAtOnce =
    source?.kind === "allowed" ? (
      <>
        It ran at once, <DecisionSourceText source={source} />.
      </>
    ) : source?.kind === "grant" ? (
      <>
        It did not wait for a reviewer: it <DecisionSourceText source={source} />.
      </>
    ) : (
      "It did not need approval: it ran at once."
    );
  switch (call.status) {
    case "pending":
      return {
        heading: timeUp ? "Time is up" : "Waiting",
        tone: "stopped",
        text: (
          <>
            Nobody decided before its deadline <When at={call.expiresAt} />. Gatehouse is expiring it: it will
            not run.
          </>
        ),
      };
    case "running":
      return {
        heading: call.decidedAt ? "Approved" : "Ran at once",
        tone: "done",
        text: call.decidedAt ? <>{approved} The tool is running.</> : ranAtOnce,
      };
    case "succeeded":
      return {
        heading: call.decidedAt ? "Approved" : "Ran at once",
        tone: "done",
        text: (
          <>
            {call.decidedAt ? approved : ranAtOnce} The tool ran and succeeded
            {call.finishedAt ? ` at ${formatDateTime(call.finishedAt)}` : ""}.
          </>
        ),
      };
    case "failed": {
      const failure = callErrorText(call);
      return {
        heading: call.decidedAt ? "Approved" : "Ran at once",
        tone: "done",
        text: (
          <>
            {call.decidedAt ? approved : ranAtOnce}{" "}
            {failure?.toolText
              ? `The tool ran and reported an error: ${failure.toolText} (${failure.code}).`
              : `The tool ran and failed${failure ? `: ${failure.message} (${failure.code})` : ""}.`}
          </>
        ),
      };
    }
    case "interrupted":
      return {
        heading: call.decidedAt ? "Approved" : "Interrupted",
        tone: "stopped",
        text: (
          <>
            {call.decidedAt ? approved : null} {capitalized(interruptedWhy(call))}: the outcome is unknown,
            and it will not run again.
          </>
        ),
      };
    case "denied":
      return {
        heading: "Denied",
        tone: "stopped",
        text: (
          <>
            <Who name={call.decidedBy} /> denied it <When at={call.decidedAt} />. It did not run.
          </>
        ),
      };
    case "refused":
      return {
        heading: "Refused",
        tone: "stopped",
        text: call.decidedBy ? (
          <>
            <Who name={call.decidedBy} /> approved it <When at={call.decidedAt} />, but the approval no longer
            applied{call.error ? `: ${call.error.message}` : ""}. It did not run.
          </>
        ) : source?.kind === "denied" ? (
          // The message names the rule and its reason (and says so when it failed closed).
          <>It was {call.error?.message ?? <DecisionSourceText source={source} />}. It did not run.</>
        ) : (
          <>Gatehouse refused it{call.error ? `: ${call.error.message}` : ""}. It did not run.</>
        ),
      };
    case "expired":
      return {
        heading: "Expired",
        tone: "stopped",
        text: (
          <>
            Nobody decided before its deadline; it expired <When at={call.finishedAt ?? call.expiresAt} />. It
            did not run.
          </>
        ),
      };
    case "withdrawn":
      return {
        heading: "Withdrawn",
        tone: "stopped",
        text: (
          <>
            The requester withdrew it <When at={call.finishedAt} />. It did not run.
          </>
        ),
      };
  }
}

function Outcome({ call, timeUp }: { call: CallView; timeUp: boolean }) {
  const { heading, tone, text } = outcomeOf(call, timeUp);
  return (
    <section
      aria-labelledby="call-outcome"
      data-testid="call-outcome"
      className={
        tone === "done"
          ? "rounded-lg border border-emerald-200 bg-emerald-50 px-4 py-3"
          : "rounded-lg border border-zinc-300 bg-zinc-100 px-4 py-3"
      }
    >
      <div className="flex flex-wrap items-center gap-2">
        <h2 id="call-outcome" className="text-base font-semibold text-zinc-900">
          {heading}
        </h2>
        <CallStatusBadge status={call.status} />
      </div>
      <p className="mt-1 break-words text-sm text-zinc-800">{text}</p>
      {call.reason && call.status !== "refused" ? (
        <p className="mt-1 whitespace-pre-wrap break-words text-sm text-zinc-800">
          <span className="font-medium">Reason:</span> {call.reason}
        </p>
      ) : null}
    </section>
  );
}
