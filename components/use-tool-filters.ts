import { useSearchParams } from "next/navigation";
import { useDeferredValue, useMemo, useState } from "react";
import type { CatalogueToolView, ToolStatus } from "@/lib/api-types";

export type StatusFilter = "all" | ToolStatus | "changed" | "gone" | "unusable";
export type KindFilter = "all" | "destructive" | "read-only";

export const STATUS_OPTIONS: { value: StatusFilter; label: string }[] = [
  { value: "all", label: "Any status" },
  { value: "proposed", label: "Proposed" },
  { value: "enabled", label: "Enabled" },
  { value: "disabled", label: "Disabled" },
  { value: "changed", label: "Changed (needs review)" },
  { value: "gone", label: "Gone" },
  { value: "unusable", label: "Unusable" },
];

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

/**
 * The tools table's filters and the rows they let through. They start from the page's URL:
 * `?tool=<local name>` (a link to one tool: it fills the name filter), else `?q=`, `?server=`
 * (one server's tools; a name no tool has shows none, which the empty state explains), and
 * `?status=` when it names one of {@link STATUS_OPTIONS}.
 */
export function useToolFilters(sorted: CatalogueToolView[]) {
  const params = useSearchParams();
  const linked = params.get("tool");
  const [filter, setFilter] = useState(() => linked ?? params.get("q") ?? "");
  const [server, setServer] = useState(() => params.get("server") ?? "all");
  const [status, setStatus] = useState<StatusFilter>(() =>
    STATUS_OPTIONS.some((o) => o.value === params.get("status"))
      ? (params.get("status") as StatusFilter)
      : "all",
  );
  const [kind, setKind] = useState<KindFilter>("all");
  // Typing stays responsive with a thousand rows: the table re-renders at lower priority.
  const deferredFilter = useDeferredValue(filter);

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

  const filtered = server !== "all" || status !== "all" || kind !== "all" || deferredFilter.trim() !== "";
  const clear = () => {
    setFilter("");
    setServer("all");
    setStatus("all");
    setKind("all");
  };

  return {
    /** The tool the page's URL links to, if any. */
    linked,
    filter,
    setFilter,
    /** The name filter as the table applies it (lags typing under load). */
    deferredFilter,
    server,
    setServer,
    status,
    setStatus,
    kind,
    setKind,
    /** The rows that pass every filter, in `sorted`'s order. */
    visible,
    /** Whether any filter narrows the list. */
    filtered,
    clear,
  };
}

export type ToolFilters = ReturnType<typeof useToolFilters>;
