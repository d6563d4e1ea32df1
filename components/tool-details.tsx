import { useQuery } from "@tanstack/react-query";
import { useId, useMemo, useState } from "react";
import { describeAction, describeChange } from "@/components/change-text";
import { DefinitionDiffView, JsonBlock, ToolIcons } from "@/components/definition-diff";
import { Button, ErrorAlert, Loading } from "@/components/ui";
import { type ToolUpdate, useUpdateTool } from "@/components/use-update-tool";
import { VisibleText } from "@/components/visible-text";
import type { CatalogueToolView } from "@/lib/api-types";
import { endpoints } from "@/lib/endpoints";
import { errorWithCode, formatDateTime } from "@/lib/format";
import { queryKeys } from "@/lib/query-keys";

/**
 * What the table's details row shows of one tool: the change to review (when its server changed
 * it), approval (vouch, "always confirm"), its history and its definition as listed.
 */
export function ToolDetails({ tool }: { tool: CatalogueToolView }) {
  const update = useUpdateTool(tool.localName);
  const confirmId = useId();
  const [confirmChoice, setConfirmChoice] = useState<boolean | null>(null);
  const title = `Details of ${tool.localName}`;
  return (
    <section aria-label={title} className="space-y-5">
      {tool.change ? (
        <section
          aria-label="Review change"
          className="space-y-3 rounded-lg border border-amber-300 bg-white p-4 shadow-xs"
        >
          <div className="flex flex-wrap items-start justify-between gap-3">
            <div className="min-w-0">
              <h3 className="font-semibold text-zinc-900">Review change</h3>
              <p className="mt-0.5 text-sm text-zinc-600">
                The server changed this tool after it was enabled. Calls are refused until you accept the new
                definition (it is then pinned instead) or disable the tool.
              </p>
            </div>
            <div className="flex gap-2">
              <Button
                variant="primary"
                disabled={update.isPending}
                // The definition this page shows is the one that gets pinned, or nothing is.
                onClick={() => update.mutate({ status: "enabled", expectedHash: tool.definitionHash })}
              >
                Accept change
              </Button>
              <Button
                variant="danger"
                disabled={update.isPending}
                onClick={() => update.mutate({ status: "disabled" })}
              >
                Disable
              </Button>
            </div>
          </div>
          <DefinitionDiffView change={tool.change} />
        </section>
      ) : null}

      <div className="grid gap-5 lg:grid-cols-2">
        <section aria-label="Approval" className="space-y-3">
          <h3 className="font-semibold text-zinc-900">Approval</h3>
          <p className="text-sm text-zinc-700">
            {tool.destructive
              ? `Calls wait for a reviewer: ${tool.approvalReason ?? "destructive"}.`
              : tool.readOnlyBy === "vouch"
                ? "Calls run at once: an owner vouched this tool read-only."
                : "Calls run at once: its server says readOnlyHint: true."}
          </p>
          <VouchControl tool={tool} update={update} />
          <div className="flex items-start gap-2">
            <input
              id={confirmId}
              type="checkbox"
              // The choice shows at once (set in the event itself); the answer or an error settles it.
              checked={confirmChoice ?? tool.alwaysConfirm}
              disabled={update.isPending}
              onChange={(e) => {
                const on = e.target.checked;
                setConfirmChoice(on);
                update.mutate({ alwaysConfirm: on }, { onSettled: () => setConfirmChoice(null) });
              }}
              className="mt-0.5 size-4 rounded border-zinc-300 accent-indigo-600"
              aria-describedby={`${confirmId}-hint`}
            />
            <div>
              <label htmlFor={confirmId} className="text-sm font-medium text-zinc-800">
                Always confirm
              </label>
              <p id={`${confirmId}-hint`} className="text-xs text-zinc-500">
                Every call waits for a reviewer, even when the tool is read-only.
              </p>
            </div>
          </div>
          {update.isError ? <ErrorAlert className="text-xs">{errorWithCode(update.error)}</ErrorAlert> : null}
        </section>
        <ToolHistory localName={tool.localName} />
      </div>

      <details className="text-sm">
        <summary className="cursor-pointer font-medium text-zinc-700">
          Definition as listed by {tool.server}
        </summary>
        <div className="mt-2 grid gap-3 lg:grid-cols-2">
          <div className="space-y-1">
            {tool.title ? (
              <>
                <p className="text-xs font-semibold uppercase tracking-wide text-zinc-500">Title</p>
                <p className="break-words text-zinc-800">
                  <VisibleText text={tool.title} />
                </p>
              </>
            ) : null}
            <p className="text-xs font-semibold uppercase tracking-wide text-zinc-500">Description</p>
            <p className="max-h-72 overflow-auto whitespace-pre-wrap break-words rounded-md border border-zinc-200 bg-white p-2 text-zinc-800">
              <VisibleText text={tool.description || "(none)"} />
            </p>
            <p className="text-xs font-semibold uppercase tracking-wide text-zinc-500">Annotations</p>
            <JsonBlock value={tool.annotations} />
            {tool.icons.length > 0 ? (
              <>
                <p className="text-xs font-semibold uppercase tracking-wide text-zinc-500">Icons</p>
                <ToolIcons icons={tool.icons} />
              </>
            ) : null}
          </div>
          <div className="space-y-1">
            <p className="text-xs font-semibold uppercase tracking-wide text-zinc-500">Input schema</p>
            <JsonBlock value={tool.inputSchema} />
            {tool.outputSchema !== null ? (
              <>
                <p className="text-xs font-semibold uppercase tracking-wide text-zinc-500">Output schema</p>
                <JsonBlock value={tool.outputSchema} />
              </>
            ) : null}
          </div>
        </div>
      </details>
    </section>
  );
}

function VouchControl({ tool, update }: { tool: CatalogueToolView; update: ToolUpdate }) {
  if (tool.readOnlyBy === "annotation") return null;
  if (tool.vouch) {
    return (
      <div className="flex flex-wrap items-center gap-3 rounded-md border border-emerald-200 bg-emerald-50 px-3 py-2 text-sm text-emerald-900">
        <span>
          Vouched read-only by <span className="font-medium">{tool.vouch.by}</span> on{" "}
          <time dateTime={tool.vouch.at}>{formatDateTime(tool.vouch.at)}</time>. Dropped automatically if the
          definition changes.
        </span>
        <Button disabled={update.isPending} onClick={() => update.mutate({ vouch: false })}>
          Withdraw vouch
        </Button>
      </div>
    );
  }
  if (tool.vouchProblem) {
    return <p className="text-sm text-zinc-600">Cannot be vouched read-only: {tool.vouchProblem}.</p>;
  }
  return (
    <div className="space-y-1">
      <Button
        disabled={update.isPending}
        onClick={() => update.mutate({ vouch: true, expectedHash: tool.definitionHash })}
      >
        Vouch read-only
      </Button>
      <p className="text-xs text-zinc-500">
        Its server says nothing either way. Vouch only if you know it changes nothing: calls then run without
        approval, until its definition changes. The vouch is recorded in the audit log with your name.
      </p>
    </div>
  );
}

function ToolHistory({ localName }: { localName: string }) {
  const query = useQuery({
    queryKey: queryKeys.catalogue.history(localName),
    queryFn: ({ signal }) => endpoints.catalogue.history(localName, { signal }),
  });
  const entries = useMemo(() => {
    if (!query.data) return [];
    return [
      ...query.data.changes.map((c) => ({
        key: `c${c.id}`,
        at: c.at,
        who: c.server,
        text: describeChange(c),
      })),
      ...query.data.actions.map((a) => ({
        key: `a${a.id}`,
        at: a.at,
        who: a.actor,
        text: describeAction(a),
      })),
    ].sort((a, b) => (a.at < b.at ? 1 : a.at > b.at ? -1 : 0));
  }, [query.data]);
  return (
    <section aria-label="History" className="space-y-2">
      <h3 className="font-semibold text-zinc-900">History</h3>
      {query.isPending ? (
        <Loading label="Loading history…" />
      ) : query.isError ? (
        <ErrorAlert className="text-xs">Could not load the history: {errorWithCode(query.error)}</ErrorAlert>
      ) : entries.length === 0 ? (
        <p className="text-sm text-zinc-500">Nothing recorded yet.</p>
      ) : (
        <ol className="max-h-64 space-y-1.5 overflow-auto text-sm">
          {entries.map((e) => (
            <li key={e.key} className="flex gap-3">
              <time dateTime={e.at} className="shrink-0 tabular-nums text-xs leading-5 text-zinc-500">
                {formatDateTime(e.at)}
              </time>
              <span className="min-w-0 break-words text-zinc-800">
                <span className="font-medium">{e.who}</span> {e.text}
              </span>
            </li>
          ))}
        </ol>
      )}
    </section>
  );
}
