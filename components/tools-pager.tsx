import { useId } from "react";
import { Button, inputClass } from "@/components/ui";
import { formatCount } from "@/lib/format";

/**
 * Rows per page (0: all). A server has at most 200 tools, so "this server" always fits one page
 * of the default size; "All" is for reading everything at once (1,200 rows render in well under
 * a second, see e2e/governance.spec.ts).
 */
export const PAGE_SIZES = [50, 100, 250, 500, 0] as const;
export const DEFAULT_PAGE_SIZE = 250;

/** Which rows are shown, the rows-per-page choice, and previous/next. */
export function Pager({
  page,
  pages,
  pageSize,
  choice,
  total,
  onPage,
  onPageSize,
}: {
  page: number;
  pages: number;
  pageSize: number;
  /** The chosen option (0: all). */
  choice: number;
  total: number;
  onPage: (page: number) => void;
  onPageSize: (size: number) => void;
}) {
  const sizeId = useId();
  const first = page * pageSize + 1;
  const last = Math.min(total, (page + 1) * pageSize);
  return (
    <nav
      aria-label="Pages"
      className="flex flex-wrap items-center justify-between gap-3 text-sm text-zinc-600"
    >
      <p>
        Showing {formatCount(first)}–{formatCount(last)} of {formatCount(total)}
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
          Page {formatCount(page + 1)} of {formatCount(pages)}
        </span>
        <Button disabled={page >= pages - 1} onClick={() => onPage(page + 1)}>
          Next
        </Button>
      </div>
    </nav>
  );
}
