"use client";

import { useMutation } from "@tanstack/react-query";
import { type FormEvent, useId, useState } from "react";
import { Age } from "@/components/age";
import { Badge, Button, ErrorAlert, inputClass } from "@/components/ui";
import { api, seg } from "@/lib/api-client";
import { type CallView, DenyBody } from "@/lib/api-types";
import { errorWithCode, formatDateTime, prettyJson } from "@/lib/format";

/** A failed approve or deny, as the approvals page shows it. */
export interface DecisionError {
  tool: string;
  action: "approve" | "deny";
  message: string;
}

export function PendingCallCard({
  call,
  error,
  onDecided,
  onError,
  onClearError,
}: {
  call: CallView;
  error: DecisionError | null;
  onDecided: (call: CallView) => void;
  onError: (call: CallView, error: DecisionError) => void;
  onClearError: (id: string) => void;
}) {
  const id = useId();
  const [denying, setDenying] = useState(false);
  const [reasonError, setReasonError] = useState<string | null>(null);

  const approve = useMutation({
    mutationFn: () => api<{ call: CallView }>(`/api/calls/${seg(call.id)}/approve`, { method: "POST" }),
    onMutate: () => onClearError(call.id),
    onSuccess: () => onDecided(call),
    onError: (err) => onError(call, { tool: call.tool, action: "approve", message: errorWithCode(err) }),
  });
  const deny = useMutation({
    mutationFn: (reason: string) =>
      api<{ call: CallView }>(`/api/calls/${seg(call.id)}/deny`, { method: "POST", json: { reason } }),
    onMutate: () => onClearError(call.id),
    onSuccess: () => onDecided(call),
    onError: (err) => onError(call, { tool: call.tool, action: "deny", message: errorWithCode(err) }),
  });
  const busy = approve.isPending || deny.isPending;

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
            {call.expiresAt ? <> · expires {formatDateTime(call.expiresAt)}</> : null}
          </p>
        </div>
        {call.destructive ? <Badge tone="red">destructive</Badge> : <Badge tone="grey">read-only</Badge>}
      </div>

      <div className="mt-3">
        <p className="mb-1 text-xs font-semibold uppercase tracking-wide text-zinc-500">Arguments</p>
        <pre className="max-h-96 overflow-auto whitespace-pre-wrap break-all rounded-md bg-zinc-950 px-3 py-2 font-mono text-xs text-zinc-100">
          {prettyJson(call.arguments)}
        </pre>
      </div>

      {error ? <ErrorAlert className="mt-3">{error.message}</ErrorAlert> : null}

      {denying ? (
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
            className={inputClass}
            aria-invalid={reasonError ? true : undefined}
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
