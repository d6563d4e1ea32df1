"use client";

import { useQuery } from "@tanstack/react-query";
import { useCallback, useEffect, useMemo, useState } from "react";
import { AnnounceEnabled, enabledNoticeText } from "@/components/enabled-notice";
import { ToolFilterBar } from "@/components/tool-filter-bar";
import { DEFAULT_PAGE_SIZE, PAGE_SIZES, Pager } from "@/components/tools-pager";
import { ToolsTable } from "@/components/tools-table";
import { Button, EmptyState, ErrorAlert, Loading, PageHeader } from "@/components/ui";
import { useToolFilters } from "@/components/use-tool-filters";
import { selectable, useToolSelection } from "@/components/use-tool-selection";
import type { CatalogueData } from "@/components/use-update-tool";
import { ViewerContext } from "@/components/viewer-context";
import type { CatalogueToolView } from "@/lib/api-types";
import { endpoints } from "@/lib/endpoints";
import { errorWithCode, formatCount, plural } from "@/lib/format";
import { queryKeys } from "@/lib/query-keys";
import type { Viewer } from "@/lib/viewer";

function byServerThenName(a: CatalogueToolView, b: CatalogueToolView): number {
  return a.server.localeCompare(b.server) || a.localName.localeCompare(b.localName);
}

/**
 * The owner's catalogue table. `initial` is the catalogue as the server rendered the page at
 * `renderedAt`; without it the table loads it itself. `viewer`, when given, lets a Try that waits
 * say whether anyone can approve it yet.
 */
export function ToolsView({
  initial,
  renderedAt,
  viewer = null,
}: {
  initial?: CatalogueData;
  renderedAt?: number;
  viewer?: Viewer | null;
} = {}) {
  const query = useQuery({
    queryKey: queryKeys.catalogue.list(),
    queryFn: ({ signal }) => endpoints.catalogue.list({ signal }),
    initialData: initial,
    initialDataUpdatedAt: renderedAt,
  });

  const sorted = useMemo(
    () => (query.data ? [...query.data.tools].sort(byServerThenName) : []),
    [query.data],
  );
  const servers = useMemo(() => [...new Set(sorted.map((t) => t.server))], [sorted]);
  const changedCount = useMemo(() => sorted.filter((t) => t.availability === "changed").length, [sorted]);

  const filters = useToolFilters(sorted);
  const { visible, filtered, deferredFilter, server, status, kind, linked } = filters;
  const [expanded, setExpanded] = useState<ReadonlySet<string>>(() => new Set(linked ? [linked] : []));
  const [pageSize, setPageSize] = useState<number>(DEFAULT_PAGE_SIZE);
  const [page, setPage] = useState(0);

  const size = pageSize === 0 ? Math.max(1, visible.length) : pageSize;
  const pages = Math.max(1, Math.ceil(visible.length / size));
  const current = Math.min(page, pages - 1);
  const rows = useMemo(() => visible.slice(current * size, (current + 1) * size), [visible, current, size]);
  // A new filter starts at the first page.
  // biome-ignore lint/correctness/useExhaustiveDependencies: the filters are the trigger, not read.
  useEffect(() => setPage(0), [deferredFilter, server, status, kind, pageSize]);

  const [enabledNotice, setEnabledNotice] = useState<string | null>(null);
  const announceEnabled = useCallback(
    (tools: CatalogueToolView[]) => setEnabledNotice(enabledNoticeText(tools)),
    [],
  );
  const selection = useToolSelection(sorted, rows, announceEnabled);
  const { chosen, bulk } = selection;
  // Nothing proposed is left to pick: the bulk controls would only be a greyed button and a hint.
  const anySelectable = useMemo(() => sorted.some(selectable), [sorted]);

  // Stable, so that memoised rows do not re-render when another row opens.
  const toggleExpand = useCallback((name: string) => {
    setExpanded((old) => {
      const next = new Set(old);
      if (next.has(name)) next.delete(name);
      else next.add(name);
      return next;
    });
  }, []);

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
          {changedCount > 0 && status !== "changed" ? (
            <div
              role="status"
              className="flex flex-wrap items-center justify-between gap-2 rounded-md border border-amber-300 bg-amber-50 px-3 py-2 text-sm text-amber-900"
            >
              <span>
                {plural(changedCount, "enabled tool")} changed on{" "}
                {changedCount === 1 ? "its server" : "their servers"} and cannot be called until you review{" "}
                {changedCount === 1 ? "it" : "them"}.
              </span>
              <Button onClick={() => filters.setStatus("changed")}>Show changed tools</Button>
            </div>
          ) : null}

          <ToolFilterBar filters={filters} servers={servers} />

          <div className="flex min-h-9 flex-wrap items-center justify-between gap-3">
            <p className="text-sm text-zinc-500" aria-live="polite">
              {visible.length === sorted.length
                ? `${formatCount(sorted.length)} ${sorted.length === 1 ? "tool" : "tools"}`
                : `${formatCount(visible.length)} of ${formatCount(sorted.length)} tools match`}
            </p>
            {anySelectable || chosen.length > 0 || bulk.isPending ? (
              <div className="flex flex-wrap items-center gap-2">
                {chosen.length > 0 ? (
                  <>
                    <span className="text-sm text-zinc-700">{chosen.length} selected</span>
                    <Button variant="secondary" onClick={selection.clear} disabled={bulk.isPending}>
                      Clear selection
                    </Button>
                  </>
                ) : (
                  <span className="text-sm text-zinc-500">
                    Select proposed tools to enable several at once.
                  </span>
                )}
                <Button
                  variant="primary"
                  disabled={chosen.length === 0 || bulk.isPending}
                  onClick={() => bulk.mutate(chosen)}
                >
                  {bulk.isPending
                    ? "Enabling…"
                    : `Enable selected${chosen.length > 0 ? ` (${chosen.length})` : ""}`}
                </Button>
              </div>
            ) : null}
          </div>
          {enabledNotice ? (
            <div
              role="status"
              data-testid="enabled-notice"
              className="flex flex-wrap items-start justify-between gap-2 rounded-md border border-emerald-200 bg-emerald-50 px-3 py-2 text-sm text-emerald-900"
            >
              <span className="min-w-0 break-words">{enabledNotice}</span>
              <button
                type="button"
                onClick={() => setEnabledNotice(null)}
                className="text-xs font-medium text-emerald-800 hover:underline"
              >
                Dismiss
              </button>
            </div>
          ) : null}
          {bulk.isError ? <ErrorAlert>Nothing was enabled: {errorWithCode(bulk.error)}</ErrorAlert> : null}

          {visible.length === 0 ? (
            <EmptyState title="No tools match these filters">
              {filtered ? "Clear the filters to see every tool." : null}
            </EmptyState>
          ) : (
            <>
              <AnnounceEnabled.Provider value={announceEnabled}>
                <ViewerContext.Provider value={viewer}>
                  <ToolsTable
                    rows={rows}
                    selected={selection.selected}
                    expanded={expanded}
                    pageSelectable={selection.pageSelectable}
                    pageChosen={selection.pageChosen}
                    onSelect={selection.toggle}
                    onSelectPage={selection.selectPage}
                    onExpand={toggleExpand}
                  />
                </ViewerContext.Provider>
              </AnnounceEnabled.Provider>
              {visible.length > PAGE_SIZES[0] ? (
                <Pager
                  page={current}
                  pages={pages}
                  pageSize={size}
                  choice={pageSize}
                  total={visible.length}
                  onPage={setPage}
                  onPageSize={setPageSize}
                />
              ) : null}
            </>
          )}
        </div>
      )}
    </div>
  );
}
