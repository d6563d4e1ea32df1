"use client";

import Link from "next/link";
import { type FormEvent, useCallback, useId, useMemo, useRef, useState } from "react";
import { CallStatusBadge } from "@/components/call-status-badge";
import { interruptedWhy } from "@/components/call-text";
import { ExpiryCountdown } from "@/components/expiry-countdown";
import { JsonView } from "@/components/json-view";
import { SchemaForm } from "@/components/schema-form";
import { Button, ErrorAlert, inputClass } from "@/components/ui";
import { useViewer } from "@/components/viewer-context";
import type { CallView, CatalogueToolView } from "@/lib/api-types";
import { errorWithCode, formatDuration, plural, prettyJson } from "@/lib/format";
import {
  type Field,
  type FieldProblem,
  type FormValue,
  formArguments,
  formModel,
  initialValues,
  replaceAt,
  valuesFromArguments,
} from "@/lib/schema-form";
import { parseArguments } from "@/lib/try-arguments";
import { useTryTool } from "@/lib/use-try-tool";
import { ADD_REVIEWER_HREF, type Viewer, waitsForAnotherReviewer } from "@/lib/viewer";

/**
 * "Try" on the tools page: an owner calls an enabled tool from the browser, filling a form made
 * from its input schema (components/schema-form.tsx), or writing the arguments as raw JSON. It
 * goes through the same `POST /api/calls` as an agent, so a destructive tool's call waits on the
 * approvals page, and the owner who tried it cannot approve it themselves (separation of duties)
 * unless `approvals.selfApproval` allows it. Renders nothing for a tool that cannot be called.
 */
export function TryTool({ tool }: { tool: CatalogueToolView }) {
  if (tool.status !== "enabled" || tool.availability !== "ok") return null;
  // A new definition is a new form: values kept by position would no longer match its fields.
  return <TryToolDialog key={tool.definitionHash} tool={tool} />;
}

/** Problems listed under the form at most; the rest are counted. */
const PROBLEMS_SHOWN = 3;

function TryToolDialog({ tool }: { tool: CatalogueToolView }) {
  const id = useId();
  const dialog = useRef<HTMLDialogElement>(null);
  const model = useMemo(() => formModel(tool.inputSchema), [tool.inputSchema]);
  const fields = model.ok ? model.fields : NO_FIELDS;
  const [values, setValues] = useState<FormValue[]>(() => initialValues(fields));
  // A schema the form cannot take starts (and stays) in raw JSON.
  const [raw, setRaw] = useState(!model.ok);
  const [text, setText] = useState("{}");
  const [parseError, setParseError] = useState<string | null>(null);
  const [switchError, setSwitchError] = useState<string | null>(null);
  const tryTool = useTryTool(tool.localName);

  const onChangeAt = useCallback(
    (index: number, value: FormValue) => setValues((old) => replaceAt(old, index, value)),
    [],
  );
  const form = useMemo(() => formArguments(fields, values), [fields, values]);
  const blocked = !raw && form.problems.length > 0;

  function toggleRaw() {
    if (!raw) {
      setText(prettyJson(form.value));
      setParseError(null);
      setSwitchError(null);
      setRaw(true);
      return;
    }
    const parsed = parseArguments(text);
    const read = parsed.ok ? valuesFromArguments(fields, parsed.value) : parsed;
    if (!read.ok) {
      setSwitchError(`Cannot switch back to the form: ${read.message}`);
      return;
    }
    setValues(read.values);
    setSwitchError(null);
    setRaw(false);
  }

  function onSubmit(event: FormEvent<HTMLFormElement>) {
    event.preventDefault();
    if (!raw) {
      if (form.problems.length === 0) tryTool.send(form.value);
      return;
    }
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
        className="m-auto max-h-[calc(100dvh-2rem)] w-[min(42rem,calc(100vw-2rem))] overflow-hidden rounded-lg bg-white p-0 text-left shadow-xl backdrop:bg-zinc-900/40"
      >
        <form onSubmit={onSubmit} className="flex max-h-[calc(100dvh-2rem)] flex-col" noValidate>
          <div className="shrink-0 space-y-3 border-b border-zinc-200 px-5 pt-5 pb-3">
            <div className="flex items-start justify-between gap-3">
              <div className="min-w-0">
                <h2 id={`${id}-title`} className="break-all text-base font-semibold text-zinc-900">
                  Try <span className="font-mono">{tool.localName}</span>
                </h2>
                {tool.description ? (
                  <p className="mt-1 line-clamp-4 whitespace-pre-line break-words text-sm text-zinc-600">
                    {tool.description}
                  </p>
                ) : null}
              </div>
              <Button
                aria-pressed={raw}
                onClick={toggleRaw}
                disabled={!model.ok}
                className="shrink-0 aria-pressed:bg-indigo-50 aria-pressed:text-indigo-800 aria-pressed:ring-indigo-300"
                title={model.ok ? undefined : "This tool's schema cannot be shown as a form"}
              >
                Raw JSON
              </Button>
            </div>
            {tool.destructive ? (
              <p
                role="note"
                className="rounded-md bg-amber-50 px-3 py-2 text-sm text-amber-900 ring-1 ring-amber-200"
              >
                This tool needs approval: your call waits on the Approvals page for another reviewer. You
                cannot approve your own call unless self-approval is allowed.
              </p>
            ) : null}
          </div>
          <div className="min-h-0 flex-1 overflow-y-auto px-5 py-4">
            {raw ? (
              <div className="space-y-2">
                {!model.ok ? (
                  <p className="text-sm text-zinc-600">
                    The form cannot show this tool&apos;s arguments: {model.reason}. Write them as JSON.
                  </p>
                ) : null}
                <label htmlFor={`${id}-args`} className="block text-sm font-medium text-zinc-700">
                  Arguments (JSON)
                </label>
                <textarea
                  id={`${id}-args`}
                  value={text}
                  onChange={(event) => setText(event.target.value)}
                  rows={10}
                  spellCheck={false}
                  className={`${inputClass} font-mono text-xs`}
                  aria-invalid={parseError ? true : undefined}
                />
                {switchError ? <ErrorAlert>{switchError}</ErrorAlert> : null}
              </div>
            ) : fields.length === 0 ? (
              <p className="text-sm text-zinc-600">This tool takes no arguments: it is called with {"{}"}.</p>
            ) : (
              <SchemaForm fields={fields} values={values} onChangeAt={onChangeAt} problems={form.problems} />
            )}
          </div>
          <div className="shrink-0 space-y-3 border-t border-zinc-200 px-5 pt-3 pb-5">
            {blocked ? <ProblemList id={`${id}-problems`} problems={form.problems} /> : null}
            {parseError ? <ErrorAlert>{parseError}</ErrorAlert> : null}
            {tryTool.error ? <ErrorAlert>Refused: {errorWithCode(tryTool.error)}</ErrorAlert> : null}
            <div aria-live="polite" className="max-h-[35dvh] overflow-y-auto">
              {tryTool.call ? <TryOutcome call={tryTool.call} /> : null}
            </div>
            <div className="flex flex-wrap justify-end gap-2">
              <Button onClick={() => dialog.current?.close()}>Close</Button>
              <Button
                type="submit"
                variant="primary"
                disabled={tryTool.sending || blocked}
                aria-describedby={blocked ? `${id}-problems` : undefined}
              >
                {tryTool.sending ? "Calling…" : "Call tool"}
              </Button>
            </div>
          </div>
        </form>
      </dialog>
    </>
  );
}

const NO_FIELDS: Field[] = [];

/** What stops the call, in field order: the first few, and how many more. */
function ProblemList({ id, problems }: { id: string; problems: readonly FieldProblem[] }) {
  const more = problems.length - PROBLEMS_SHOWN;
  return (
    <div id={id} data-testid="try-problems" className="text-sm text-zinc-700">
      <ul className="space-y-0.5">
        {problems.slice(0, PROBLEMS_SHOWN).map((p) => (
          <li key={p.key} title={p.message} className="line-clamp-2 wrap-anywhere">
            {p.message}.
          </li>
        ))}
      </ul>
      {more > 0 ? <p className="text-zinc-500">And {more} more.</p> : null}
    </div>
  );
}

function TryOutcome({ call }: { call: CallView }) {
  const viewer = useViewer();
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
      {call.status === "pending" ? <PendingTryHint call={call} viewer={viewer} /> : null}
      {call.result !== null && call.result !== undefined ? <JsonView value={call.result} /> : null}
    </div>
  );
}

/**
 * Where a Try that waits goes next: to Approvals, and first, when nobody may approve it yet (the
 * requester cannot), to adding a reviewer, so a lone owner does not wait in the dialog for a
 * decision nobody can make.
 */
function PendingTryHint({ call, viewer }: { call: CallView; viewer: Viewer | null }) {
  const approvals = (
    <Link href="/approvals" className="font-medium text-indigo-700 hover:underline">
      Approvals
    </Link>
  );
  if (!viewer || !waitsForAnotherReviewer(call, viewer)) {
    return <p data-testid="try-pending-hint">It waits on {approvals}.</p>;
  }
  return (
    <p data-testid="try-pending-hint" className="text-amber-900">
      {viewer.otherReviewers === 0
        ? "Nobody else may approve it yet, and you cannot approve a call you requested."
        : `Only ${plural(viewer.otherReviewers, "other person")} may approve calls, fewer than it needs.`}{" "}
      {viewer.owner ? (
        <Link href={ADD_REVIEWER_HREF} className="font-medium text-indigo-700 hover:underline">
          Add a reviewer
        </Link>
      ) : (
        "Ask an owner to add a reviewer"
      )}
      ; they approve it on {approvals}.
    </p>
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
      return `Interrupted: ${interruptedWhy(call)}, so the outcome is unknown.`;
    case "withdrawn":
      return "Withdrawn.";
  }
}
