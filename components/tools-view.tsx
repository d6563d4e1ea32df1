"use client";

import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { memo, useDeferredValue, useId, useMemo, useState } from "react";
import {
  Badge,
  type BadgeTone,
  Button,
  EmptyState,
  ErrorAlert,
  inputClass,
  Loading,
  PageHeader,
  thClass,
} from "@/components/ui";
import { api, seg } from "@/lib/api-client";
import type { CatalogueToolView, ToolStatus } from "@/lib/api-types";
import { errorWithCode } from "@/lib/format";
import { queryKeys } from "@/lib/query-keys";

type CatalogueData = { tools: CatalogueToolView[] };

function byServerThenName(a: CatalogueToolView, b: CatalogueToolView): number {
  return a.server.localeCompare(b.server) || a.localName.localeCompare(b.localName);
}

function matches(tool: CatalogueToolView, needle: string): boolean {
  return (
    tool.localName.toLowerCase().includes(needle) ||
    tool.server.toLowerCase().includes(needle) ||
    tool.remoteName.toLowerCase().includes(needle)
  );
}

export function ToolsView() {
  const filterId = useId();
  const [filter, setFilter] = useState("");
  // Typing stays responsive with hundreds of rows: the table re-renders at lower priority.
  const deferredFilter = useDeferredValue(filter);
  const query = useQuery({
    queryKey: queryKeys.catalogue.list(),
    queryFn: ({ signal }) => api<CatalogueData>("/api/catalogue", { signal }),
  });

  const sorted = useMemo(
    () => (query.data ? [...query.data.tools].sort(byServerThenName) : []),
    [query.data],
  );
  const visible = useMemo(() => {
    const needle = deferredFilter.trim().toLowerCase();
    return needle ? sorted.filter((tool) => matches(tool, needle)) : sorted;
  }, [sorted, deferredFilter]);

  return (
    <div>
      <PageHeader
        title="Tools"
        subtitle="Discovery proposes tools; nothing is callable until an owner enables it. Sorted by server, then name."
      />
      {query.isPending ? (
        <Loading label="Loading tools…" />
      ) : query.isError ? (
        <ErrorAlert>Could not load tools: {errorWithCode(query.error)}</ErrorAlert>
      ) : sorted.length === 0 ? (
        <EmptyState title="No tools discovered yet">
          Tools appear here once a connected server lists them. The Servers page shows each connection.
        </EmptyState>
      ) : (
        <div className="space-y-3">
          <div className="flex flex-wrap items-end gap-3">
            <div className="w-full max-w-sm space-y-1">
              <label htmlFor={filterId} className="block text-sm font-medium text-zinc-700">
                Filter tools
              </label>
              <input
                id={filterId}
                type="search"
                value={filter}
                onChange={(event) => setFilter(event.target.value)}
                placeholder="Tool or server name"
                className={inputClass}
                autoComplete="off"
              />
            </div>
            <p className="pb-1.5 text-sm text-zinc-500" aria-live="polite">
              {visible.length === sorted.length
                ? `${sorted.length} tools`
                : `Showing ${visible.length} of ${sorted.length} tools`}
            </p>
          </div>
          {visible.length === 0 ? (
            <EmptyState title="No tools match this filter" />
          ) : (
            <div className="overflow-x-auto rounded-lg border border-zinc-200 bg-white shadow-xs">
              <table className="w-full min-w-[68rem] table-fixed divide-y divide-zinc-200 text-left text-sm">
                <colgroup>
                  <col className="w-[17rem]" />
                  <col className="w-[8rem]" />
                  <col className="w-[7.5rem]" />
                  <col className="w-[6.5rem]" />
                  <col className="w-[10rem]" />
                  <col />
                  <col className="w-[9rem]" />
                </colgroup>
                <thead className="bg-zinc-50">
                  <tr>
                    <th scope="col" className={thClass}>
                      Tool
                    </th>
                    <th scope="col" className={thClass}>
                      Server
                    </th>
                    <th scope="col" className={thClass}>
                      Kind
                    </th>
                    <th scope="col" className={thClass}>
                      Status
                    </th>
                    <th scope="col" className={thClass}>
                      Availability
                    </th>
                    <th scope="col" className={thClass}>
                      Description
                    </th>
                    <th scope="col" className={thClass}>
                      <span className="sr-only">Action</span>
                    </th>
                  </tr>
                </thead>
                <tbody className="divide-y divide-zinc-100">
                  {visible.map((tool) => (
                    <ToolRow key={tool.localName} tool={tool} />
                  ))}
                </tbody>
              </table>
            </div>
          )}
        </div>
      )}
    </div>
  );
}

const statusTones: Record<ToolStatus, BadgeTone> = { proposed: "blue", enabled: "green", disabled: "grey" };

/** Long enough that three lines of a column this wide may not hold it. */
const LONG_DESCRIPTION = 160;
const LONG_NAME = 60;
const GONE_REASON = "its server no longer lists it";

const ToolRow = memo(function ToolRow({ tool }: { tool: CatalogueToolView }) {
  const client = useQueryClient();
  const reasonId = useId();
  const [expanded, setExpanded] = useState(false);
  const setStatus = useMutation({
    mutationFn: (status: "enabled" | "disabled") =>
      api<{ tool: CatalogueToolView }>(`/api/catalogue/${seg(tool.localName)}`, {
        method: "PATCH",
        json: { status },
      }),
    onSuccess: ({ tool: updated }) => {
      client.setQueryData<CatalogueData>(queryKeys.catalogue.list(), (old) =>
        old ? { tools: old.tools.map((t) => (t.localName === updated.localName ? updated : t)) } : old,
      );
      void client.invalidateQueries({ queryKey: queryKeys.catalogue.all });
      void client.invalidateQueries({ queryKey: queryKeys.servers.all });
    },
  });

  const unusableReason = tool.unusableReason ?? "this tool cannot be called";
  // The API refuses to enable these; say why next to the disabled button instead of failing on click.
  const cannotEnable =
    tool.availability === "unusable" ? unusableReason : tool.availability === "gone" ? GONE_REASON : null;
  const long =
    tool.description.length > LONG_DESCRIPTION ||
    tool.description.split("\n").length > 3 ||
    tool.localName.length > LONG_NAME;

  return (
    <tr data-testid={`tool-${tool.localName}`} className="hover:bg-zinc-50/60">
      <td className="px-3 py-2 align-top">
        <span
          className={`block break-all font-mono text-[0.8125rem] text-zinc-900 ${expanded ? "" : "line-clamp-3"}`}
          title={tool.localName}
        >
          {tool.localName}
        </span>
      </td>
      <td className="px-3 py-2 align-top">
        <span className="block break-all font-mono text-[0.8125rem] text-zinc-700">{tool.server}</span>
      </td>
      <td className="px-3 py-2 align-top">
        {tool.destructive ? <Badge tone="red">destructive</Badge> : <Badge tone="grey">read-only</Badge>}
      </td>
      <td className="px-3 py-2 align-top">
        <Badge tone={statusTones[tool.status]}>{tool.status}</Badge>
      </td>
      <td className="px-3 py-2 align-top">
        {tool.availability === "ok" ? (
          <span className="text-zinc-400">ok</span>
        ) : tool.availability === "changed" ? (
          <Badge
            tone="amber"
            title="The server changed this tool's definition; it cannot be called until re-enabled"
          >
            changed
          </Badge>
        ) : tool.availability === "gone" ? (
          <>
            <Badge tone="grey">gone</Badge>
            <span id={reasonId} className="mt-1 block text-xs text-zinc-500">
              {GONE_REASON}
            </span>
          </>
        ) : (
          <span id={reasonId} className="block break-words text-rose-700">
            unusable: {unusableReason}
          </span>
        )}
      </td>
      <td className="px-3 py-2 align-top">
        {tool.description ? (
          <p className={`whitespace-pre-line break-words text-zinc-700 ${expanded ? "" : "line-clamp-3"}`}>
            {tool.description}
          </p>
        ) : (
          <span className="text-zinc-400">No description</span>
        )}
        {long ? (
          <button
            type="button"
            onClick={() => setExpanded((value) => !value)}
            aria-expanded={expanded}
            className="mt-1 text-xs font-medium text-indigo-700 hover:underline"
          >
            {expanded ? "Show less" : "Show more"}
          </button>
        ) : null}
      </td>
      <td className="px-3 py-2 align-top">
        <div className="flex flex-col items-start gap-1.5">
          {tool.status === "enabled" ? (
            <Button
              variant="secondary"
              disabled={setStatus.isPending}
              onClick={() => setStatus.mutate("disabled")}
            >
              Disable
            </Button>
          ) : (
            <>
              <Button
                variant="primary"
                disabled={setStatus.isPending || cannotEnable !== null}
                aria-describedby={cannotEnable ? reasonId : undefined}
                title={cannotEnable ? `Cannot be enabled: ${cannotEnable}` : undefined}
                onClick={() => setStatus.mutate("enabled")}
              >
                Enable
              </Button>
              {cannotEnable ? <span className="text-xs text-zinc-500">Cannot be enabled</span> : null}
            </>
          )}
          {tool.status === "enabled" && tool.availability === "changed" ? (
            <Button
              variant="secondary"
              disabled={setStatus.isPending}
              title="Enable the tool again with its new definition"
              onClick={() => setStatus.mutate("enabled")}
            >
              Accept change
            </Button>
          ) : null}
          {setStatus.isError ? (
            <ErrorAlert className="px-2 py-1 text-xs">{errorWithCode(setStatus.error)}</ErrorAlert>
          ) : null}
        </div>
      </td>
    </tr>
  );
});
