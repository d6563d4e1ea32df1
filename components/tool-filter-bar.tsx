import { type ReactNode, useId } from "react";
import { Button, inputClass } from "@/components/ui";
import {
  type KindFilter,
  STATUS_OPTIONS,
  type StatusFilter,
  type ToolFilters,
} from "@/components/use-tool-filters";

/** The tools table's filter controls: name, server, status, kind, and "Clear filters" when one is set. */
export function ToolFilterBar({ filters, servers }: { filters: ToolFilters; servers: string[] }) {
  const ids = { search: useId(), server: useId(), status: useId(), kind: useId() };
  return (
    <div className="flex flex-wrap items-end gap-3">
      <div className="w-full max-w-xs space-y-1">
        <label htmlFor={ids.search} className="block text-sm font-medium text-zinc-700">
          Filter tools
        </label>
        <input
          id={ids.search}
          type="search"
          value={filters.filter}
          onChange={(event) => filters.setFilter(event.target.value)}
          placeholder="Tool name"
          // One height for the search box and the selects beside it, so their labels line up.
          className={`${inputClass} h-9`}
          autoComplete="off"
        />
      </div>
      <Select id={ids.server} label="Server" value={filters.server} onChange={filters.setServer}>
        <option value="all">All servers</option>
        {/* A server named by a link (?server=) that lists no tools yet still shows as chosen. */}
        {(filters.server === "all" || servers.includes(filters.server)
          ? servers
          : [...servers, filters.server]
        ).map((s) => (
          <option key={s} value={s}>
            {s}
          </option>
        ))}
      </Select>
      <Select
        id={ids.status}
        label="Status"
        value={filters.status}
        onChange={(v) => filters.setStatus(v as StatusFilter)}
      >
        {STATUS_OPTIONS.map((o) => (
          <option key={o.value} value={o.value}>
            {o.label}
          </option>
        ))}
      </Select>
      <Select
        id={ids.kind}
        label="Kind"
        value={filters.kind}
        onChange={(v) => filters.setKind(v as KindFilter)}
      >
        <option value="all">Any kind</option>
        <option value="destructive">Destructive (needs approval)</option>
        <option value="read-only">Read-only (runs at once)</option>
      </Select>
      {filters.filtered ? (
        <Button className="h-9" onClick={filters.clear}>
          Clear filters
        </Button>
      ) : null}
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
        className={`${inputClass.replace("w-full", "")} h-9 w-auto min-w-36 max-w-64 pr-8`}
      >
        {children}
      </select>
    </div>
  );
}
