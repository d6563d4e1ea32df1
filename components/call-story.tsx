"use client";

import { useQuery } from "@tanstack/react-query";
import Link from "next/link";
import type { ReactNode } from "react";
import { Age } from "@/components/age";
import { ApprovalReason } from "@/components/approval-reason";
import { AuditTrail } from "@/components/audit-trail";
import { CallStatusBadge } from "@/components/call-status-badge";
import { callErrorText, interruptedWhy, runTimeText, serverOf } from "@/components/call-text";
import { DecisionSourceText } from "@/components/decision-source";
import { decisionSourceOf } from "@/components/grant-text";
import { JsonView } from "@/components/json-view";
import { isCallNotFound, NoSuchCall } from "@/components/no-such-call";
import { ErrorAlert, Loading, Section } from "@/components/ui";
import type { CallStoryView, CallView } from "@/lib/api-types";
import { decidersText, namesText } from "@/lib/decision-text";
import { endpoints } from "@/lib/endpoints";
import { capitalized, errorWithCode, formatBytes, formatDateTime } from "@/lib/format";
import { queryKeys } from "@/lib/query-keys";
import { afterLiveStreamOpened } from "@/lib/use-live-events";

/** How the stored form of a result over the cap looks (`capResult` in server/calls/call-row.ts). */
interface TruncatedResult {
  truncated: true;
  bytes: number;
  preview: string;
}

function isTruncated(call: CallView): call is CallView & { result: TruncatedResult } {
  const r = call.result as Partial<TruncatedResult> | null;
  return call.resultTruncated && typeof r === "object" && r !== null && typeof r.preview === "string";
}

/** One call from request to outcome: facts, arguments, result (capped, marked) and the audit trail. */
export function CallStory({ id }: { id: string }) {
  const query = useQuery({
    queryKey: queryKeys.calls.story(id),
    // Once the live stream is open: its first opening would otherwise fetch the call again.
    queryFn: ({ signal }) => afterLiveStreamOpened(signal).then(() => endpoints.calls.story(id, { signal })),
  });

  return (
    <div>
      <Link href="/activity" className="text-sm font-medium text-indigo-700 hover:underline">
        ← Activity
      </Link>
      {query.isPending ? (
        <Loading label="Loading the call…" />
      ) : isCallNotFound(query.error) ? (
        <div className="mt-4">
          <NoSuchCall id={id} back={{ href: "/activity", label: "See every call in Activity" }} />
        </div>
      ) : query.isError ? (
        <ErrorAlert className="mt-4">Could not load this call: {errorWithCode(query.error)}</ErrorAlert>
      ) : (
        <Story story={query.data} />
      )}
    </div>
  );
}

function Story({ story: { call, audit, grant } }: { story: CallStoryView }) {
  const source = decisionSourceOf(call);
  const grantBy = grant?.createdBy ?? null;
  const approvedBy = decidersText(call);
  const server = serverOf(call);
  const runTime = runTimeText(call);
  const failure = callErrorText(call);
  return (
    <div className="mt-3 space-y-8">
      <div>
        <div className="flex flex-wrap items-center gap-3">
          <h1 className="break-all font-mono text-xl font-semibold text-zinc-900">{call.tool}</h1>
          <CallStatusBadge status={call.status} />
        </div>
        <p className="mt-1 break-all text-sm text-zinc-500">
          Call <span className="font-mono">{call.id}</span>
        </p>
      </div>

      <dl className="grid gap-x-6 gap-y-3 rounded-lg border border-zinc-200 bg-white p-4 text-sm shadow-xs sm:grid-cols-[10rem_1fr]">
        <Fact term="Server">
          {server ? (
            <span className="font-mono">{server}</span>
          ) : (
            <span className="text-zinc-500">None: no server offers a tool of this name</span>
          )}
        </Fact>
        <Fact term="Requested by">
          {call.requester.kind} <span className="font-medium">{call.requester.name}</span>
        </Fact>
        <Fact term="Requested">
          {formatDateTime(call.createdAt)} (<Age at={call.createdAt} />)
        </Fact>
        {call.approvalReason ? (
          // A call a grant covered did not wait: its reason is what it would have waited for.
          <Fact term={source?.kind === "grant" ? "Without the grant" : "Approval"}>
            <ApprovalReason reason={call.approvalReason} byRule={call.rule !== null} />
          </Fact>
        ) : null}
        {source ? (
          <Fact term={source.kind === "grant" ? "Grant" : "Rule"}>
            <DecisionSourceText source={source} grantBy={grantBy} capitalized />
          </Fact>
        ) : null}
        {call.approvalsNeeded >= 2 ? (
          <Fact term="Approvals">
            {Math.min(call.approvedBy.length, call.approvalsNeeded)} of {call.approvalsNeeded}
            {call.approvedBy.length > 0 ? (
              <>
                : <span className="font-medium">{namesText(call.approvedBy)}</span>
              </>
            ) : null}
          </Fact>
        ) : null}
        {call.decidedAt ? (
          // A refused call with a decider was approved: Gatehouse refused to run it, not the reviewer.
          <Fact term={call.status === "denied" ? "Denied" : "Approved"}>
            {formatDateTime(call.decidedAt)} by <span className="font-medium">{approvedBy ?? "—"}</span>
            {call.status === "refused" ? "; refused by Gatehouse: the approval no longer applied" : null}
          </Fact>
        ) : call.status === "pending" && call.expiresAt ? (
          <Fact term="Expires">{formatDateTime(call.expiresAt)}</Fact>
        ) : null}
        {call.reason ? (
          <Fact term="Reason">
            <span className="whitespace-pre-wrap break-words">{call.reason}</span>
          </Fact>
        ) : null}
        {runTime ? (
          <Fact term="Run time">
            <span data-testid="run-time">{runTime}</span>
          </Fact>
        ) : null}
        {failure ? (
          <Fact term="Error">
            <span className="break-words text-rose-700" data-testid="call-error">
              {failure.message} <span className="font-mono text-xs">({failure.code})</span>
            </span>
          </Fact>
        ) : null}
      </dl>

      <Section title="Arguments" description="Exactly as requested; long values are folded, never cut.">
        <JsonView value={call.arguments} />
      </Section>

      <Section title="Result">
        <Result call={call} />
      </Section>

      <Section title="Audit trail" description="Every step of this call, oldest first.">
        <AuditTrail events={audit} approvalsNeeded={call.approvalsNeeded} />
      </Section>
    </div>
  );
}

function Fact({ term, children }: { term: string; children: ReactNode }) {
  return (
    <>
      <dt className="font-medium text-zinc-500">{term}</dt>
      <dd className="min-w-0 text-zinc-800">{children}</dd>
    </>
  );
}

function Result({ call }: { call: CallView }) {
  if (isTruncated(call)) {
    return (
      <div className="space-y-2">
        <p
          role="note"
          className="rounded-md bg-amber-50 px-3 py-2 text-sm text-amber-900 ring-1 ring-amber-200"
        >
          Truncated: the result was {formatBytes(call.result.bytes)}; the store keeps its first{" "}
          {formatBytes(new TextEncoder().encode(call.result.preview).length)} as text, shown below. Callers
          that were waiting for it received it whole.
        </p>
        <pre className="max-h-[32rem] overflow-auto whitespace-pre-wrap break-all rounded-md bg-zinc-950 px-3 py-2 font-mono text-xs leading-5 text-zinc-100">
          {call.result.preview}
          <span className="text-amber-300">{" …[truncated]"}</span>
        </pre>
      </div>
    );
  }
  if (call.result === null || call.result === undefined) {
    const why =
      call.status === "pending"
        ? "The call is waiting for a decision."
        : call.status === "running"
          ? "The tool is running."
          : call.status === "interrupted"
            ? `${capitalized(interruptedWhy(call))}; the outcome is unknown and the call will not be run again.`
            : "The tool did not run, or returned nothing.";
    return <p className="text-sm text-zinc-500">{why}</p>;
  }
  return <JsonView value={call.result} />;
}
