"use client";

import { type QueryClient, useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useSearchParams } from "next/navigation";
import {
  memo,
  type ReactNode,
  useCallback,
  useDeferredValue,
  useEffect,
  useId,
  useMemo,
  useRef,
  useState,
} from "react";
import { describeAction, describeChange } from "@/components/change-text";
import { DefinitionDiffView, JsonBlock } from "@/components/definition-diff";
import { TryTool } from "@/components/try-tool";
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
import { VisibleText } from "@/components/visible-text";
import { api, seg } from "@/lib/api-client";
import type { CatalogueToolView, ToolHistoryView, ToolStatus, UpdateToolBody } from "@/lib/api-types";
import { errorWithCode, formatDateTime, plural } from "@/lib/format";
import { queryKeys } from "@/lib/query-keys";

type CatalogueData = { tools: CatalogueToolView[] };

type StatusFilter = "all" | ToolStatus | "changed" | "gone" | "unusable";
type KindFilter = "all" | "destructive" | "read-only";

const STATUS_OPTIONS: { value: StatusFilter; label: string }[] = [
  { value: "all", label: "Any status" },
  { value: "proposed", label: "Proposed" },
  { value: "enabled", label: "Enabled" },
  { value: "disabled", label: "Disabled" },
  { value: "changed", label: "Changed (needs review)" },
  { value: "gone", label: "Gone" },
  { value: "unusable", label: "Unusable" },
];

/**
 * Rows per page (0: all). A server has at most 200 tools, so "this server" always fits one page
 * of the default size; "All" is for reading everything at once (1,200 rows render in well under
 * a second, see e2e/governance.spec.ts).
 */
const PAGE_SIZES = [50, 100, 250, 500, 0] as const;
const DEFAULT_PAGE_SIZE = 250;

function byServerThenName(a: CatalogueToolView, b: CatalogueToolView): number {
  return a.server.localeCompare(b.server) || a.localName.localeCompare(b.localName);
}

function matchesStatus(tool: CatalogueToolView, status: StatusFilter): boolean {
  if (status === "all") return true;
  if (status === "changed" || status === "gone" || status === "unusable") return tool.availability === status;
  return tool.status === status;
}

function matchesKind(tool: CatalogueToolView, kind: KindFilter): boolean {
  return kind === "all" || (kind === "destructive") === tool.destructive;
}

function matchesName(tool: CatalogueToolView, needle: string): boolean {
  return (
    needle === "" ||
    tool.localName.toLowerCase().includes(needle) ||
    tool.remoteName.toLowerCase().includes(needle)
  );
}

/** Proposed tools that can be enabled are the ones a bulk enable may select. */
function selectable(tool: CatalogueToolView): boolean {
  return tool.status === "proposed" && tool.availability === "ok";
}

/** Puts updated tools into the cached catalogue, then refreshes what depends on it. */
function applyUpdates(client: QueryClient, updated: CatalogueToolView[]): void {
  const byName = new Map(updated.map((t) => [t.localName, t]));
  client.setQueryData<CatalogueData>(queryKeys.catalogue.list(), (old) =>
    old ? { tools: old.tools.map((t) => byName.get(t.localName) ?? t) } : old,
  );
  void client.invalidateQueries({ queryKey: queryKeys.catalogue.all });
  void client.invalidateQueries({ queryKey: queryKeys.servers.all });
}

function useUpdateTool(localName: string) {
  const client = useQueryClient();
  return useMutation({
    mutationFn: (body: UpdateToolBody) =>
      api<{ tool: CatalogueToolView }>(`/api/catalogue/${seg(localName)}`, { method: "PATCH", json: body }),
    onSuccess: ({ tool }) => applyUpdates(client, [tool]),
  });
}

/**
 * The owner's catalogue table. `initial` is the catalogue as the server rendered the page at
 * `renderedAt`; without it the table loads it itself.
 */
export function ToolsView({ initial, renderedAt }: { initial?: CatalogueData; renderedAt?: number } = {}) {
  const params = useSearchParams();
  const linked = params.get("tool");
  const ids = { search: useId(), server: useId(), status: useId(), kind: useId(), size: useId() };
  const [filter, setFilter] = useState(() => linked ?? params.get("q") ?? "");
  const [server, setServer] = useState("all");
  const [status, setStatus] = useState<StatusFilter>(() =>
    STATUS_OPTIONS.some((o) => o.value === params.get("status"))
      ? (params.get("status") as StatusFilter)
      : "all",
  );
  const [kind, setKind] = useState<KindFilter>("all");
  const [pageSize, setPageSize] = useState<number>(DEFAULT_PAGE_SIZE);
  const [page, setPage] = useState(0);
  const [selected, setSelected] = useState<ReadonlySet<string>>(() => new Set());
  const [expanded, setExpanded] = useState<ReadonlySet<string>>(() => new Set(linked ? [linked] : []));
  // Typing stays responsive with a thousand rows: the table re-renders at lower priority.
  const deferredFilter = useDeferredValue(filter);
  const client = useQueryClient();

  const query = useQuery({
    queryKey: queryKeys.catalogue.list(),
    queryFn: ({ signal }) => api<CatalogueData>("/api/catalogue", { signal }),
    initialData: initial,
    initialDataUpdatedAt: renderedAt,
  });

  const sorted = useMemo(
    () => (query.data ? [...query.data.tools].sort(byServerThenName) : []),
    [query.data],
  );
  const servers = useMemo(() => [...new Set(sorted.map((t) => t.server))], [sorted]);
  const changedCount = useMemo(() => sorted.filter((t) => t.availability === "changed").length, [sorted]);
  const visible = useMemo(() => {
    const needle = deferredFilter.trim().toLowerCase();
    return sorted.filter(
      (t) =>
        (server === "all" || t.server === server) &&
        matchesStatus(t, status) &&
        matchesKind(t, kind) &&
        matchesName(t, needle),
    );
  }, [sorted, deferredFilter, server, status, kind]);

  const size = pageSize === 0 ? Math.max(1, visible.length) : pageSize;
  const pages = Math.max(1, Math.ceil(visible.length / size));
  const current = Math.min(page, pages - 1);
  const rows = useMemo(() => visible.slice(current * size, (current + 1) * size), [visible, current, size]);
  // A new filter starts at the first page.
  // biome-ignore lint/correctness/useExhaustiveDependencies: the filters are the trigger, not read.
  useEffect(() => setPage(0), [deferredFilter, server, status, kind, pageSize]);

  const byName = useMemo(() => new Map(sorted.map((t) => [t.localName, t])), [sorted]);
  const chosen = useMemo(
    () =>
      [...selected].filter((n) => {
        const t = byName.get(n);
        return t !== undefined && selectable(t);
      }),
    [selected, byName],
  );
  const pageSelectable = rows.filter(selectable);
  const pageChosen = pageSelectable.filter((t) => selected.has(t.localName)).length;

  const toggleSelect = useCallback((name: string, on: boolean) => {
    setSelected((old) => {
      const next = new Set(old);
      if (on) next.add(name);
      else next.delete(name);
      return next;
    });
  }, []);
  const toggleExpand = useCallback((name: string) => {
    setExpanded((old) => {
      const next = new Set(old);
      if (next.has(name)) next.delete(name);
      else next.add(name);
      return next;
    });
  }, []);
  const selectPage = (on: boolean) =>
    setSelected((old) => {
      const next = new Set(old);
      for (const t of pageSelectable) {
        if (on) next.add(t.localName);
        else next.delete(t.localName);
      }
      return next;
    });

  const bulk = useMutation({
    mutationFn: (names: string[]) =>
      api<{ tools: CatalogueToolView[] }>("/api/catalogue/bulk", {
        method: "POST",
        json: { names, status: "enabled" },
      }),
    onSuccess: ({ tools }) => {
      applyUpdates(client, tools);
      setSelected(new Set());
    },
  });

  const filtered = server !== "all" || status !== "all" || kind !== "all" || deferredFilter.trim() !== "";

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
              <Button onClick={() => setStatus("changed")}>Show changed tools</Button>
            </div>
          ) : null}

          <div className="flex flex-wrap items-end gap-3">
            <div className="w-full max-w-xs space-y-1">
              <label htmlFor={ids.search} className="block text-sm font-medium text-zinc-700">
                Filter tools
              </label>
              <input
                id={ids.search}
                type="search"
                value={filter}
                onChange={(event) => setFilter(event.target.value)}
                placeholder="Tool name"
                className={inputClass}
                autoComplete="off"
              />
            </div>
            <Select id={ids.server} label="Server" value={server} onChange={setServer}>
              <option value="all">All servers</option>
              {servers.map((s) => (
                <option key={s} value={s}>
                  {s}
                </option>
              ))}
            </Select>
            <Select
              id={ids.status}
              label="Status"
              value={status}
              onChange={(v) => setStatus(v as StatusFilter)}
            >
              {STATUS_OPTIONS.map((o) => (
                <option key={o.value} value={o.value}>
                  {o.label}
                </option>
              ))}
            </Select>
            <Select id={ids.kind} label="Kind" value={kind} onChange={(v) => setKind(v as KindFilter)}>
              <option value="all">Any kind</option>
              <option value="destructive">Destructive (needs approval)</option>
              <option value="read-only">Read-only (runs at once)</option>
            </Select>
            {filtered ? (
              <Button
                onClick={() => {
                  setFilter("");
                  setServer("all");
                  setStatus("all");
                  setKind("all");
                }}
              >
                Clear filters
              </Button>
            ) : null}
          </div>

          <div className="flex min-h-9 flex-wrap items-center justify-between gap-3">
            <p className="text-sm text-zinc-500" aria-live="polite">
              {visible.length === sorted.length
                ? `${count(sorted.length)} ${sorted.length === 1 ? "tool" : "tools"}`
                : `${count(visible.length)} of ${count(sorted.length)} tools match`}
            </p>
            <div className="flex flex-wrap items-center gap-2">
              {chosen.length > 0 ? (
                <>
                  <span className="text-sm text-zinc-700">{chosen.length} selected</span>
                  <Button
                    variant="secondary"
                    onClick={() => setSelected(new Set())}
                    disabled={bulk.isPending}
                  >
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
          </div>
          {bulk.isError ? <ErrorAlert>Nothing was enabled: {errorWithCode(bulk.error)}</ErrorAlert> : null}

          {visible.length === 0 ? (
            <EmptyState title="No tools match these filters">
              {filtered ? "Clear the filters to see every tool." : null}
            </EmptyState>
          ) : (
            <>
              <div className="overflow-x-auto rounded-lg border border-zinc-200 bg-white shadow-xs">
                <table className="w-full min-w-[72rem] table-fixed divide-y divide-zinc-200 text-left text-sm">
                  <colgroup>
                    <col className="w-[2.75rem]" />
                    <col className="w-[17rem]" />
                    <col className="w-[8rem]" />
                    <col className="w-[10rem]" />
                    <col className="w-[6.5rem]" />
                    <col className="w-[9rem]" />
                    <col />
                    <col className="w-[10.5rem]" />
                  </colgroup>
                  <thead className="bg-zinc-50">
                    <tr>
                      <th scope="col" className="px-3 py-2">
                        <PageCheckbox
                          total={pageSelectable.length}
                          chosen={pageChosen}
                          onChange={selectPage}
                        />
                      </th>
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
                        <span className="sr-only">Actions</span>
                      </th>
                    </tr>
                  </thead>
                  <tbody className="divide-y divide-zinc-100">
                    {rows.map((tool) => (
                      <ToolRow
                        key={tool.localName}
                        tool={tool}
                        selected={selected.has(tool.localName)}
                        expanded={expanded.has(tool.localName)}
                        onSelect={toggleSelect}
                        onExpand={toggleExpand}
                      />
                    ))}
                  </tbody>
                </table>
              </div>
              {visible.length > PAGE_SIZES[0] ? (
                <Pager
                  page={current}
                  pages={pages}
                  pageSize={size}
                  choice={pageSize}
                  total={visible.length}
                  sizeId={ids.size}
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

function Select({
  id,
  label,
  value,
  onChange,
  children,
}: {
  id: string;
  label: string;
  value: string;
  onChange: (value: string) => void;
  children: ReactNode;
}) {
  return (
    <div className="space-y-1">
      <label htmlFor={id} className="block text-sm font-medium text-zinc-700">
        {label}
      </label>
      <select
        id={id}
        value={value}
        onChange={(e) => onChange(e.target.value)}
        className={`${inputClass.replace("w-full", "")} w-auto min-w-36 max-w-64 pr-8`}
      >
        {children}
      </select>
    </div>
  );
}

function PageCheckbox({
  total,
  chosen,
  onChange,
}: {
  total: number;
  chosen: number;
  onChange: (on: boolean) => void;
}) {
  const ref = useRef<HTMLInputElement>(null);
  useEffect(() => {
    if (ref.current) ref.current.indeterminate = chosen > 0 && chosen < total;
  }, [chosen, total]);
  return (
    <input
      ref={ref}
      type="checkbox"
      aria-label="Select every proposed tool on this page"
      title={total === 0 ? "No proposed tools on this page" : "Select every proposed tool on this page"}
      disabled={total === 0}
      checked={total > 0 && chosen === total}
      onChange={(e) => onChange(e.target.checked)}
      className="size-4 rounded border-zinc-300 accent-indigo-600"
    />
  );
}

function Pager({
  page,
  pages,
  pageSize,
  choice,
  total,
  sizeId,
  onPage,
  onPageSize,
}: {
  page: number;
  pages: number;
  pageSize: number;
  /** The chosen option (0: all). */
  choice: number;
  total: number;
  sizeId: string;
  onPage: (page: number) => void;
  onPageSize: (size: number) => void;
}) {
  const first = page * pageSize + 1;
  const last = Math.min(total, (page + 1) * pageSize);
  return (
    <nav
      aria-label="Pages"
      className="flex flex-wrap items-center justify-between gap-3 text-sm text-zinc-600"
    >
      <p>
        Showing {count(first)}–{count(last)} of {count(total)}
      </p>
      <div className="flex flex-wrap items-center gap-2 whitespace-nowrap">
        <label htmlFor={sizeId}>Rows per page</label>
        <select
          id={sizeId}
          value={choice}
          onChange={(e) => onPageSize(Number(e.target.value))}
          className={`${inputClass.replace("w-full", "")} w-auto pr-8`}
        >
          {PAGE_SIZES.map((n) => (
            <option key={n} value={n}>
              {n === 0 ? "All" : n}
            </option>
          ))}
        </select>
        <Button disabled={page === 0} onClick={() => onPage(page - 1)}>
          Previous
        </Button>
        <span aria-live="polite">
          Page {count(page + 1)} of {count(pages)}
        </span>
        <Button disabled={page >= pages - 1} onClick={() => onPage(page + 1)}>
          Next
        </Button>
      </div>
    </nav>
  );
}

const numbers = new Intl.NumberFormat("en");
/** 1,200 rather than 1200. */
function count(n: number): string {
  return numbers.format(n);
}

const statusTones: Record<ToolStatus, BadgeTone> = { proposed: "blue", enabled: "green", disabled: "grey" };

/** Long enough that three lines of a column this wide may not hold it. */
const LONG_DESCRIPTION = 160;
const GONE_REASON = "its server no longer lists it";

function KindCell({ tool }: { tool: CatalogueToolView }) {
  const vouched = tool.vouch ? `vouched by ${tool.vouch.by}` : null;
  if (tool.readOnlyBy && tool.alwaysConfirm) {
    return (
      <>
        <Badge tone="amber" title="Read-only, but the owner requires every call to be confirmed">
          always confirm
        </Badge>
        <span
          className="mt-1 block text-xs text-zinc-500"
          title={tool.vouch ? formatDateTime(tool.vouch.at) : undefined}
        >
          read-only{vouched ? `, ${vouched}` : ""}
        </span>
      </>
    );
  }
  if (tool.readOnlyBy) {
    return (
      <>
        <Badge tone="grey">read-only</Badge>
        {vouched ? (
          <span
            className="mt-1 block break-words text-xs text-emerald-800"
            title={`vouched ${formatDateTime(tool.vouch?.at)}; dropped if the definition changes`}
          >
            {vouched}
          </span>
        ) : null}
      </>
    );
  }
  return (
    <>
      <Badge tone="red">destructive</Badge>
      {tool.approvalReason ? (
        <span className="mt-1 block text-xs text-zinc-500">{tool.approvalReason}</span>
      ) : null}
    </>
  );
}

const ToolRow = memo(function ToolRow({
  tool,
  selected,
  expanded,
  onSelect,
  onExpand,
}: {
  tool: CatalogueToolView;
  selected: boolean;
  expanded: boolean;
  onSelect: (name: string, on: boolean) => void;
  onExpand: (name: string) => void;
}) {
  const reasonId = useId();
  const detailsId = useId();
  const update = useUpdateTool(tool.localName);

  const unusableReason = tool.unusableReason ?? "this tool cannot be called";
  // The API refuses to enable these; say why next to the disabled button instead of failing on click.
  const cannotEnable =
    tool.availability === "unusable" ? unusableReason : tool.availability === "gone" ? GONE_REASON : null;
  const long = tool.description.length > LONG_DESCRIPTION || tool.description.split("\n").length > 3;

  return (
    <>
      <tr
        data-testid={`tool-${tool.localName}`}
        className={selected ? "bg-indigo-50/60" : expanded ? "bg-zinc-50/70" : "hover:bg-zinc-50/60"}
      >
        <td className="px-3 py-2 align-top">
          {selectable(tool) ? (
            <input
              type="checkbox"
              aria-label={`Select ${tool.localName}`}
              checked={selected}
              onChange={(e) => onSelect(tool.localName, e.target.checked)}
              className="mt-0.5 size-4 rounded border-zinc-300 accent-indigo-600"
            />
          ) : null}
        </td>
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
          <KindCell tool={tool} />
        </td>
        <td className="px-3 py-2 align-top">
          <Badge tone={statusTones[tool.status]}>{tool.status}</Badge>
        </td>
        <td className="px-3 py-2 align-top">
          {tool.availability === "ok" ? (
            <span className="text-zinc-400">ok</span>
          ) : tool.availability === "changed" ? (
            <>
              <Badge
                tone="amber"
                title="The server changed this tool's definition; it cannot be called until reviewed"
              >
                changed
              </Badge>
              <span className="mt-1 block text-xs text-zinc-500">not callable until reviewed</span>
            </>
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
          {long && !expanded ? (
            <button
              type="button"
              onClick={() => onExpand(tool.localName)}
              className="mt-1 text-xs font-medium text-indigo-700 hover:underline"
            >
              Show more
            </button>
          ) : null}
        </td>
        <td className="px-3 py-2 align-top">
          <div className="flex flex-col items-start gap-1.5">
            {tool.availability === "changed" ? (
              <Button
                variant="primary"
                className="whitespace-nowrap"
                aria-expanded={expanded}
                aria-controls={detailsId}
                onClick={() => onExpand(tool.localName)}
              >
                {expanded ? "Hide change" : "Review change"}
              </Button>
            ) : tool.status === "enabled" ? (
              <Button
                variant="secondary"
                disabled={update.isPending}
                onClick={() => update.mutate({ status: "disabled" })}
              >
                Disable
              </Button>
            ) : (
              <>
                <Button
                  variant="primary"
                  disabled={update.isPending || cannotEnable !== null}
                  aria-describedby={cannotEnable ? reasonId : undefined}
                  title={cannotEnable ? `Cannot be enabled: ${cannotEnable}` : undefined}
                  onClick={() => update.mutate({ status: "enabled" })}
                >
                  Enable
                </Button>
                {cannotEnable ? <span className="text-xs text-zinc-500">Cannot be enabled</span> : null}
              </>
            )}
            <TryTool tool={tool} />
            {tool.availability !== "changed" ? (
              <button
                type="button"
                aria-expanded={expanded}
                aria-controls={detailsId}
                onClick={() => onExpand(tool.localName)}
                className="text-xs font-medium text-indigo-700 hover:underline"
              >
                {expanded ? "Hide details" : "Details"}
                <span className="sr-only"> of {tool.localName}</span>
              </button>
            ) : null}
            {update.isError ? (
              <ErrorAlert className="px-2 py-1 text-xs">{errorWithCode(update.error)}</ErrorAlert>
            ) : null}
          </div>
        </td>
      </tr>
      {expanded ? (
        <tr id={detailsId} data-testid={`details-${tool.localName}`} className="bg-zinc-50/70">
          <td colSpan={8} className="border-l-4 border-indigo-200 px-4 pt-1 pb-5">
            <ToolDetails tool={tool} />
          </td>
        </tr>
      ) : null}
    </>
  );
});

function ToolDetails({ tool }: { tool: CatalogueToolView }) {
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
                onClick={() => update.mutate({ status: "enabled" })}
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
            <p className="text-xs font-semibold uppercase tracking-wide text-zinc-500">Description</p>
            <p className="max-h-72 overflow-auto whitespace-pre-wrap break-words rounded-md border border-zinc-200 bg-white p-2 text-zinc-800">
              <VisibleText text={tool.description || "(none)"} />
            </p>
            <p className="text-xs font-semibold uppercase tracking-wide text-zinc-500">Annotations</p>
            <JsonBlock value={tool.annotations} />
          </div>
          <div className="space-y-1">
            <p className="text-xs font-semibold uppercase tracking-wide text-zinc-500">Input schema</p>
            <JsonBlock value={tool.inputSchema} />
          </div>
        </div>
      </details>
    </section>
  );
}

function VouchControl({
  tool,
  update,
}: {
  tool: CatalogueToolView;
  update: ReturnType<typeof useUpdateTool>;
}) {
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
      <Button disabled={update.isPending} onClick={() => update.mutate({ vouch: true })}>
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
    queryFn: ({ signal }) => api<ToolHistoryView>(`/api/catalogue/${seg(localName)}/history`, { signal }),
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
