import { useEffect, useRef } from "react";
import { ToolRow } from "@/components/tool-row";
import { thClass } from "@/components/ui";
import type { CatalogueToolView } from "@/lib/api-types";

/**
 * The catalogue table: one page of rows, with a checkbox column for bulk enabling and a
 * details row under each expanded tool.
 */
export function ToolsTable({
  rows,
  selected,
  expanded,
  pageSelectable,
  pageChosen,
  onSelect,
  onSelectPage,
  onExpand,
}: {
  rows: CatalogueToolView[];
  selected: ReadonlySet<string>;
  expanded: ReadonlySet<string>;
  /** Selectable rows on this page, and how many of them are picked (for the header checkbox). */
  pageSelectable: number;
  pageChosen: number;
  onSelect: (name: string, on: boolean) => void;
  onSelectPage: (on: boolean) => void;
  onExpand: (name: string) => void;
}) {
  return (
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
              <PageCheckbox total={pageSelectable} chosen={pageChosen} onChange={onSelectPage} />
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
              onSelect={onSelect}
              onExpand={onExpand}
            />
          ))}
        </tbody>
      </table>
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
