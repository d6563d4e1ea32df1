"use client";

import { useMutation } from "@tanstack/react-query";
import Link from "next/link";
import { type FormEvent, useId, useState } from "react";
import { Age } from "@/components/age";
import { ApprovalReason } from "@/components/approval-reason";
import { DecisionSourceText } from "@/components/decision-source";
import { ExpiryCountdown } from "@/components/expiry-countdown";
import { emptyGrantDraft, GrantChoice, type GrantDraft, grantOf } from "@/components/grant-choice";
import { decisionSourceOf } from "@/components/grant-text";
import { JsonView } from "@/components/json-view";
import { Badge, Button, ErrorAlert, inputClass } from "@/components/ui";
import { type CallView, DenyBody, type GrantRequest } from "@/lib/api-types";
import { namesText } from "@/lib/decision-text";
import { endpoints } from "@/lib/endpoints";
import { errorWithCode, plural } from "@/lib/format";
import { countHidden } from "@/lib/json-view";
import {
  ADD_REVIEWER_HREF,
  APPROVAL_SETTINGS_HREF,
  requestedByViewer,
  type Viewer,
  waitsForAnotherReviewer,
} from "@/lib/viewer";

/** A failed approve or deny, as the approvals page shows it. */
export interface DecisionError {
  tool: string;
  action: "approve" | "deny";
  message: string;
}

/** Longer descriptions start folded to three lines. */
const LONG_DESCRIPTION = 220;

/**
 * One pending call, with what a reviewer needs to decide: the tool and what it says it does, why
 * it needs approval (and the rule that held it), who asked and when, how long is left, and the
 * exact arguments (escaped, long values folded). Approve is one click, optionally "Approve and
 * allow again…" (a grant: the same again for a while; offered only for an agent's call that needs
 * one approval); Deny asks for a reason first, marked required, and confirms only with one. A call that needs several approvals shows "1 of 2 approvals" and
 * who gave them; whoever already approved it gets no Approve button, nor does its requester when
 * it needs several approvals, a rule held it, or self-approval is off (Deny stays): a note says
 * who has to approve instead and, when nobody else may, how to add a reviewer or allow
 * self-approval. With `decidable={false}` it shows the same facts of a call no longer waiting,
 * without countdown or buttons.
 */
export function PendingCallCard({
  call,
  error,
  viewer,
  decidable = true,
  permalink = false,
  onDecided,
  onError,
  onClearError,
}: {
  call: CallView;
  error: DecisionError | null;
  /** The signed-in person: marks a call they requested (e.g. with "Try") or already approved. */
  viewer: Viewer;
  /** The call can still be decided here (default): the countdown and Approve / Deny are shown. */
  decidable?: boolean;
  /** Link to the call's own page, `/approvals/<id>` (for the queue; default false). */
  permalink?: boolean;
  /** Called with the call as the server answered the decision. */
  onDecided: (call: CallView) => void;
  onError: (call: CallView, error: DecisionError) => void;
  onClearError: (id: string) => void;
}) {
  const id = useId();
  const [denying, setDenying] = useState(false);
  const [reasonError, setReasonError] = useState<string | null>(null);
  // Confirm deny stays off until the reason has some text: it is required, said before a round trip.
  const [reasonGiven, setReasonGiven] = useState(false);
  const [descriptionOpen, setDescriptionOpen] = useState(false);
  const [grantDraft, setGrantDraft] = useState<GrantDraft>(emptyGrantDraft);
  const [grantError, setGrantError] = useState<string | null>(null);

  const approve = useMutation({
    mutationFn: (grant: GrantRequest | null) => endpoints.calls.approve(call.id, grant ? { grant } : {}),
    onMutate: () => onClearError(call.id),
    onSuccess: (answer) => {
      setGrantDraft(emptyGrantDraft);
      onDecided(answer.call);
    },
    onError: (err) => onError(call, { tool: call.tool, action: "approve", message: errorWithCode(err) }),
  });
  const deny = useMutation({
    mutationFn: (reason: string) => endpoints.calls.deny(call.id, { reason }),
    onMutate: () => onClearError(call.id),
    onSuccess: (answer) => onDecided(answer.call),
    onError: (err) => onError(call, { tool: call.tool, action: "deny", message: errorWithCode(err) }),
  });
  const busy = approve.isPending || deny.isPending;
  const description = call.toolDescription ?? "";
  const longDescription = description.length > LONG_DESCRIPTION || description.split("\n").length > 3;
  const hidden = countHidden(call.arguments);
  const mine = requestedByViewer(call, viewer);
  const fourEyes = call.approvalsNeeded >= 2;
  const approvedByMe = call.approvedBy.includes(viewer.name);
  // The same rule the API applies: the requester never approves a call that needs several
  // approvals or that a rule held, and a one-reviewer call only when self-approval is on.
  const mayApprove = !approvedByMe && !(mine && (fourEyes || call.rule !== null || !viewer.selfApproval));
  const source = decisionSourceOf(call);

  function onApprove() {
    const chosen = grantOf(grantDraft);
    if ("error" in chosen) {
      setGrantError(chosen.error);
      return;
    }
    setGrantError(null);
    approve.mutate(chosen.grant);
  }

  function onDeny(event: FormEvent<HTMLFormElement>) {
    event.preventDefault();
    const parsed = DenyBody.safeParse({ reason: new FormData(event.currentTarget).get("reason") });
    if (!parsed.success) {
      setReasonError(parsed.error.issues[0]?.message ?? "Give a reason.");
      return;
    }
    setReasonError(null);
    deny.mutate(parsed.data.reason);
  }

  return (
    <article
      data-testid={`call-${call.id}`}
      aria-labelledby={`${id}-title`}
      className="rounded-lg border border-zinc-200 bg-white p-4 shadow-xs"
    >
      <div className="flex flex-wrap items-start justify-between gap-3">
        <div className="min-w-0">
          <h2 id={`${id}-title`} className="break-all font-mono text-base font-semibold text-zinc-900">
            {call.tool}
          </h2>
          <p className="mt-0.5 text-sm text-zinc-500 wrap-anywhere">
            on <span className="font-mono text-zinc-700">{call.server}</span> · requested by{" "}
            <span className="text-zinc-700">
              {call.requester.kind} <span className="font-medium">{call.requester.name}</span>
            </span>{" "}
            · <Age at={call.createdAt} />
            {decidable && call.expiresAt ? (
              <>
                {" "}
                · <ExpiryCountdown at={call.expiresAt} />
              </>
            ) : null}
          </p>
        </div>
        <div className="flex shrink-0 items-center gap-3">
          {permalink ? (
            <Link
              href={`/approvals/${encodeURIComponent(call.id)}`}
              className="text-sm font-medium text-indigo-700 hover:underline"
              aria-label={`Open ${call.tool} call ${call.id} on its own page`}
            >
              Open
            </Link>
          ) : null}
          {call.destructive ? <Badge tone="red">destructive</Badge> : <Badge tone="grey">read-only</Badge>}
        </div>
      </div>

      <div className="mt-3 space-y-2">
        {description ? (
          <div>
            <p className="sr-only">Tool description</p>
            <p
              className={`whitespace-pre-line break-words text-sm text-zinc-700 ${descriptionOpen ? "" : "line-clamp-3"}`}
            >
              {description}
            </p>
            {longDescription ? (
              <button
                type="button"
                onClick={() => setDescriptionOpen((open) => !open)}
                aria-expanded={descriptionOpen}
                className="mt-0.5 text-xs font-medium text-indigo-700 hover:underline"
              >
                {descriptionOpen ? "Show less" : "Show the whole description"}
              </button>
            ) : null}
          </div>
        ) : (
          <p className="text-sm text-zinc-400">The tool has no description.</p>
        )}
        {call.approvalReason ? (
          <ApprovalReason reason={call.approvalReason} byRule={call.rule !== null} />
        ) : null}
        {source && source.kind !== "grant" ? (
          <p className="text-sm text-zinc-700">
            <DecisionSourceText source={source} capitalized />
          </p>
        ) : null}
        {fourEyes ? <ApprovalsProgress call={call} /> : null}
        {decidable && call.toolChanged ? (
          <p
            role="note"
            className="rounded-md bg-amber-50 px-3 py-2 text-sm text-amber-900 ring-1 ring-amber-200"
          >
            The tool's definition changed since this call was requested. Approving will be refused; deny it or
            let it expire.
          </p>
        ) : null}
        {decidable && mine ? <OwnCallNote call={call} viewer={viewer} /> : null}
        {decidable && approvedByMe ? (
          <p role="note" className="rounded-md bg-sky-50 px-3 py-2 text-sm text-sky-900 ring-1 ring-sky-200">
            You approved this call.{" "}
            {call.approvalsNeeded - call.approvedBy.length === 1
              ? "It runs once another reviewer approves it."
              : `It runs once ${call.approvalsNeeded - call.approvedBy.length} more reviewers approve it.`}
          </p>
        ) : null}
      </div>

      <div className="mt-3">
        <p className="mb-1 text-xs font-semibold uppercase tracking-wide text-zinc-500">Arguments</p>
        {hidden > 0 ? (
          <p
            role="note"
            className="mb-2 rounded-md bg-amber-50 px-3 py-2 text-sm text-amber-900 ring-1 ring-amber-200"
          >
            The arguments contain {plural(hidden, "invisible or direction-changing character")}, shown below
            as highlighted <code className="font-mono">\u</code> escapes. Text around them may not read as it
            looks elsewhere.
          </p>
        ) : null}
        <JsonView value={call.arguments} />
      </div>

      {error ? <ErrorAlert className="mt-3">{error.message}</ErrorAlert> : null}

      {!decidable ? null : denying ? (
        <form onSubmit={onDeny} className="mt-4 space-y-2" noValidate>
          <label htmlFor={`${id}-reason`} className="block text-sm font-medium text-zinc-700">
            Reason <span className="font-normal text-zinc-500">(required: the requester reads it)</span>
          </label>
          <textarea
            id={`${id}-reason`}
            name="reason"
            rows={3}
            maxLength={2000}
            required
            // biome-ignore lint/a11y/noAutofocus: the reviewer just clicked Deny to write this reason.
            autoFocus
            className={inputClass}
            aria-invalid={reasonError ? true : undefined}
            onChange={(event) => setReasonGiven(event.currentTarget.value.trim() !== "")}
            onKeyDown={(event) => {
              if (event.key === "Enter" && (event.ctrlKey || event.metaKey))
                event.currentTarget.form?.requestSubmit();
            }}
          />
          {reasonError ? <ErrorAlert>{reasonError}</ErrorAlert> : null}
          <div className="flex flex-wrap gap-2">
            <Button type="submit" variant="danger" disabled={busy || !reasonGiven}>
              Confirm deny
            </Button>
            <Button
              disabled={busy}
              onClick={() => {
                setDenying(false);
                setReasonError(null);
                setReasonGiven(false);
              }}
            >
              Cancel
            </Button>
          </div>
        </form>
      ) : (
        <div className="mt-4 space-y-3">
          {!mayApprove ? null : fourEyes ? (
            <p className="text-xs text-zinc-500">
              No “Approve and allow again…” here: this call needs {call.approvalsNeeded} approvals, and a call
              that needs more than one cannot be granted in advance.
            </p>
          ) : call.requester.kind !== "agent" ? (
            <p className="text-xs text-zinc-500">
              No “Approve and allow again…” here: grants are for agents, and a person asked for this call.
            </p>
          ) : (
            <GrantChoice
              call={call}
              draft={grantDraft}
              disabled={busy}
              onChange={(draft) => {
                setGrantDraft(draft);
                setGrantError(null);
              }}
            />
          )}
          {grantError ? <ErrorAlert>{grantError}</ErrorAlert> : null}
          <div className="flex flex-wrap gap-2">
            {mayApprove ? (
              <Button variant="primary" disabled={busy} onClick={onApprove}>
                {grantDraft.on && !fourEyes ? "Approve and allow" : "Approve"}
              </Button>
            ) : null}
            <Button variant="danger" disabled={busy} onClick={() => setDenying(true)}>
              Deny
            </Button>
          </div>
        </div>
      )}
    </article>
  );
}

/**
 * What a person reads on a call they requested themselves: who has to approve it instead and,
 * when nobody else may yet, what to do about it: add a reviewer (owners get the link; others are
 * told to ask one) or, for a one-reviewer call, switch on `approvals.selfApproval`.
 */
function OwnCallNote({ call, viewer }: { call: CallView; viewer: Viewer }) {
  const who =
    call.approvalsNeeded >= 2
      ? `${call.approvalsNeeded} other reviewers have to approve it.`
      : call.rule !== null
        ? `Rule ${call.rule} held it, so another reviewer has to approve it.`
        : viewer.selfApproval
          ? "Self-approval is on, so you may approve it yourself."
          : call.requester.kind === "agent"
            ? "Another person has to approve it: you cannot approve a call your own agent requested."
            : "Another person has to approve it: you cannot approve a call you requested.";
  const selfApprovalHelps = call.approvalsNeeded < 2 && call.rule === null && !viewer.selfApproval;
  return (
    <div
      role="note"
      data-testid="own-call-note"
      className="space-y-1 rounded-md bg-sky-50 px-3 py-2 text-sm text-sky-900 ring-1 ring-sky-200"
    >
      <p>
        {call.requester.kind === "agent"
          ? `This call came from agent ${call.requester.name}, whose token you created.`
          : "You requested this call."}{" "}
        {who}
      </p>
      {waitsForAnotherReviewer(call, viewer) ? (
        <p>
          {viewer.otherReviewers === 0
            ? "Nobody else may approve calls yet."
            : `Only ${plural(viewer.otherReviewers, "other person")} may approve calls.`}{" "}
          {viewer.owner ? (
            <Link href={ADD_REVIEWER_HREF} className="font-medium text-sky-800 underline hover:text-sky-950">
              Add a reviewer
            </Link>
          ) : (
            "Ask an owner to add a reviewer"
          )}
          {selfApprovalHelps ? (
            <>
              , or let people approve their own calls with{" "}
              <Link
                href={APPROVAL_SETTINGS_HREF}
                className="font-mono font-medium text-sky-800 underline hover:text-sky-950"
              >
                approvals.selfApproval
              </Link>
              .
            </>
          ) : (
            "."
          )}
        </p>
      ) : null}
    </div>
  );
}

/** "1 of 2 approvals · approved by rita", for a call that needs more than one reviewer. */
function ApprovalsProgress({ call }: { call: CallView }) {
  const done = Math.min(call.approvedBy.length, call.approvalsNeeded);
  return (
    <p className="flex flex-wrap items-center gap-2 text-sm text-zinc-700" data-testid="approvals-progress">
      <span className="inline-flex items-center gap-1.5 rounded-full bg-amber-50 px-2 py-0.5 text-xs font-semibold text-amber-900 ring-1 ring-inset ring-amber-300 tabular-nums">
        <span aria-hidden="true" className="flex gap-0.5">
          {Array.from({ length: call.approvalsNeeded }, (_, i) => (
            <span
              // biome-ignore lint/suspicious/noArrayIndexKey: one dot per approval slot, never reordered.
              key={i}
              className={`size-2 rounded-full ${i < done ? "bg-amber-600" : "bg-white ring-1 ring-amber-400"}`}
            />
          ))}
        </span>
        {done} of {call.approvalsNeeded} approvals
      </span>{" "}
      <span aria-hidden="true" className="text-zinc-400">
        ·
      </span>{" "}
      {call.approvedBy.length > 0 ? (
        <span>
          approved by{" "}
          <span className="font-medium text-zinc-900 wrap-anywhere">{namesText(call.approvedBy)}</span>
        </span>
      ) : (
        <span className="text-zinc-500">no approval yet</span>
      )}
    </p>
  );
}
