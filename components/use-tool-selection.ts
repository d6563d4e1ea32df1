import { useMutation, useQueryClient } from "@tanstack/react-query";
import { useCallback, useMemo, useRef, useState } from "react";
import { applyUpdates, refetchIfStale } from "@/components/use-update-tool";
import type { CatalogueToolView } from "@/lib/api-types";
import { endpoints } from "@/lib/endpoints";
import { stillPicked } from "@/lib/tool-picks";

/** Proposed tools that can be enabled are the ones a bulk enable may select. */
export function selectable(tool: CatalogueToolView): boolean {
  return tool.status === "proposed" && tool.availability === "ok";
}

/**
 * The tools picked for a bulk enable, each with the definition hash it had when it was picked:
 * a tool whose server changed it since (while its row was filtered or paged out of view, say)
 * counts as not picked, so a bulk enable never pins a version the owner did not see when
 * choosing it; they pick it again after looking. A name stays picked while its row is out of
 * view; only names still {@link selectable} in `tools`, with the hash they were picked with,
 * count as chosen.
 * @param tools the whole catalogue
 * @param pageRows the rows on the current page, for "select every proposed tool on this page"
 * @param onEnabled told which tools a bulk enable enabled
 */
export function useToolSelection(
  tools: CatalogueToolView[],
  pageRows: CatalogueToolView[],
  onEnabled?: (enabled: CatalogueToolView[]) => void,
) {
  const client = useQueryClient();
  const [picked, setPicked] = useState<ReadonlyMap<string, string>>(() => new Map());

  const byName = useMemo(() => new Map(tools.map((t) => [t.localName, t])), [tools]);
  // Read by the stable `toggle`, which must record the hash of the row as it is shown now.
  const byNameRef = useRef(byName);
  byNameRef.current = byName;
  /** Picked names whose tool still has the hash it was picked with. */
  const selected = useMemo(() => stillPicked(picked, byName), [picked, byName]);
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
    setPicked((old) => {
      const next = new Map(old);
      const hash = byNameRef.current.get(name)?.definitionHash;
      if (on && hash !== undefined) next.set(name, hash);
      else next.delete(name);
      return next;
    });
  }, []);
  const selectPage = (on: boolean) =>
    setPicked((old) => {
      const next = new Map(old);
      for (const t of pageSelectable) {
        if (on) next.set(t.localName, t.definitionHash);
        else next.delete(t.localName);
      }
      return next;
    });
  const clear = () => setPicked(new Map());

  const bulk = useMutation({
    // Each tool's hash as it was when picked: what gets enabled is what the owner saw, or nothing is.
    mutationFn: (names: string[]) =>
      endpoints.catalogue.bulkStatus({
        names,
        status: "enabled",
        expectedHashes: Object.fromEntries(names.map((n) => [n, picked.get(n) ?? ""])),
      }),
    onSuccess: ({ tools: updated }) => {
      applyUpdates(client, updated);
      setPicked(new Map());
      onEnabled?.(updated);
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
