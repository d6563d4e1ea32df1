import { type QueryClient, useMutation, useQueryClient } from "@tanstack/react-query";
import type { CatalogueToolView, UpdateToolBody } from "@/lib/api-types";
import { endpoints } from "@/lib/endpoints";
import { GatehouseError } from "@/lib/errors";
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

/**
 * After a refusal that means the page is out of date — the tool changed since it was shown
 * (`tool_changed`), or is gone or unknown — fetches the catalogue again, so that the owner sees
 * the version there is now next to the message, and reviews that one.
 */
export function refetchIfStale(client: QueryClient, error: unknown): void {
  if (error instanceof GatehouseError && (error.status === 409 || error.status === 404)) {
    void client.invalidateQueries({ queryKey: queryKeys.catalogue.all });
  }
}

/**
 * One tool's status, vouch or "always confirm", with the answer put into the cached catalogue.
 * Enabling, accepting a change and vouching must send `expectedHash`: the `definitionHash` of
 * the tool as the page shows it when the owner clicks, never a fresh fetch.
 */
export function useUpdateTool(localName: string) {
  const client = useQueryClient();
  return useMutation({
    mutationFn: (body: UpdateToolBody) => endpoints.catalogue.update(localName, body),
    onSuccess: ({ tool }) => applyUpdates(client, [tool]),
    onError: (error) => refetchIfStale(client, error),
  });
}

export type ToolUpdate = ReturnType<typeof useUpdateTool>;
