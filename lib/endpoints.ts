/**
 * Every HTTP endpoint the browser calls, one function each, with its method, path, body and
 * answer types in one place. All go through `api<T>()`, so a failure arrives as the same
 * `GatehouseError` the server threw. Names and ids from data are escaped as path segments.
 */
import type { z } from "zod";
import { api, seg } from "@/lib/api-client";
import type {
  ApproveBody,
  BulkToolStatusBody,
  CallBody,
  CallListQuery,
  CallStoryView,
  CallsPage,
  CallView,
  CatalogueToolView,
  ChangePasswordBody,
  ChangesPage,
  CreateTokenBody,
  CreateUserBody,
  DenyBody,
  GrantListView,
  GrantView,
  HealthPanelView,
  MarkChangesReadBody,
  PromptView,
  ResourceContentView,
  ResourceReadsPage,
  ResourceView,
  RuleListView,
  ServerView,
  SetupBody,
  SignInBody,
  TokenActivityView,
  TokenView,
  ToolHistoryView,
  UpdateTokenBody,
  UpdateToolBody,
  UpdateUserBody,
  UserView,
} from "@/lib/api-types";
import type { NotificationsView } from "@/lib/notification-types";

/** What a read passes on: react-query's signal, which aborts the fetch when nobody wants it. */
export interface ReadInit {
  signal?: AbortSignal;
}

/**
 * Filters of `GET /api/calls` as the URL carries them (the server validates each); empty and
 * absent ones are left out of the query string.
 */
export type CallListFilters = Partial<Record<keyof CallListQuery, string | number | undefined>>;

function queryString(params: Record<string, string | number | undefined>): string {
  const search = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    if (value !== undefined && value !== "") search.set(key, String(value));
  }
  return search.toString();
}

export const endpoints = {
  /** `POST /api/setup`: creates the first owner and signs them in. */
  setup: (body: z.input<typeof SetupBody>) =>
    api<{ user: UserView }>("/api/setup", { method: "POST", json: body }),

  session: {
    /** `POST /api/session`: sets the session cookie. */
    signIn: (body: z.input<typeof SignInBody>) =>
      api<{ user: UserView }>("/api/session", { method: "POST", json: body }),
    /** `DELETE /api/session`: answers 204. */
    signOut: () => api<void>("/api/session", { method: "DELETE" }),
  },

  users: {
    list: (init?: ReadInit) => api<{ users: UserView[] }>("/api/users", init),
    create: (body: z.input<typeof CreateUserBody>) =>
      api<{ user: UserView }>("/api/users", { method: "POST", json: body }),
    /**
     * `PATCH /api/users/:name`: sets a person's email ("" clears it), their roles (at least one;
     * the last owner keeps "owner", else 409) and/or a new password (a reset: all their sessions
     * end, `sessionsEnded` says how many).
     */
    update: (name: string, body: z.input<typeof UpdateUserBody>) =>
      api<{ user: UserView; sessionsEnded: number }>(`/api/users/${seg(name)}`, {
        method: "PATCH",
        json: body,
      }),
    /**
     * `DELETE /api/users/:name`: removes a person (never the last owner, 409); their grants end,
     * pending calls are withdrawn, sessions end. Removing yourself signs you out.
     */
    remove: (name: string) =>
      api<{ user: UserView; sessionsEnded: number; grantsEnded: number; callsWithdrawn: number }>(
        `/api/users/${seg(name)}`,
        { method: "DELETE" },
      ),
    /** `DELETE /api/users/:name/sessions`: signs a person out everywhere; answers how many sessions ended. */
    endSessions: (name: string) =>
      api<{ ended: number }>(`/api/users/${seg(name)}/sessions`, { method: "DELETE" }),
  },

  me: {
    /** `POST /api/me/password`: changes your own password; your other sessions end, this one stays. */
    changePassword: (body: z.input<typeof ChangePasswordBody>) =>
      api<{ user: UserView; sessionsEnded: number }>("/api/me/password", { method: "POST", json: body }),
  },

  tokens: {
    /** The tokens, the tool sets the configuration offers them, and each token's recent activity. */
    list: (init?: ReadInit) =>
      api<{ tokens: TokenView[]; toolSets: string[]; activity: Record<string, TokenActivityView> }>(
        "/api/tokens",
        init,
      ),
    /** The secret is in this answer only. */
    create: (body: z.input<typeof CreateTokenBody>) =>
      api<{ token: TokenView; secret: string }>("/api/tokens", { method: "POST", json: body }),
    revoke: (name: string) => api<{ token: TokenView }>(`/api/tokens/${seg(name)}`, { method: "DELETE" }),
    /** Moves the token into another tool set (audited); its next request is judged by it. */
    update: (name: string, body: z.input<typeof UpdateTokenBody>) =>
      api<{ token: TokenView }>(`/api/tokens/${seg(name)}`, { method: "PATCH", json: body }),
  },

  servers: {
    list: (init?: ReadInit) => api<{ servers: ServerView[] }>("/api/servers", init),
    /** `GET /api/health`: the health panel's numbers. */
    health: (init?: ReadInit) => api<HealthPanelView>("/api/health", init),
    /** `POST /api/servers/:name/reconnect`: answers 202 with the server as it is now. */
    reconnect: (name: string) =>
      api<{ server: ServerView }>(`/api/servers/${seg(name)}/reconnect`, { method: "POST" }),
    /** `POST /api/servers/:name/switch`: switches a server without `enabled` in its entry on or off. */
    switch: (name: string, on: boolean) =>
      api<{ server: ServerView }>(`/api/servers/${seg(name)}/switch`, {
        method: "POST",
        json: { on },
      }),
    resources: (name: string, init?: ReadInit) =>
      api<{ supported: boolean; resources: ResourceView[] }>(`/api/servers/${seg(name)}/resources`, init),
    readResource: (name: string, uri: string, init?: ReadInit) =>
      api<ResourceContentView>(
        `/api/servers/${seg(name)}/resources/read?uri=${encodeURIComponent(uri)}`,
        init,
      ),
    prompts: (name: string, init?: ReadInit) =>
      api<{ supported: boolean; prompts: PromptView[] }>(`/api/servers/${seg(name)}/prompts`, init),
    /**
     * `POST /api/servers/:name/oauth`: starts an owner's sign-in; the browser goes to
     * `authorizationUrl`, and the authorization server sends it back to `/oauth/callback`.
     */
    connect: (name: string) =>
      api<{ authorizationUrl: string }>(`/api/servers/${seg(name)}/oauth`, { method: "POST" }),
    /**
     * `DELETE /api/servers/:name/oauth`: forgets the grant, revoking its tokens where the
     * authorization server offers revocation (`revocation` says how that went;
     * `accessExpiresAt`, until when an access token not revoked stays valid there).
     */
    disconnect: (name: string) =>
      api<{
        server: ServerView;
        revocation: "revoked" | "refresh_only" | "not_offered" | "failed";
        accessExpiresAt: string | null;
      }>(`/api/servers/${seg(name)}/oauth`, { method: "DELETE" }),
  },

  catalogue: {
    list: (init?: ReadInit) => api<{ tools: CatalogueToolView[] }>("/api/catalogue", init),
    /** `PATCH /api/catalogue/:name`: status, vouch and/or "always confirm" of one tool. */
    update: (localName: string, body: z.input<typeof UpdateToolBody>) =>
      api<{ tool: CatalogueToolView }>(`/api/catalogue/${seg(localName)}`, { method: "PATCH", json: body }),
    /** `POST /api/catalogue/bulk`: one status for many tools, all or nothing; the tools it changed. */
    bulkStatus: (body: z.input<typeof BulkToolStatusBody>) =>
      api<{ tools: CatalogueToolView[] }>("/api/catalogue/bulk", { method: "POST", json: body }),
    history: (localName: string, init?: ReadInit) =>
      api<ToolHistoryView>(`/api/catalogue/${seg(localName)}/history`, init),
  },

  changes: {
    /** `GET /api/changes`: newest first; `before` (a change id) asks for the next, older page. */
    page: (params: { limit: number; before?: number }, init?: ReadInit) =>
      api<ChangesPage>(`/api/changes?${queryString(params)}`, init),
    /** `POST /api/changes/read`: marks everything up to `upTo` read for the caller. */
    markRead: (body: z.input<typeof MarkChangesReadBody>) =>
      api<{ lastSeenId: number; unread: number }>("/api/changes/read", { method: "POST", json: body }),
  },

  notifications: {
    /** `GET /api/notifications` (owners): each webhook and email channel with its last deliveries. */
    get: (init?: ReadInit) => api<NotificationsView>("/api/notifications", init),
  },

  calls: {
    /** `GET /api/calls`: newest first, paged with `before` (the previous page's `nextBefore`). */
    list: (params: CallListFilters, init?: ReadInit) =>
      api<CallsPage>(`/api/calls?${queryString(params)}`, init),
    /** `GET /api/calls/:id`: the call now, without waiting. */
    get: (id: string, init?: ReadInit) => api<CallView>(`/api/calls/${seg(id)}`, init),
    story: (id: string, init?: ReadInit) => api<CallStoryView>(`/api/calls/${seg(id)}/story`, init),
    /** `POST /api/calls`: answers with the call, refused, finished or pending. */
    request: (body: z.input<typeof CallBody>) => api<CallView>("/api/calls", { method: "POST", json: body }),
    /**
     * `POST /api/calls/:id/approve`, optionally granting what follows (`{grant}`). A call that needs
     * more approvals answers still `pending`, with `approvedBy` grown by one.
     */
    approve: (id: string, body: z.input<typeof ApproveBody> = {}) =>
      api<{ call: CallView }>(`/api/calls/${seg(id)}/approve`, { method: "POST", json: body }),
    deny: (id: string, body: z.input<typeof DenyBody>) =>
      api<{ call: CallView }>(`/api/calls/${seg(id)}/deny`, { method: "POST", json: body }),
  },

  grants: {
    /** `GET /api/grants` (reviewers, owners): live grants, newest first, then recently ended ones. */
    list: (init?: ReadInit) => api<GrantListView>("/api/grants", init),
    /** `DELETE /api/grants/:id`: ends it now; answers with the grant as ended. */
    revoke: (id: string) => api<{ grant: GrantView }>(`/api/grants/${seg(id)}`, { method: "DELETE" }),
  },

  rules: {
    /** `GET /api/rules` (reviewers, owners): the rules of gatehouse.json in the order they are tried. */
    list: (init?: ReadInit) => api<RuleListView>("/api/rules", init),
  },

  resourceReads: {
    /**
     * `GET /api/resource-reads` (reviewers, owners): agents' resource reads and refusals through
     * `/mcp`, newest first; `before` (the previous page's `nextBefore`) asks for older ones.
     */
    page: (params: { limit: number; before?: number | undefined }, init?: ReadInit) =>
      api<ResourceReadsPage>(`/api/resource-reads?${queryString(params)}`, init),
  },
};
