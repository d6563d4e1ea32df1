"use client";

import { useInfiniteQuery } from "@tanstack/react-query";
import Link from "next/link";
import { type FormEvent, type InputHTMLAttributes, useId, useState } from "react";
import { Age } from "@/components/age";
import { CallStatusBadge } from "@/components/call-status-badge";
import { callErrorText, decisionText, RUN_TIME_MEANING, serverOf } from "@/components/call-text";
import { ResourceReads } from "@/components/resource-reads";
import { Button, EmptyState, ErrorAlert, inputClass, Loading, PageHeader, thClass } from "@/components/ui";
import { type CallView, callStatuses } from "@/lib/api-types";
import { endpoints } from "@/lib/endpoints";
import { errorWithCode, formatDateTime, formatDuration } from "@/lib/format";
import { queryKeys } from "@/lib/query-keys";

/** The filters of the activity list, as they appear in the page's URL (`from`/`to` in ISO 8601). */
export interface ActivityFilters {
  server?: string;
  tool?: string;
  status?: string;
  requester?: string;
  from?: string;
  to?: string;
}

const PAGE_SIZE = 50;

function pad(n: number): string {
  return n.toString().padStart(2, "0");
}

/** An ISO time as a `datetime-local` value in the browser's zone; "" when it is not a time. */
function toLocalInput(iso: string | undefined): string {
  if (!iso) return "";
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return "";
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

/** A `datetime-local` value (browser's zone) as ISO 8601, or undefined when empty. */
function fromLocalInput(value: FormDataEntryValue | null): string | undefined {
  if (typeof value !== "string" || value === "") return undefined;
  const d = new Date(value);
  return Number.isNaN(d.getTime()) ? undefined : d.toISOString();
}

function queryString(filters: ActivityFilters): string {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(filters)) if (value) params.set(key, value);
  return params.toString();
}

/**
 * Every call, newest first, with filters kept in the URL (a filtered view can be shared) and
 * "Load older" paging. Live: each call event refreshes the loaded pages. Below them, agents'
 * resource reads through /mcp, which are no calls.
 */
export function ActivityView({ initial }: { initial: ActivityFilters }) {
  const [filters, setFilters] = useState<ActivityFilters>(initial);
  // Bumped on "Clear" so that the uncontrolled inputs start over from their (empty) defaults.
  const [formKey, setFormKey] = useState(0);
  const id = useId();

  const query = useInfiniteQuery({
    queryKey: queryKeys.calls.activity(filters as Record<string, string>),
    queryFn: ({ pageParam, signal }) =>
      endpoints.calls.list({ ...filters, limit: PAGE_SIZE, before: pageParam ?? undefined }, { signal }),
    initialPageParam: null as string | null,
    getNextPageParam: (last) => last.nextBefore,
  });

  function apply(next: ActivityFilters) {
    setFilters(next);
    const qs = queryString(next);
    window.history.replaceState(null, "", qs ? `/activity?${qs}` : "/activity");
  }

  function onSubmit(event: FormEvent<HTMLFormElement>) {
    event.preventDefault();
    const form = new FormData(event.currentTarget);
    const text = (name: string) => {
      const value = form.get(name);
      return typeof value === "string" && value.trim() ? value.trim() : undefined;
    };
    apply({
      server: text("server"),
      tool: text("tool"),
      status: text("status"),
      requester: text("requester"),
      from: fromLocalInput(form.get("from")),
      to: fromLocalInput(form.get("to")),
    });
  }

  const rows = query.data?.pages.flatMap((page) => page.calls) ?? [];
  const filtered = Object.values(filters).some(Boolean);

  return (
    <div>
      <PageHeader
        title="Activity"
        subtitle="Every call, newest first: refused, pending, decided, run. Open one for its whole story. Run time is the tool's: from when Gatehouse sent the call to when the answer came."
      />
      <form
        key={formKey}
        onSubmit={onSubmit}
        aria-label="Filter calls"
        className="mb-5 grid grid-cols-2 gap-3 rounded-lg border border-zinc-200 bg-white p-4 shadow-xs sm:grid-cols-3 lg:grid-cols-6"
      >
        <FilterField id={`${id}-server`} label="Server" name="server" defaultValue={filters.server} />
        <FilterField
          id={`${id}-tool`}
          label="Tool contains"
          name="tool"
          defaultValue={filters.tool}
          placeholder="e.g. note"
        />
        <div className="space-y-1">
          <label htmlFor={`${id}-status`} className="block text-sm font-medium text-zinc-700">
            Status
          </label>
          <select
            id={`${id}-status`}
            name="status"
            defaultValue={filters.status ?? ""}
            className={inputClass}
          >
            <option value="">Any</option>
            {callStatuses.map((s) => (
              <option key={s} value={s}>
                {s}
              </option>
            ))}
          </select>
        </div>
        <FilterField
          id={`${id}-requester`}
          label="Requester"
          name="requester"
          defaultValue={filters.requester}
        />
        <FilterField
          id={`${id}-from`}
          label="From"
          name="from"
          type="datetime-local"
          defaultValue={toLocalInput(filters.from)}
        />
        <FilterField
          id={`${id}-to`}
          label="To"
          name="to"
          type="datetime-local"
          defaultValue={toLocalInput(filters.to)}
        />
        <div className="col-span-full flex flex-wrap items-center gap-2">
          <Button type="submit" variant="primary">
            Apply filters
          </Button>
          {filtered ? (
            <Button
              onClick={() => {
                apply({});
                setFormKey((k) => k + 1);
              }}
            >
              Clear
            </Button>
          ) : null}
          <span className="text-sm text-zinc-500" aria-live="polite">
            {query.isSuccess
              ? `${rows.length}${query.hasNextPage ? "+" : ""} ${rows.length === 1 ? "call" : "calls"}${filtered ? " match" : ""}`
              : null}
          </span>
        </div>
      </form>

      {query.isPending ? (
        <Loading label="Loading calls…" />
      ) : query.isError ? (
        <ErrorAlert>Could not load calls: {errorWithCode(query.error)}</ErrorAlert>
      ) : rows.length === 0 ? (
        <EmptyState title={filtered ? "No calls match these filters" : "No calls yet"}>
          {filtered ? "Clear a filter to see more." : "Calls from agents and from Try appear here."}
        </EmptyState>
      ) : (
        <div className="space-y-3">
          <div className="overflow-x-auto rounded-lg border border-zinc-200 bg-white shadow-xs">
            <table aria-label="Calls" className="w-full min-w-[56rem] table-fixed text-left text-sm">
              <colgroup>
                <col className="w-[11rem]" />
                <col />
                <col className="w-[10rem]" />
                <col className="w-[7.5rem]" />
                <col className="w-[14rem]" />
                <col className="w-[6.5rem]" />
              </colgroup>
              <thead className="border-b border-zinc-200 bg-zinc-50">
                <tr>
                  <th scope="col" className={thClass}>
                    Requested
                  </th>
                  <th scope="col" className={thClass}>
                    Tool
                  </th>
                  <th scope="col" className={thClass}>
                    Requester
                  </th>
                  <th scope="col" className={thClass}>
                    Status
                  </th>
                  <th scope="col" className={thClass}>
                    Decision
                  </th>
                  <th scope="col" className={thClass} title={RUN_TIME_MEANING}>
                    Run time
                  </th>
                </tr>
              </thead>
              <tbody className="divide-y divide-zinc-100">
                {rows.map((call) => (
                  <ActivityRow key={call.id} call={call} />
                ))}
              </tbody>
            </table>
          </div>
          {query.hasNextPage ? (
            <Button disabled={query.isFetchingNextPage} onClick={() => void query.fetchNextPage()}>
              {query.isFetchingNextPage ? "Loading…" : "Load older calls"}
            </Button>
          ) : null}
        </div>
      )}
      <div className="mt-10">
        <ResourceReads />
      </div>
    </div>
  );
}

function FilterField({
  id,
  label,
  ...props
}: { id: string; label: string } & InputHTMLAttributes<HTMLInputElement>) {
  return (
    <div className="min-w-0 space-y-1">
      <label htmlFor={id} className="block text-sm font-medium text-zinc-700">
        {label}
      </label>
      <input id={id} className={inputClass} autoComplete="off" {...props} />
    </div>
  );
}

function ActivityRow({ call }: { call: CallView }) {
  const text = decisionText(call);
  const server = serverOf(call);
  // The row says why a run failed; a refusal's code is in the Decision column already.
  const failure = call.status === "failed" ? callErrorText(call) : null;
  return (
    <tr data-testid={`activity-${call.id}`} className="hover:bg-zinc-50/60">
      <td className="px-3 py-2 align-top text-zinc-700">
        <span className="block tabular-nums">{formatDateTime(call.createdAt)}</span>
        <span className="block text-xs text-zinc-500">
          <Age at={call.createdAt} />
        </span>
      </td>
      <td className="px-3 py-2 align-top">
        <Link
          href={`/activity/${encodeURIComponent(call.id)}`}
          className="block break-all font-mono text-[0.8125rem] font-medium text-indigo-700 hover:underline"
        >
          {call.tool}
        </Link>
        {server ? (
          <span className="block text-xs text-zinc-500">
            on <span className="font-mono">{server}</span>
          </span>
        ) : null}
        {failure ? (
          <span
            className="mt-1 line-clamp-2 break-words text-xs text-rose-700"
            title={`${failure.message} (${failure.code})`}
            data-testid="call-error"
          >
            {failure.message} <span className="font-mono">({failure.code})</span>
          </span>
        ) : null}
      </td>
      <td className="px-3 py-2 align-top">
        <span className="block break-all text-zinc-800">{call.requester.name}</span>
        <span className="block text-xs text-zinc-500">{call.requester.kind}</span>
      </td>
      <td className="px-3 py-2 align-top">
        <CallStatusBadge status={call.status} />
        {call.resultTruncated ? (
          <span className="mt-1 block text-xs text-amber-700">Result truncated</span>
        ) : null}
      </td>
      <td className="px-3 py-2 align-top">
        <span className="line-clamp-2 break-words text-zinc-700" title={text}>
          {text}
        </span>
      </td>
      <td className="px-3 py-2 align-top tabular-nums text-zinc-700">
        {call.durationMs !== null ? (
          formatDuration(call.durationMs)
        ) : (
          <span className="text-zinc-400">—</span>
        )}
      </td>
    </tr>
  );
}
