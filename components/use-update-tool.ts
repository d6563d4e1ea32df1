import { type QueryClient, useMutation, useQueryClient } from "@tanstack/react-query";
import type { CatalogueToolView, UpdateToolBody } from "@/lib/api-types";
import { endpoints } from "@/lib/endpoints";
import { queryKeys } from "@/lib/query-keys";

/** The catalogue as `GET /api/catalogue` answers it, kept under `queryKeys.catalogue.list()`. */
export type CatalogueData = { tools: CatalogueToolView[] };

/** Puts updated tools into the cached catalogue, then refreshes what depends on it. */
export function applyUpdates(client: QueryClient, updated: CatalogueToolView[]): void {
  const byName = new Map(updated.map((t) => [t.localName, t]));
  client.setQueryData<CatalogueData>(queryKeys.catalogue.list(), (old) =>
    old ? { tools: old.tools.map((t) => byName.get(t.localName) ?? t) } : old,
  );
  void client.invalidateQueries({ queryKey: queryKeys.catalogue.all });
  void client.invalidateQueries({ queryKey: queryKeys.servers.all });
}

/** One tool's status, vouch or "always confirm", with the answer put into the cached catalogue. */
export function useUpdateTool(localName: string) {
  const client = useQueryClient();
  return useMutation({
    mutationFn: (body: UpdateToolBody) => endpoints.catalogue.update(localName, body),
    onSuccess: ({ tool }) => applyUpdates(client, [tool]),
  });
}

export type ToolUpdate = ReturnType<typeof useUpdateTool>;
