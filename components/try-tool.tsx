"use client";

import Link from "next/link";
import { type FormEvent, useId, useRef, useState } from "react";
import { CallStatusBadge } from "@/components/call-status-badge";
import { ExpiryCountdown } from "@/components/expiry-countdown";
import { JsonView } from "@/components/json-view";
import { Button, ErrorAlert, inputClass } from "@/components/ui";
import type { CallView, CatalogueToolView } from "@/lib/api-types";
import { errorWithCode, formatDuration, prettyJson } from "@/lib/format";
import { argumentsSkeleton, parseArguments } from "@/lib/try-arguments";
import { useTryTool } from "@/lib/use-try-tool";

/**
 * "Try" on the tools page: an owner calls an enabled tool from the browser with JSON arguments.
 * It goes through the same `POST /api/calls` as an agent, so a destructive tool's call waits on
 * the approvals page, and the owner who tried it cannot approve it themselves (separation of
 * duties) unless `approvals.selfApproval` allows it. Renders nothing for a tool that cannot be called.
 */
export function TryTool({ tool }: { tool: CatalogueToolView }) {
  if (tool.status !== "enabled" || tool.availability !== "ok") return null;
  return <TryToolDialog tool={tool} />;
}

function TryToolDialog({ tool }: { tool: CatalogueToolView }) {
  const id = useId();
  const dialog = useRef<HTMLDialogElement>(null);
  const [text, setText] = useState(() => prettyJson(argumentsSkeleton(tool.inputSchema)));
  const [parseError, setParseError] = useState<string | null>(null);
  const tryTool = useTryTool(tool.localName);

  function onSubmit(event: FormEvent<HTMLFormElement>) {
    event.preventDefault();
    const parsed = parseArguments(text);
    if (!parsed.ok) {
      setParseError(parsed.message);
      return;
    }
    setParseError(null);
    tryTool.send(parsed.value);
  }

  return (
    <>
      <Button
        onClick={() => {
          tryTool.reset();
          dialog.current?.showModal();
        }}
        aria-label={`Try ${tool.localName}`}
      >
        Try
      </Button>
      <dialog
        ref={dialog}
        aria-labelledby={`${id}-title`}
        className="m-auto w-[min(40rem,calc(100vw-2rem))] rounded-lg bg-white p-0 text-left shadow-xl backdrop:bg-zinc-900/40"
      >
        <form onSubmit={onSubmit} className="space-y-4 p-5" noValidate>
          <div>
            <h2 id={`${id}-title`} className="break-all text-base font-semibold text-zinc-900">
              Try <span className="font-mono">{tool.localName}</span>
            </h2>
            {tool.description ? (
              <p className="mt-1 line-clamp-4 whitespace-pre-line break-words text-sm text-zinc-600">
                {tool.description}
              </p>
            ) : null}
          </div>
          {tool.destructive ? (
            <p
              role="note"
              className="rounded-md bg-amber-50 px-3 py-2 text-sm text-amber-900 ring-1 ring-amber-200"
            >
              This tool needs approval: your call waits on the Approvals page for another reviewer. You cannot
              approve your own call unless self-approval is allowed.
            </p>
          ) : null}
          <div className="space-y-1">
            <label htmlFor={`${id}-args`} className="block text-sm font-medium text-zinc-700">
              Arguments (JSON)
            </label>
            <textarea
              id={`${id}-args`}
              value={text}
              onChange={(event) => setText(event.target.value)}
              rows={8}
              spellCheck={false}
              className={`${inputClass} font-mono text-xs`}
              aria-invalid={parseError ? true : undefined}
            />
          </div>
          {parseError ? <ErrorAlert>{parseError}</ErrorAlert> : null}
          {tryTool.error ? <ErrorAlert>Refused: {errorWithCode(tryTool.error)}</ErrorAlert> : null}
          <div aria-live="polite">{tryTool.call ? <TryOutcome call={tryTool.call} /> : null}</div>
          <div className="flex flex-wrap justify-end gap-2">
            <Button onClick={() => dialog.current?.close()}>Close</Button>
            <Button type="submit" variant="primary" disabled={tryTool.sending}>
              {tryTool.sending ? "Calling…" : "Call tool"}
            </Button>
          </div>
        </form>
      </dialog>
    </>
  );
}

function TryOutcome({ call }: { call: CallView }) {
  return (
    <div data-testid="try-outcome" className="space-y-2 rounded-md border border-zinc-200 p-3 text-sm">
      <div className="flex flex-wrap items-center gap-2">
        <CallStatusBadge status={call.status} />
        <span className="text-zinc-700">{outcomeText(call)}</span>
        {call.status === "pending" && call.expiresAt ? <ExpiryCountdown at={call.expiresAt} /> : null}
        <Link
          href={`/activity/${encodeURIComponent(call.id)}`}
          className="ml-auto font-medium text-indigo-700 hover:underline"
        >
          Story
        </Link>
      </div>
      {call.result !== null && call.result !== undefined ? <JsonView value={call.result} /> : null}
    </div>
  );
}

function outcomeText(call: CallView): string {
  switch (call.status) {
    case "pending":
      return "Waiting for a reviewer's approval.";
    case "running":
      return "Approved; running…";
    case "succeeded":
      return `Done${call.durationMs !== null ? ` in ${formatDuration(call.durationMs)}` : ""}.`;
    case "failed":
      return call.error ? `Failed: ${call.error.message}` : "Failed.";
    case "denied":
      return `Denied by ${call.decidedBy ?? "a reviewer"}${call.reason ? `: ${call.reason}` : "."}`;
    case "expired":
      return "Expired: nobody decided in time.";
    case "refused":
      return call.error ? `Refused: ${call.error.message}` : "Refused.";
    case "interrupted":
      return "Interrupted by a restart: the outcome is unknown.";
    case "withdrawn":
      return "Withdrawn.";
  }
}
