"use client";

import { useMutation } from "@tanstack/react-query";
import Link from "next/link";
import { type FormEvent, useId, useState } from "react";
import { Age } from "@/components/age";
import { ApprovalReason } from "@/components/approval-reason";
import { ExpiryCountdown } from "@/components/expiry-countdown";
import { JsonView } from "@/components/json-view";
import { Badge, Button, ErrorAlert, inputClass } from "@/components/ui";
import { type CallView, DenyBody } from "@/lib/api-types";
import { endpoints } from "@/lib/endpoints";
import { errorWithCode, plural } from "@/lib/format";
import { countHidden } from "@/lib/json-view";

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
 * it needs approval, who asked and when, how long is left, and the exact arguments (escaped,
 * long values folded). Approve is one click; Deny asks for a reason first. With
 * `decidable={false}` it shows the same facts of a call no longer waiting, without countdown or
 * buttons.
 */
export function PendingCallCard({
  call,
  error,
  mine,
  decidable = true,
  permalink = false,
  onDecided,
  onError,
  onClearError,
}: {
  call: CallView;
  error: DecisionError | null;
  /** The signed-in person requested this call (e.g. with "Try"). */
  mine: boolean;
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
  const [descriptionOpen, setDescriptionOpen] = useState(false);

  const approve = useMutation({
    mutationFn: () => endpoints.calls.approve(call.id),
    onMutate: () => onClearError(call.id),
    onSuccess: (answer) => onDecided(answer.call),
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

  function onDeny(event: FormEvent<HTMLFormElement>) {
    event.preventDefault();
    const parsed = DenyBody.safeParse({ reason: new FormData(event.currentTarget).get("reason") });
    if (!parsed.success) {
      setReasonError(parsed.error.issues[0]?.message ?? "give a reason");
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
          <p className="mt-0.5 text-sm text-zinc-500">
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
        {call.approvalReason ? <ApprovalReason reason={call.approvalReason} /> : null}
        {decidable && call.toolChanged ? (
          <p
            role="note"
            className="rounded-md bg-amber-50 px-3 py-2 text-sm text-amber-900 ring-1 ring-amber-200"
          >
            The tool's definition changed since this call was requested. Approving will be refused; deny it or
            let it expire.
          </p>
        ) : null}
        {decidable && mine ? (
          <p role="note" className="rounded-md bg-sky-50 px-3 py-2 text-sm text-sky-900 ring-1 ring-sky-200">
            You requested this call. Another reviewer has to approve it, unless self-approval is allowed.
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
            Reason
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
            onKeyDown={(event) => {
              if (event.key === "Enter" && (event.ctrlKey || event.metaKey))
                event.currentTarget.form?.requestSubmit();
            }}
          />
          {reasonError ? <ErrorAlert>{reasonError}</ErrorAlert> : null}
          <div className="flex flex-wrap gap-2">
            <Button type="submit" variant="danger" disabled={busy}>
              Confirm deny
            </Button>
            <Button
              disabled={busy}
              onClick={() => {
                setDenying(false);
                setReasonError(null);
              }}
            >
              Cancel
            </Button>
          </div>
        </form>
      ) : (
        <div className="mt-4 flex flex-wrap gap-2">
          <Button variant="primary" disabled={busy} onClick={() => approve.mutate()}>
            Approve
          </Button>
          <Button variant="danger" disabled={busy} onClick={() => setDenying(true)}>
            Deny
          </Button>
        </div>
      )}
    </article>
  );
}
