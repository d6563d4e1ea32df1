/**
 * The one factory of react-query keys. Each family starts with its own root so that a live
 * event can invalidate a whole family (`queryKeys.calls.all`) at once.
 */
export const queryKeys = {
  me: () => ["me"] as const,
  servers: {
    all: ["servers"] as const,
    list: () => [...queryKeys.servers.all, "list"] as const,
    resources: (name: string) => [...queryKeys.servers.all, "resources", name] as const,
    resource: (name: string, uri: string) => [...queryKeys.servers.all, "resource", name, uri] as const,
    prompts: (name: string) => [...queryKeys.servers.all, "prompts", name] as const,
  },
  catalogue: {
    all: ["catalogue"] as const,
    list: () => [...queryKeys.catalogue.all, "list"] as const,
    // Under catalogue.all, so every live "catalogue" event refreshes it.
    history: (name: string) => [...queryKeys.catalogue.all, "history", name] as const,
  },
  // The change feed; live "catalogue" events refresh it too.
  changes: {
    all: ["changes"] as const,
    feed: () => [...queryKeys.changes.all, "feed"] as const,
    unread: () => [...queryKeys.changes.all, "unread"] as const,
  },
  calls: {
    all: ["calls"] as const,
    pending: () => [...queryKeys.calls.all, "pending"] as const,
    recent: (limit: number) => [...queryKeys.calls.all, "recent", limit] as const,
    // Under calls.all, so every live "call" event refreshes them.
    activity: (filters: Record<string, string>) => [...queryKeys.calls.all, "activity", filters] as const,
    story: (id: string) => [...queryKeys.calls.all, "story", id] as const,
    one: (id: string) => [...queryKeys.calls.all, "one", id] as const,
    // The Servers page's health panel: its numbers move with calls.
    health: () => [...queryKeys.calls.all, "health"] as const,
  },
  grants: {
    all: ["grants"] as const,
    list: () => [...queryKeys.grants.all, "list"] as const,
  },
  rules: {
    all: ["rules"] as const,
    list: () => [...queryKeys.rules.all, "list"] as const,
  },
  // Agents' resource reads through /mcp; live "resources" events refresh them.
  resourceReads: {
    all: ["resource-reads"] as const,
    list: () => [...queryKeys.resourceReads.all, "list"] as const,
  },
  users: {
    all: ["users"] as const,
    list: () => [...queryKeys.users.all, "list"] as const,
  },
  tokens: {
    all: ["tokens"] as const,
    list: () => [...queryKeys.tokens.all, "list"] as const,
  },
};
