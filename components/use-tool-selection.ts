import { useMutation, useQueryClient } from "@tanstack/react-query";
import { useCallback, useMemo, useState } from "react";
import { applyUpdates, refetchIfStale } from "@/components/use-update-tool";
import type { CatalogueToolView } from "@/lib/api-types";
import { endpoints } from "@/lib/endpoints";

/** Proposed tools that can be enabled are the ones a bulk enable may select. */
export function selectable(tool: CatalogueToolView): boolean {
  return tool.status === "proposed" && tool.availability === "ok";
}

/**
 * The tools picked for a bulk enable. A name stays picked while its row is filtered or paged out
 * of view; only names still {@link selectable} in `tools` count as chosen.
 * @param tools the whole catalogue
 * @param pageRows the rows on the current page, for "select every proposed tool on this page"
 */
export function useToolSelection(tools: CatalogueToolView[], pageRows: CatalogueToolView[]) {
  const client = useQueryClient();
  const [selected, setSelected] = useState<ReadonlySet<string>>(() => new Set());

  const byName = useMemo(() => new Map(tools.map((t) => [t.localName, t])), [tools]);
  const chosen = useMemo(
    () =>
      [...selected].filter((n) => {
        const t = byName.get(n);
        return t !== undefined && selectable(t);
      }),
    [selected, byName],
  );
  const pageSelectable = pageRows.filter(selectable);
  const pageChosen = pageSelectable.filter((t) => selected.has(t.localName)).length;

  // Stable, so that memoised rows do not re-render when another row is picked.
  const toggle = useCallback((name: string, on: boolean) => {
    setSelected((old) => {
      const next = new Set(old);
      if (on) next.add(name);
      else next.delete(name);
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
  const clear = () => setSelected(new Set());

  const bulk = useMutation({
    // Each tool's hash as the page holds it: what gets enabled is what the owner saw, or nothing is.
    mutationFn: (names: string[]) =>
      endpoints.catalogue.bulkStatus({
        names,
        status: "enabled",
        expectedHashes: Object.fromEntries(names.map((n) => [n, byName.get(n)?.definitionHash ?? ""])),
      }),
    onSuccess: ({ tools: updated }) => {
      applyUpdates(client, updated);
      setSelected(new Set());
    },
    // The selection stays, so that the owner can look at the new versions and enable again.
    onError: (error) => refetchIfStale(client, error),
  });

  return {
    selected,
    /** Picked names that can still be enabled. */
    chosen,
    /** Selectable rows on the current page, and how many of them are picked. */
    pageSelectable: pageSelectable.length,
    pageChosen,
    toggle,
    selectPage,
    clear,
    /** Enables every chosen tool in one request. */
    bulk,
  };
}
